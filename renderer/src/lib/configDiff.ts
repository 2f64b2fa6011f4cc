// Config diff for the Compare view: flatten each run's config to dotted paths and keep only
// the paths whose values are not identical across all runs (W&B's "diff only").

export type Flat = Record<string, unknown>;

export function flattenConfig(value: unknown, prefix = '', out: Flat = {}): Flat {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0 && prefix) out[prefix] = {};
    for (const [k, v] of entries) flattenConfig(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (prefix) {
    out[prefix] = value;
  }
  return out;
}

export interface DiffRow {
  path: string;
  /** one value per config, `undefined` where the path is absent */
  values: unknown[];
}

export function configDiff(configs: unknown[]): DiffRow[] {
  const flats = configs.map((c) => flattenConfig(c));
  const paths = new Set<string>();
  for (const f of flats) for (const p of Object.keys(f)) paths.add(p);
  const rows: DiffRow[] = [];
  for (const path of [...paths].sort()) {
    const values = flats.map((f) => (path in f ? f[path] : undefined));
    const first = JSON.stringify(values[0]);
    if (values.some((v) => JSON.stringify(v) !== first)) rows.push({ path, values });
  }
  return rows;
}

export function formatValue(v: unknown): string {
  if (v === undefined) return '(default)';
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
  return JSON.stringify(v);
}

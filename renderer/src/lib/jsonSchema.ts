// Just enough JSON Schema (draft 2020-12 as emitted by zod's toJSONSchema) to generate the
// start-run form: objects, enums, numbers, integers, booleans, strings, arrays of scalars,
// optional fields, defaults and descriptions. Anything else is edited as JSON text.

export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  description?: string;
  title?: string;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
}

export type FieldKind = 'object' | 'enum' | 'number' | 'integer' | 'boolean' | 'string' | 'scalar-array' | 'json';

/** Collapse `anyOf: [X, {type: null}]` (optional/nullable) into X. */
export function unwrap(schema: JsonSchema, root?: JsonSchema): JsonSchema {
  let s = schema;
  if (s.$ref && root?.$defs) {
    const name = s.$ref.replace(/^#\/\$defs\//, '');
    if (root.$defs[name]) s = { ...root.$defs[name], ...s, $ref: undefined };
  }
  const alts = s.anyOf ?? s.oneOf;
  if (alts) {
    const nonNull = alts.filter((a) => a.type !== 'null');
    if (nonNull.length === 1)
      return { ...unwrap(nonNull[0], root), default: s.default ?? nonNull[0].default, description: s.description ?? nonNull[0].description };
    if (nonNull.every((a) => a.const !== undefined)) return { ...s, enum: nonNull.map((a) => a.const) };
  }
  return s;
}

export function fieldKind(schema: JsonSchema, root?: JsonSchema): FieldKind {
  const s = unwrap(schema, root);
  if (s.enum) return 'enum';
  if (s.const !== undefined) return 'enum';
  const t = Array.isArray(s.type) ? s.type.find((x) => x !== 'null') : s.type;
  if (t === 'object' && s.properties) return 'object';
  if (t === 'number') return 'number';
  if (t === 'integer') return 'integer';
  if (t === 'boolean') return 'boolean';
  if (t === 'string') return 'string';
  if (t === 'array' && s.items) {
    const k = fieldKind(s.items, root);
    if (k === 'number' || k === 'integer' || k === 'string' || k === 'enum') return 'scalar-array';
  }
  return 'json';
}

/** The value a fresh form starts with: each field's default, recursively; required objects are filled. */
export function defaultsOf(schema: JsonSchema, root: JsonSchema = schema): unknown {
  const s = unwrap(schema, root);
  if (s.default !== undefined) return structuredClone(s.default);
  if (s.const !== undefined) return s.const;
  if (fieldKind(s, root) === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, sub] of Object.entries(s.properties ?? {})) {
      const v = defaultsOf(sub, root);
      if (v !== undefined) out[k] = v;
    }
    return Object.keys(out).length || s.required?.length ? out : undefined;
  }
  return undefined;
}

/** Set `value` at `path` in a copy of `obj`; `undefined` deletes the key. */
export function setPath(obj: unknown, path: string[], value: unknown): Record<string, unknown> {
  const root: Record<string, unknown> = obj && typeof obj === 'object' ? { ...(obj as Record<string, unknown>) } : {};
  if (path.length === 0) return root;
  let cur = root;
  for (let i = 0; i < path.length - 1; i++) {
    const next = cur[path[i]];
    cur[path[i]] = next && typeof next === 'object' && !Array.isArray(next) ? { ...(next as Record<string, unknown>) } : {};
    cur = cur[path[i]] as Record<string, unknown>;
  }
  const last = path[path.length - 1];
  if (value === undefined) delete cur[last];
  else cur[last] = value;
  return root;
}

export function getPath(obj: unknown, path: string[]): unknown {
  let cur = obj;
  for (const p of path) {
    if (!cur || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[p];
  }
  return cur;
}

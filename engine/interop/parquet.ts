/**
 * Nested parquet columns (lists, structs) from a small type tree, written with hyparquet-writer:
 * what pandas / pyarrow / HF datasets produce for a column of Python dicts and lists, which is
 * what verl's RLHFDataset reads (`prompt` as a list of {role, content} structs, `reward_model`
 * and `extra_info` as structs).
 */
import type { SchemaElement } from 'hyparquet';
import { parquetWriteBuffer } from 'hyparquet-writer';

export type PqType = 'string' | 'int64' | 'double' | 'bool' | { list: PqType } | { struct: Record<string, PqType> };

function elements(name: string, t: PqType, required = false): SchemaElement[] {
  const rep = required ? 'REQUIRED' : 'OPTIONAL';
  if (t === 'string') return [{ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: rep }];
  if (t === 'int64') return [{ name, type: 'INT64', repetition_type: rep }];
  if (t === 'double') return [{ name, type: 'DOUBLE', repetition_type: rep }];
  if (t === 'bool') return [{ name, type: 'BOOLEAN', repetition_type: rep }];
  if ('list' in t)
    return [
      { name, repetition_type: rep, converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      ...elements('element', t.list),
    ];
  const keys = Object.keys(t.struct);
  if (keys.length === 0) throw new Error(`parquet: struct "${name}" has no fields (parquet cannot store an empty struct)`);
  return [{ name, repetition_type: rep, num_children: keys.length }, ...keys.flatMap((k) => elements(k, t.struct[k]!))];
}

function convert(v: unknown, t: PqType): unknown {
  if (v === undefined || v === null) return null;
  if (t === 'int64') return BigInt(v as number);
  if (t === 'string' || t === 'double' || t === 'bool') return v;
  if ('list' in t) return (v as unknown[]).map((x) => convert(x, t.list));
  const o = v as Record<string, unknown>;
  return Object.fromEntries(Object.entries(t.struct).map(([k, kt]) => [k, convert(o[k], kt)]));
}

/** Rows (plain objects) to a parquet file buffer with the given column types. */
export function writeParquet(columns: Record<string, PqType>, rows: Record<string, unknown>[], required: string[] = []): ArrayBuffer {
  const names = Object.keys(columns);
  const schema: SchemaElement[] = [{ name: 'root', num_children: names.length }, ...names.flatMap((n) => elements(n, columns[n]!, required.includes(n)))];
  return parquetWriteBuffer({
    columnData: names.map((n) => ({ name: n, data: rows.map((r) => convert(r[n], columns[n]!)) as unknown[] })),
    schema,
  } as Parameters<typeof parquetWriteBuffer>[0]);
}

/** The struct type of a set of plain objects whose leaves are strings, numbers or booleans (union of keys). */
export function inferStruct(objs: Record<string, unknown>[]): PqType {
  const fields: Record<string, PqType> = {};
  for (const o of objs)
    for (const [k, v] of Object.entries(o)) {
      if (v === undefined || v === null || k in fields) continue;
      if (typeof v === 'string') fields[k] = 'string';
      else if (typeof v === 'boolean') fields[k] = 'bool';
      else if (typeof v === 'number') fields[k] = Number.isInteger(v) ? 'int64' : 'double';
      else if (Array.isArray(v)) fields[k] = { list: 'string' };
      else fields[k] = inferStruct(objs.map((x) => (x[k] ?? {}) as Record<string, unknown>));
    }
  return { struct: fields };
}

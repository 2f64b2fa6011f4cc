/**
 * Run groups in the workspace database (migration 7): a seed sweep or a grid is one group whose
 * plan lists its cells (a configuration label, its config overrides, a seed); each run of the
 * group is a normal run with `group_id` and `group_cell` set.
 */
import { randomUUID } from 'node:crypto';
import type { RunRow, Store } from './store';

export interface RunGroupPlanEntry {
  /** The configuration's label: "base" for a seed sweep, else the grid's `key=value` pairs. */
  cell: string;
  /** Config overrides of the cell (dotted key → YAML value text). */
  overrides: Record<string, string>;
  seed: number;
}

export interface RunGroupRow {
  id: string;
  name: string;
  kind: 'seeds' | 'grid';
  configFile: string | null;
  plan: RunGroupPlanEntry[];
  /** running while the sweep process works through the plan; then completed, stopped or failed. */
  status: string;
  createdAt: number;
  endedAt: number | null;
}

export type RunGroupMemberRow = RunRow & { cell: string };

function toGroup(r: Record<string, unknown>): RunGroupRow {
  return {
    id: r.id as string,
    name: r.name as string,
    kind: r.kind as 'seeds' | 'grid',
    configFile: (r.config_file as string | null) ?? null,
    plan: JSON.parse(r.plan as string) as RunGroupPlanEntry[],
    status: r.status as string,
    createdAt: r.created_at as number,
    endedAt: (r.ended_at as number | null) ?? null,
  };
}

export function createRunGroup(store: Store, g: { name: string; kind: 'seeds' | 'grid'; configFile?: string; plan: RunGroupPlanEntry[]; id?: string }): string {
  const id = g.id ?? `g-${randomUUID().slice(0, 8)}`;
  store.db
    .prepare('INSERT INTO run_groups (id, name, kind, config_file, plan, status, created_at) VALUES (?,?,?,?,?,?,?)')
    .run(id, g.name, g.kind, g.configFile ?? null, JSON.stringify(g.plan), 'running', Date.now() / 1000);
  return id;
}

export function setRunGroupStatus(store: Store, id: string, status: 'running' | 'completed' | 'stopped' | 'failed'): void {
  store.db.prepare('UPDATE run_groups SET status = ?, ended_at = ? WHERE id = ?').run(status, status === 'running' ? null : Date.now() / 1000, id);
}

export function assignRunToRunGroup(store: Store, runId: string, groupId: string, cell: string): void {
  getRunGroup(store, groupId);
  store.db.prepare('UPDATE runs SET group_id = ?, group_cell = ? WHERE id = ?').run(groupId, cell, runId);
}

/** A group by id, or by name when exactly one group has it. */
export function getRunGroup(store: Store, idOrName: string): RunGroupRow {
  const r = store.db.prepare('SELECT * FROM run_groups WHERE id = ?').get(idOrName) as Record<string, unknown> | undefined;
  if (r) return toGroup(r);
  const byName = store.db.prepare('SELECT * FROM run_groups WHERE name = ? ORDER BY created_at DESC').all(idOrName) as Record<string, unknown>[];
  if (byName.length === 1) return toGroup(byName[0]!);
  if (byName.length > 1) throw new Error(`group name "${idOrName}" is ambiguous (${byName.map((g) => g.id as string).join(', ')}); give the id`);
  throw new Error(`no group "${idOrName}" (\`arbor report --list\` lists the groups)`);
}

export function listRunGroups(store: Store): (RunGroupRow & { runs: number })[] {
  const rows = store.db
    .prepare('SELECT g.*, (SELECT COUNT(*) FROM runs r WHERE r.group_id = g.id) AS n FROM run_groups g ORDER BY g.created_at DESC')
    .all() as Record<string, unknown>[];
  return rows.map((r) => ({ ...toGroup(r), runs: r.n as number }));
}

/** The group's runs (oldest first) with their cell. */
export function runGroupMembers(store: Store, groupId: string): RunGroupMemberRow[] {
  const rows = store.db.prepare('SELECT id, group_cell FROM runs WHERE group_id = ? ORDER BY created_at').all(groupId) as {
    id: string;
    group_cell: string | null;
  }[];
  return rows.map((r) => ({ ...store.getRun(r.id), cell: r.group_cell ?? 'base' }));
}

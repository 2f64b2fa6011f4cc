/**
 * The experiment store: one SQLite database per workspace (better-sqlite3, WAL), default
 * ~/.arbor/arbor.db, moved by ARBOR_HOME. Numbered migrations upgrade an older database in
 * place; a database written by a newer Arbor is refused with a clear message.
 * MLflow-like split: runs, params, tags, metrics (run, key, step, time, value), latest_metrics,
 * plus trajectories and turns (per-token arrays as typed-array BLOBs, one row per turn),
 * checkpoints, artifacts and events.
 */
import Database from 'better-sqlite3';
import { existsSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

export type DB = Database.Database;

export function arborHome(): string {
  return process.env.ARBOR_HOME ?? join(homedir(), '.arbor');
}

export function defaultDbPath(): string {
  return join(arborHome(), 'arbor.db');
}

export const MIGRATIONS: { version: number; name: string; sql: string }[] = [
  {
    version: 1,
    name: 'initial schema',
    sql: `
      CREATE TABLE projects (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at REAL NOT NULL);
      CREATE TABLE runs (
        id TEXT PRIMARY KEY, project_id INTEGER REFERENCES projects(id), name TEXT NOT NULL,
        template TEXT, status TEXT NOT NULL, config TEXT NOT NULL DEFAULT '{}', seed INTEGER,
        tags TEXT NOT NULL DEFAULT '[]', parent_id TEXT REFERENCES runs(id),
        created_at REAL NOT NULL, started_at REAL, ended_at REAL, error TEXT, step INTEGER NOT NULL DEFAULT 0);
      CREATE TABLE params (run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (run_id, key));
      CREATE TABLE metrics (run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL, step INTEGER NOT NULL, time REAL NOT NULL, value REAL);
      CREATE INDEX metrics_run_key_step ON metrics(run_id, key, step);
      CREATE TABLE latest_metrics (run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL, step INTEGER NOT NULL, time REAL NOT NULL, value REAL, PRIMARY KEY (run_id, key));
      CREATE TABLE trajectories (
        id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
        grp INTEGER NOT NULL, sample INTEGER NOT NULL, task TEXT, prompt TEXT, reward REAL NOT NULL, advantage REAL,
        outcome TEXT NOT NULL DEFAULT '{}', timings TEXT NOT NULL DEFAULT '{}', has_error INTEGER NOT NULL DEFAULT 0,
        turn_count INTEGER NOT NULL DEFAULT 0, full INTEGER NOT NULL DEFAULT 1);
      CREATE INDEX trajectories_run_step ON trajectories(run_id, step, grp, sample);
      CREATE TABLE turns (
        traj_id INTEGER NOT NULL REFERENCES trajectories(id) ON DELETE CASCADE, idx INTEGER NOT NULL, role TEXT NOT NULL,
        text TEXT NOT NULL, token_ids BLOB, logprob BLOB, ref_logprob BLOB, entropy BLOB, advantage BLOB, value BLOB,
        loss_mask BLOB, tool_calls TEXT NOT NULL DEFAULT '[]', step_reward REAL, PRIMARY KEY (traj_id, idx));
      CREATE TABLE checkpoints (id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL, path TEXT NOT NULL, created_at REAL NOT NULL, metrics TEXT NOT NULL DEFAULT '{}');
      CREATE TABLE artifacts (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, kind TEXT NOT NULL, path TEXT NOT NULL, created_at REAL NOT NULL);
      CREATE TABLE events (seq INTEGER PRIMARY KEY, run_id TEXT REFERENCES runs(id) ON DELETE CASCADE, time REAL NOT NULL, level TEXT NOT NULL, text TEXT NOT NULL);
      CREATE INDEX events_run ON events(run_id, seq);`,
  },
  {
    version: 2,
    name: 'run notes and trajectory search indexes',
    sql: `
      ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
      CREATE INDEX trajectories_run_reward ON trajectories(run_id, reward);
      CREATE INDEX runs_created ON runs(created_at);`,
  },
  {
    version: 3,
    name: 'decoded token strings per turn (for the token heat map)',
    sql: `ALTER TABLE turns ADD COLUMN tokens TEXT;`,
  },
  {
    version: 4,
    name: 'run owner (process id, host, heartbeat) so any process can tell a live run from an orphan',
    sql: `
      ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
      ALTER TABLE runs ADD COLUMN owner_host TEXT;
      ALTER TABLE runs ADD COLUMN heartbeat_at REAL;`,
  },
  {
    version: 5,
    name: 'branching rollouts: where a branched sample left its parent (JSON, null for root samples)',
    sql: `ALTER TABLE trajectories ADD COLUMN branch TEXT;`,
  },
  {
    version: 6,
    name: 'what-if replays (a fork names its parent, turn, token, edit, checkpoint, sampling) and the training signal per token (ratio, clip side, loss weight, advantage parts; group statistics per trajectory)',
    sql: `
      ALTER TABLE trajectories ADD COLUMN parent_traj INTEGER REFERENCES trajectories(id) ON DELETE CASCADE;
      ALTER TABLE trajectories ADD COLUMN fork TEXT;
      CREATE INDEX trajectories_parent ON trajectories(parent_traj);
      ALTER TABLE trajectories ADD COLUMN signal TEXT;
      ALTER TABLE trajectories ADD COLUMN clip_share REAL;
      ALTER TABLE trajectories ADD COLUMN kl_mean REAL;
      ALTER TABLE turns ADD COLUMN ratio BLOB;
      ALTER TABLE turns ADD COLUMN clipped BLOB;
      ALTER TABLE turns ADD COLUMN loss_weight BLOB;
      ALTER TABLE turns ADD COLUMN adv_outcome BLOB;
      ALTER TABLE turns ADD COLUMN adv_process BLOB;`,
  },
  {
    version: 7,
    name: "run groups (seed sweeps and grids): the plan of (configuration, seed) cells, and each run's group and cell",
    sql: `
      CREATE TABLE run_groups (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, config_file TEXT, plan TEXT NOT NULL DEFAULT '[]',
        status TEXT NOT NULL DEFAULT 'running', created_at REAL NOT NULL, ended_at REAL);
      ALTER TABLE runs ADD COLUMN group_id TEXT REFERENCES run_groups(id) ON DELETE SET NULL;
      ALTER TABLE runs ADD COLUMN group_cell TEXT;
      CREATE INDEX runs_group ON runs(group_id);`,
  },
  {
    version: 8,
    name: "on-policy distillation: the teacher's logprob of each token (the heat map's teacher channel)",
    sql: `ALTER TABLE turns ADD COLUMN teacher_logprob BLOB;`,
  },
];

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

export class WorkspaceError extends Error {
  constructor(
    message: string,
    readonly file: string,
  ) {
    super(message);
    this.name = 'WorkspaceError';
  }
}

/** Open (creating if needed) and migrate a workspace database. */
export function openDatabase(file = defaultDbPath(), opts: { upTo?: number } = {}): DB {
  mkdirSync(dirname(file), { recursive: true });
  let db: DB;
  try {
    db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    db.pragma('busy_timeout = 5000');
    const ok = db.pragma('quick_check', { simple: true });
    if (ok !== 'ok') throw new Error(`integrity check failed: ${String(ok)}`);
  } catch (e) {
    throw new WorkspaceError(`${file}: not a usable Arbor database (${(e as Error).message}). Open another workspace or move this file away.`, file);
  }
  migrate(db, file, opts.upTo ?? SCHEMA_VERSION);
  return db;
}

export function migrate(db: DB, file: string, upTo = SCHEMA_VERSION): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > SCHEMA_VERSION) {
    throw new WorkspaceError(`${file}: schema version ${current} is newer than this Arbor supports (${SCHEMA_VERSION}); upgrade Arbor to open it`, file);
  }
  for (const m of MIGRATIONS) {
    if (m.version <= current || m.version > upTo) continue;
    db.transaction(() => {
      db.exec(m.sql);
      db.pragma(`user_version = ${m.version}`);
    })();
  }
}

export function workspaceExists(file = defaultDbPath()): boolean {
  return existsSync(file);
}

/**
 * Consent for programs from elsewhere. Before a config, an environment folder or a stored run
 * starts an MCP server command or an external agent program (environment.agent) or loads tool/reward files or plugins (engine/config/plugins.ts), the things it would run are listed
 * (a server: its command, arguments and the names of the environment variables it sets; a file:
 * its path and content hash; a workspace folder outside the config's folder) and any this
 * workspace has not approved are put to the user: the CLI asks y/N on a terminal, or needs
 * `--yes`; the workbench shows a dialog. Approvals are remembered per content hash in
 * `$ARBOR_HOME/approvals.json` (a changed file or command asks again). Files shipped in Arbor's
 * resources/ folder are trusted without asking.
 *
 * The asker is set once per process by the program that embeds the engine (the CLI, the engine
 * server); with none set (library use, tests that call the engine directly) nothing is asked.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { homedir } from 'node:os';

export interface ConsentItem {
  kind: 'mcp-server' | 'agent' | 'tool' | 'reward' | 'workspace' | 'plugin';
  /** What the user sees: the server's name and command line, the file's path, the folder. */
  label: string;
  /** The content hash the approval is remembered under. */
  hash: string;
  /** Shipped with Arbor (resources/): never asked. */
  trusted?: boolean;
}

export interface ConsentRequest {
  /** Who wants to run them: "arbor train exp.yaml", "the playground (run abc)", … */
  origin: string;
  items: ConsentItem[];
}

/** Answers a request: true to approve every item (remembered), false to refuse. */
export type ConsentAsker = (req: ConsentRequest) => Promise<boolean>;

export class ConsentRefused extends Error {
  constructor(
    message: string,
    readonly items: ConsentItem[],
  ) {
    super(message);
    this.name = 'ConsentRefused';
  }
}

let asker: ConsentAsker | null = null;

/** Set (or clear) this process's asker: the CLI's prompt/--yes, or the workbench's dialog. */
export function setConsentAsker(a: ConsentAsker | null): void {
  asker = a;
}

/** Arbor's own resources/ folder (trusted); resolved on first use. */
let resources: string | undefined;
function resourcesDir(): string {
  // (a string, not `new URL(…)`: under jsdom, as the renderer's tests run the engine, URL is jsdom's)
  return (resources ??= resolve(dirname(fileURLToPath(import.meta.url)), '../../resources'));
}
const sha = (s: string | Buffer) => createHash('sha256').update(s).digest('hex');

function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}

function inside(child: string, parent: string): boolean {
  const rel = relative(real(parent), real(child));
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel) && rel.split(sep)[0] !== '..');
}

/** A tool, reward or plugin file (its content decides the hash). */
export function fileItem(kind: 'tool' | 'reward' | 'plugin', path: string, source: string, shownAs = path): ConsentItem {
  return { kind, label: shownAs, hash: `file:${sha(source)}`, trusted: isAbsolute(path) && inside(path, resourcesDir()) };
}

/** An MCP server: its command, arguments, working folder and the names of the variables it sets. */
export function serverItem(name: string, s: { command: string; args?: string[]; env?: Record<string, string>; cwd?: string }, baseDir?: string): ConsentItem {
  const argv = [s.command, ...(s.args ?? [])];
  const envKeys = Object.keys(s.env ?? {}).sort();
  const cwd = s.cwd ? (isAbsolute(s.cwd) || !baseDir ? s.cwd : resolve(baseDir, s.cwd)) : undefined;
  const shown = argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a))).join(' ');
  return {
    kind: 'mcp-server',
    label: `${name}: ${shown}${envKeys.length ? ` (sets ${envKeys.join(', ')})` : ''}${cwd ? ` in ${cwd}` : ''}`,
    hash: `mcp:${sha(JSON.stringify({ argv, envKeys, cwd: cwd ?? null }))}`,
    trusted: !!baseDir && inside(baseDir, resourcesDir()),
  };
}

/**
 * An external agent program (environment.agent): its argv, working folder and the names of the
 * variables it sets, and the content of every argument that is a file in that folder (its
 * script: a changed agent.ts or agent.py asks again).
 */
export function agentItem(a: { command: string[]; env?: Record<string, string>; cwd?: string }): ConsentItem {
  const envKeys = Object.keys(a.env ?? {}).sort();
  const cwd = a.cwd ?? process.cwd();
  const files = a.command
    .slice(1)
    .map((x) => (isAbsolute(x) ? x : join(cwd, x)))
    .filter((f) => existsSync(f) && statSync(f).isFile())
    .map((f) => sha(readFileSync(f)));
  const shown = a.command.map((x) => (/^[\w@%+=:,./-]+$/.test(x) ? x : JSON.stringify(x))).join(' ');
  return {
    kind: 'agent',
    label: `${shown}${envKeys.length ? ` (sets ${envKeys.join(', ')})` : ''} in ${cwd}`,
    hash: `agent:${sha(JSON.stringify({ argv: a.command, envKeys, cwd: real(cwd), files }))}`,
    trusted: inside(cwd, resourcesDir()),
  };
}

/** A workspace folder outside the config's folder (ctx.readFile may read anything in it). */
export function workspaceItem(workspace: string): ConsentItem {
  const p = real(workspace);
  return { kind: 'workspace', label: `tools may read every file under ${p}`, hash: `workspace:${sha(p)}`, trusted: inside(p, resourcesDir()) };
}

/** What an experiment config would run: its MCP servers, tool and reward files, and a workspace outside its folder. */
export function configItems(
  env: {
    mcp_servers?: unknown;
    tools?: string[];
    reward?: string;
    workspace?: string;
    agent?: { command: string[]; env?: Record<string, string>; cwd?: string };
  },
  configDir?: string,
): ConsentItem[] {
  const items: ConsentItem[] = [];
  if (env.agent) items.push(agentItem(env.agent));
  const ws = env.workspace ?? process.cwd();
  const servers = env.mcp_servers;
  if (servers && typeof servers === 'object')
    for (const [name, s] of Object.entries(servers as Record<string, { command: string; args?: string[]; env?: Record<string, string>; cwd?: string }>))
      if (s && typeof s.command === 'string') items.push(serverItem(name, s, ws));
  if (typeof servers === 'string') {
    // A file of servers (the mcpServers layout): its content is what runs.
    const file = isAbsolute(servers) ? servers : resolve(ws, servers);
    if (existsSync(file))
      items.push({ kind: 'mcp-server', label: `servers listed in ${file}`, hash: `file:${sha(readFileSync(file))}`, trusted: inside(file, resourcesDir()) });
  }
  const files: ['tool' | 'reward', string][] = [
    ...(env.tools ?? []).map((t): ['tool', string] => ['tool', t]),
    ...(env.reward ? [['reward', env.reward] as ['reward', string]] : []),
  ];
  for (const [kind, p] of files) {
    const full = isAbsolute(p) ? p : join(ws, p);
    if (existsSync(full)) items.push(fileItem(kind, full, readFileSync(full, 'utf8'), p));
  }
  // ctx.readFile lets tools read their workspace: one outside the config's folder (or a config
  // whose folder is not known) is approved as a folder too.
  if (files.length > 0 && env.workspace && !(configDir && inside(env.workspace, configDir))) items.push(workspaceItem(env.workspace));
  return items;
}

/** The folder each validated config was read from (validateConfig records it; not serialised with the config). */
const configDirs = new WeakMap<object, string>();
export function rememberConfigDir(cfg: object, dir: string): void {
  configDirs.set(cfg, dir);
}
export function configDirOf(cfg: object): string | undefined {
  return configDirs.get(cfg);
}

interface Approvals {
  version: 1;
  approved: Record<string, { kind: string; label: string; at: string }>;
}

// The workspace home (engine/store/db.ts arborHome; not imported, to keep the config module light).
const storeFile = () => join(process.env.ARBOR_HOME ?? join(homedir(), '.arbor'), 'approvals.json');

function load(): Approvals {
  try {
    const j = JSON.parse(readFileSync(storeFile(), 'utf8')) as Approvals;
    if (j && j.version === 1 && j.approved && typeof j.approved === 'object') return j;
  } catch {
    /* none yet, or unreadable: nothing approved */
  }
  return { version: 1, approved: {} };
}

/** Items this workspace has not approved (and Arbor does not ship). */
export function unapproved(items: ConsentItem[]): ConsentItem[] {
  const a = load().approved;
  const seen = new Set<string>();
  return items.filter((i) => !i.trusted && !a[i.hash] && !seen.has(i.hash) && seen.add(i.hash));
}

/** Remember items as approved in this workspace. */
export function approve(items: ConsentItem[]): void {
  if (items.length === 0) return;
  const a = load();
  const at = new Date().toISOString();
  for (const i of items) a.approved[i.hash] = { kind: i.kind, label: i.label, at };
  const file = storeFile();
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(a, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, file);
}

/** A tool or reward file the user wrote in the workbench's editor is theirs: approved as written. */
export function approveTyped(path: string, text: string): void {
  if (/\.(ts|js|mjs|cjs)$/.test(path)) approve([fileItem('tool', path, text)]);
}

/** Ask for what has not been approved; throws ConsentRefused when the answer is no. */
export async function ensureConsent(origin: string, items: ConsentItem[]): Promise<void> {
  const pending = unapproved(items);
  if (pending.length === 0 || !asker) return;
  if (!(await asker({ origin, items: pending }))) throw new ConsentRefused(`${origin}: not approved, nothing was started:\n${describeItems(pending)}`, pending);
  approve(pending);
}

export function describeItems(items: ConsentItem[]): string {
  const head: Record<ConsentItem['kind'], string> = {
    'mcp-server': 'MCP server',
    agent: 'agent program (runs as you, not sandboxed)',
    tool: 'tool file',
    reward: 'reward file',
    workspace: 'workspace',
    plugin: "plugin (runs in Arbor's process, not sandboxed)",
  };
  return items.map((i) => `  - ${head[i.kind]}: ${i.label}`).join('\n');
}

/** ARBOR_YES=1: --yes for commands run from scripts and test suites. */
export const yesFromEnv = (): boolean => process.env.ARBOR_YES === '1';

/**
 * The CLI's asker: `--yes` approves; on a terminal, a y/N question on stderr; with no terminal a
 * refusal that names `--yes`.
 */
export function cliAsker(opts: { yes?: boolean }): ConsentAsker {
  return async (req) => {
    const list = describeItems(req.items);
    if (opts.yes || yesFromEnv()) {
      process.stderr.write(`${req.origin}: approved with ${opts.yes ? '--yes' : 'ARBOR_YES=1'}:\n${list}\n`);
      return true;
    }
    if (!process.stdin.isTTY || !process.stderr.isTTY)
      throw new ConsentRefused(
        `${req.origin} would run programs this workspace has not approved:\n${list}\nRead them, then run again with --yes to approve them (remembered for this content), or approve them in the workbench.`,
        req.items,
      );
    const { createInterface } = await import('node:readline/promises');
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    try {
      const a = await rl.question(`${req.origin} would run programs this workspace has not approved:\n${list}\nRun them? [y/N] `);
      return /^y(es)?$/i.test(a.trim());
    } finally {
      rl.close();
    }
  };
}

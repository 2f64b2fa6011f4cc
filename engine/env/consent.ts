/**
 * Consent for programs from elsewhere: one rule for everything a config, an environment folder or
 * a stored run would run (tool and reward files, plugins, MCP server commands, the external agent
 * program, a workspace folder outside the config's, an LLM judge's URL). An approval is the hash of the item's kind,
 * its argv, its resolved working folder, its environment variables (names AND values), and the
 * content of every file it names or imports (a plugin's whole import closure, from esbuild's
 * metafile; a server's or agent's script, also when it is argv[0] or the value of an argument or
 * a variable). So approving a file as a tool does not approve it as a plugin, and any change asks
 * again. The question shows all of it, with control characters escaped. Approvals are kept in
 * `$ARBOR_HOME/approvals.json`, the same for every command (`arbor train --yes` holds for
 * `eval`, `rollout` and `replay` of the same content).
 *
 * Nothing is trusted by where it sits: Arbor's own examples are trusted because their item hashes
 * are listed in resources/trusted-manifest.json (scripts/gen-trusted-manifest.mjs writes it; a
 * test checks it is current), with paths inside Arbor's package written relative to it.
 *
 * The asker is set once per process by the program that embeds the engine (the CLI, the engine
 * server); with none set (library use, tests that call the engine directly) nothing is asked.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { homedir } from 'node:os';
import { createRequire } from 'node:module';

export type ConsentKind = 'mcp-server' | 'agent' | 'tool' | 'reward' | 'workspace' | 'plugin' | 'judge';

export interface ConsentItem {
  kind: ConsentKind;
  /** What the user sees: everything the hash covers (control characters escaped). */
  label: string;
  /** The hash the approval is remembered under. */
  hash: string;
  /** Listed in Arbor's shipped manifest (its own examples, by content): never asked. */
  trusted?: boolean;
  /**
   * Approved by running what holds it, never asked on its own (a workspace inside the config's
   * folder): remembered when its config's items are, so a later command that reads the same
   * config without knowing its folder (`arbor eval --config`, a stored run) finds it approved.
   */
  implied?: boolean;
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

/** Arbor's package folder (paths inside it are hashed relative to it, so the manifest holds on any install). */
let pkg: string | undefined;
export function packageRoot(): string {
  // (a string, not `new URL(…)`: under jsdom, as the renderer's tests run the engine, URL is jsdom's)
  return (pkg ??= real(resolve(dirname(fileURLToPath(import.meta.url)), '../..')));
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

/** A path as hashed: real, and relative to Arbor's package when inside it. */
function hashedPath(p: string): string {
  const r = real(p);
  return inside(r, packageRoot()) ? `<arbor>/${relative(packageRoot(), r).split(sep).join('/')}` : r;
}

/**
 * Text as shown in a prompt or a dialog: control characters (C0, DEL, C1), line and paragraph
 * separators and bidirectional overrides written as escapes, so a `\r\x1b[2K` in a config path
 * cannot hide what comes before it.
 */
export function escapeControl(s: string): string {
  return String(s).replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => {
    const n = c.charCodeAt(0);
    return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
  });
}

/** One argument as shown: bare when it is plain, else quoted; control characters escaped either way. */
function shownArg(a: string): string {
  return /^[\w@%+=:,./-]+$/.test(a) ? a : escapeControl(JSON.stringify(a));
}

/** A regular file's content hash, if `p` is one (resolved against `cwd`). */
function fileHash(p: string, cwd: string): { path: string; sha: string } | undefined {
  if (!p || p.length > 4096) return undefined;
  const full = isAbsolute(p) ? p : resolve(cwd, p);
  try {
    if (!statSync(full).isFile()) return undefined;
    return { path: hashedPath(full), sha: sha(readFileSync(full)) };
  } catch {
    return undefined;
  }
}

/**
 * The files a command line names: every argument, every `--flag=value` value and every variable
 * value that is a file (relative to the working folder, or absolute), argv[0] included when it is
 * a path (a bare program name is found on PATH, not in the folder).
 */
function namedFiles(argv: string[], env: Record<string, string>, cwd: string): { path: string; sha: string }[] {
  const words = [...argv.map((a, i) => (i === 0 && !/[\\/]/.test(a) && !existsSync(resolve(cwd, a)) ? '' : a)), ...Object.values(env)];
  const fromPath = argv[0] ? pathProgram(argv[0], env.PATH, cwd) : undefined;
  if (fromPath) words.push(fromPath);
  const candidates = words.flatMap((w) => [w, ...w.split(/[=\s]/).slice(1)]);
  const out = new Map<string, string>();
  for (const c of candidates) {
    const f = fileHash(c, cwd);
    if (f) out.set(f.path, f.sha);
  }
  return [...out].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([path, h]) => ({ path, sha: h }));
}

/**
 * The file a bare command name runs when the item's own variables set PATH (the spawn looks it up
 * there): hashed when that PATH entry is relative or inside the working folder, i.e. part of what
 * was shared (`env: {PATH: "./bin:…"}` with `command: node` runs ./bin/node). System folders are not.
 */
function pathProgram(cmd: string, path: string | undefined, cwd: string): string | undefined {
  if (path === undefined || /[\\/]/.test(cmd)) return undefined;
  for (const entry of String(path).split(':')) {
    const folder = resolve(cwd, entry || '.');
    const full = join(folder, cmd);
    try {
      if (!statSync(full).isFile()) continue;
    } catch {
      continue;
    }
    return !isAbsolute(entry) || inside(folder, cwd) ? full : undefined;
  }
  return undefined;
}

/** The hash of an item: its kind and everything that decides what it does. */
function itemHash(kind: ConsentKind, what: { argv?: string[]; cwd?: string; env?: Record<string, string>; files?: { path?: string; sha: string }[] }): string {
  const env = what.env ? Object.entries(what.env).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) : undefined;
  return `${kind}:${sha(JSON.stringify({ kind, argv: what.argv ?? null, cwd: what.cwd ? hashedPath(what.cwd) : null, env: env ?? null, files: what.files ?? [] }))}`;
}

/** Variables as shown: NAME=value each (values included: they are part of what runs). */
function shownEnv(env: Record<string, string>): string {
  const keys = Object.keys(env).sort();
  return keys.length ? ` with ${keys.map((k) => `${escapeControl(k)}=${shownArg(String(env[k]))}`).join(' ')}` : '';
}

/**
 * The files a plugin imports, itself included (esbuild's metafile of a bundle of it, packages
 * under a node_modules of its own folder too), less Arbor's own code and dependencies (its
 * engine/ and node_modules/: they change with Arbor, not with the plugin). Undefined when it does
 * not bundle (the import then fails the same way).
 */
function importClosure(path: string): string[] | undefined {
  const own = [join(packageRoot(), 'engine'), join(packageRoot(), 'node_modules')];
  try {
    // Loaded when a plugin is asked about (esbuild refuses to load under jsdom, where the renderer's tests import this module).
    const { buildSync } = createRequire(import.meta.url)('esbuild') as typeof import('esbuild');
    const external = own.map((o) => `${o}${sep}*`);
    const r = buildSync({
      entryPoints: [path],
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'esm',
      logLevel: 'silent',
      absWorkingDir: dirname(path),
      external,
    });
    return Object.keys(r.metafile.inputs)
      .map((f) => resolve(dirname(path), f))
      .filter((f) => existsSync(f) && !own.some((o) => inside(f, o)))
      .sort();
  } catch {
    return undefined;
  }
}

/**
 * A tool, reward or plugin file: its kind and content (a plugin: every file of its import
 * closure). Tool and reward files import nothing but 'arbor/env' (the sandbox refuses the rest),
 * so their content is their closure.
 */
export function fileItem(kind: 'tool' | 'reward' | 'plugin', path: string, source: string, shownAs = path): ConsentItem {
  const files = [{ sha: sha(source) }] as { path?: string; sha: string }[];
  let more = '';
  if (kind === 'plugin' && isAbsolute(path)) {
    const closure = importClosure(path)?.filter((f) => real(f) !== real(path));
    for (const f of closure ?? []) files.push({ path: relative(dirname(path), f), sha: sha(readFileSync(f)) });
    if (closure?.length) more = ` (and what it imports: ${closure.map((f) => escapeControl(relative(dirname(path), f))).join(', ')})`;
  }
  const hash = itemHash(kind, { files });
  return { kind, label: `${escapeControl(shownAs)}${more}`, hash, trusted: isTrusted(hash) };
}

/**
 * A tool or reward file as its sandbox engine runs it: with QuickJS (the default) a tool/reward
 * item; with `environment.sandbox: process` (V8 in the sandbox process, not a boundary) a plugin
 * item, asked about as code that runs as the user.
 */
export function sandboxedFileItem(
  kind: 'tool' | 'reward',
  path: string,
  source: string,
  engine: 'quickjs' | 'process' = 'quickjs',
  shownAs = path,
): ConsentItem {
  if (engine === 'quickjs') return fileItem(kind, path, source, shownAs);
  const item = fileItem('plugin', path, source, shownAs);
  return { ...item, label: `${item.label} (a ${kind} file with environment.sandbox: process: runs in V8, as you)` };
}

/** An MCP server: its command line, working folder, variables (names and values) and the files they name. */
export function serverItem(name: string, s: { command: string; args?: string[]; env?: Record<string, string>; cwd?: string }, baseDir?: string): ConsentItem {
  const argv = [s.command, ...(s.args ?? [])];
  const env = s.env ?? {};
  const base = baseDir ?? process.cwd();
  const cwd = real(s.cwd ? (isAbsolute(s.cwd) ? s.cwd : resolve(base, s.cwd)) : base);
  const files = namedFiles(argv, env, cwd);
  const hash = itemHash('mcp-server', { argv, cwd, env, files });
  return {
    kind: 'mcp-server',
    label: `${escapeControl(name)}: ${argv.map(shownArg).join(' ')}${shownEnv(env)} in ${escapeControl(cwd)}${files.length ? ` (files: ${files.map((f) => escapeControl(f.path)).join(', ')})` : ''}`,
    hash,
    trusted: isTrusted(hash),
  };
}

/**
 * An external agent program (environment.agent): its argv, working folder, variables (names and
 * values) and the content of every file they name (its script, also as argv[0]).
 */
export function agentItem(a: { command: string[]; env?: Record<string, string>; cwd?: string }): ConsentItem {
  const env = a.env ?? {};
  const cwd = real(a.cwd ?? process.cwd());
  const files = namedFiles(a.command, env, cwd);
  const hash = itemHash('agent', { argv: a.command, cwd, env, files });
  return {
    kind: 'agent',
    label: `${a.command.map(shownArg).join(' ')}${shownEnv(env)} in ${escapeControl(cwd)}${files.length ? ` (files: ${files.map((f) => escapeControl(f.path)).join(', ')})` : ''}`,
    hash,
    trusted: isTrusted(hash),
  };
}

/** A workspace folder outside the config's folder (ctx.readFile may read anything in it). */
export function workspaceItem(workspace: string): ConsentItem {
  const p = real(workspace);
  const hash = itemHash('workspace', { cwd: p });
  return {
    kind: 'workspace',
    label: `tools may read every file under ${escapeControl(p)} (and nothing outside it; a folder with a link that leaves it is refused)`,
    hash,
    trusted: isTrusted(hash),
  };
}

/**
 * An LLM judge (environment.judge): every training trajectory (and, with `references`, the task's
 * gold answers) is sent to its URL, with the key read from the variable `api_key_env` names. The
 * hash and the question hold the URL, the variable's NAME (never its value) and whether gold
 * answers go too; another URL or another key variable asks again.
 */
export function judgeItem(j: { base_url: string; api_key_env?: string; references?: boolean }): ConsentItem {
  const argv = [String(j.base_url)];
  const env: Record<string, string> = j.api_key_env ? { api_key_env: String(j.api_key_env) } : {};
  const hash = itemHash('judge', { argv: [...argv, j.references ? 'references' : 'no-references'], env });
  const key = j.api_key_env ? `, with the key from $${escapeControl(j.api_key_env)}` : ', with no key';
  return {
    kind: 'judge',
    label: `${shownArg(argv[0]!)}: every training trajectory${j.references ? " and the task's gold answers" : ''} is sent there${key}`,
    hash,
    trusted: isTrusted(hash),
  };
}

/** Arbor's shipped manifest of trusted item hashes (its own examples). */
let manifest: Set<string> | undefined;
export const MANIFEST_PATH = () => join(packageRoot(), 'resources', 'trusted-manifest.json');
function isTrusted(hash: string): boolean {
  if (!manifest) {
    manifest = new Set();
    try {
      const j = JSON.parse(readFileSync(MANIFEST_PATH(), 'utf8')) as { items?: { hash?: unknown }[] };
      for (const i of j.items ?? []) if (typeof i?.hash === 'string') manifest.add(i.hash);
    } catch {
      /* no manifest: nothing is trusted */
    }
  }
  return manifest.has(hash);
}

/** What an experiment config would run: its MCP servers, tool and reward files, and a workspace outside its folder. */
export function configItems(
  env: {
    mcp_servers?: unknown;
    tools?: string[];
    reward?: string;
    workspace?: string;
    agent?: { command: string[]; env?: Record<string, string>; cwd?: string };
    sandbox?: 'quickjs' | 'process';
    judge?: { base_url: string; api_key_env?: string; references?: boolean };
  },
  configDir?: string,
): ConsentItem[] {
  const items: ConsentItem[] = [];
  if (env.agent) items.push(agentItem(env.agent));
  if (env.judge) items.push(judgeItem(env.judge));
  const ws = env.workspace ?? configDir ?? process.cwd();
  const servers = env.mcp_servers;
  if (servers && typeof servers === 'object')
    for (const [name, s] of Object.entries(servers as Record<string, { command: string; args?: string[]; env?: Record<string, string>; cwd?: string }>))
      if (s && typeof s.command === 'string') items.push(serverItem(name, s, ws));
  if (typeof servers === 'string') {
    // A file of servers (the mcpServers layout): its content is what runs.
    const file = isAbsolute(servers) ? servers : resolve(ws, servers);
    if (existsSync(file)) {
      const hash = itemHash('mcp-server', { files: [{ path: hashedPath(file), sha: sha(readFileSync(file)) }] });
      items.push({ kind: 'mcp-server', label: `servers listed in ${escapeControl(file)}`, hash, trusted: isTrusted(hash) });
    }
  }
  const files: ['tool' | 'reward', string][] = [
    ...(env.tools ?? []).map((t): ['tool', string] => ['tool', t]),
    ...(env.reward ? [['reward', env.reward] as ['reward', string]] : []),
  ];
  for (const [kind, p] of files) {
    const full = isAbsolute(p) ? p : join(ws, p);
    if (existsSync(full)) items.push(sandboxedFileItem(kind, full, readFileSync(full, 'utf8'), env.sandbox, p));
  }
  // ctx.readFile lets tools read their workspace: one outside the config's folder (or a config
  // whose folder is not known) is approved as a folder too.
  if (files.length > 0 && env.workspace) items.push({ ...workspaceItem(env.workspace), implied: !!configDir && inside(env.workspace, configDir) });
  return items;
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
  return items.filter((i) => !i.trusted && !i.implied && !a[i.hash] && !seen.has(i.hash) && seen.add(i.hash));
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

/** A tool or reward file the user wrote in the workbench's editor is theirs: approved as written, as a tool or a reward (not as a plugin: that runs in Arbor's process). */
export function approveTyped(path: string, text: string): void {
  if (/\.(ts|js|mjs|cjs)$/.test(path)) approve([fileItem('tool', path, text), fileItem('reward', path, text)]);
}

/** Ask for what has not been approved; throws ConsentRefused when the answer is no. */
export async function ensureConsent(origin: string, items: ConsentItem[]): Promise<void> {
  if (!asker) return;
  const pending = unapproved(items);
  if (pending.length > 0 && !(await asker({ origin, items: pending })))
    throw new ConsentRefused(`${origin}: not approved, nothing was started:\n${describeItems(pending)}`, pending);
  const a = load().approved;
  approve([...pending, ...items.filter((i) => i.implied && !i.trusted && !a[i.hash])]);
}

export function describeItems(items: ConsentItem[]): string {
  const head: Record<ConsentItem['kind'], string> = {
    'mcp-server': 'MCP server',
    agent: 'agent program (runs as you, not sandboxed)',
    tool: 'tool file (sandboxed: computes, reads its workspace folder only)',
    reward: 'reward file (sandboxed: computes on the episode)',
    workspace: 'workspace (what the sandboxed tools may read)',
    plugin: "plugin (runs in Arbor's process, not sandboxed)",
    judge: 'LLM judge (trajectories leave this machine)',
  };
  return items.map((i) => `  - ${head[i.kind]}: ${escapeControl(i.label)}`).join('\n');
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
      const a = await rl.question(`${escapeControl(req.origin)} would run programs this workspace has not approved:\n${list}\nRun them? [y/N] `);
      return /^y(es)?$/i.test(a.trim());
    } finally {
      rl.close();
    }
  };
}

/**
 * The Hugging Face cache, read and written exactly as huggingface_hub does (its constants.py and
 * file_download.py), so Arbor, transformers, vLLM and huggingface-cli share one copy:
 *
 *   $HF_HUB_CACHE/models--<org>--<name>/
 *     blobs/<etag>                 the file contents, named by the Hub's ETag (an LFS file's sha256, a
 *                                  git file's blob sha1); `<etag>.incomplete` while downloading
 *     refs/<revision>              the commit a branch or tag pointed to when it was last resolved
 *     snapshots/<commit>/<file>    a relative symlink to ../../blobs/<etag> (one ../ more per subfolder)
 *
 * Where the cache is: HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, with HF_HOME
 * defaulting to $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface. HF_HUB_OFFLINE (or
 * TRANSFORMERS_OFFLINE) set to 1/ON/YES/TRUE forbids any request. Nothing here touches the network.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';

type Env = Record<string, string | undefined>;

const TRUE_VALUES = new Set(['1', 'ON', 'YES', 'TRUE']);
const truthy = (v: string | undefined) => v !== undefined && TRUE_VALUES.has(v.toUpperCase());

/** os.path.expanduser + expandvars, as huggingface_hub applies to HF_HOME and HF_HUB_CACHE. */
function expand(p: string, env: Env): string {
  const vars = p.replace(/\$(\w+)|\$\{(\w+)\}/g, (m, a: string | undefined, b: string | undefined) => env[(a ?? b)!] ?? m);
  return vars === '~' || vars.startsWith('~/') ? join(homedir(), vars.slice(1)) : vars;
}

export function hfHome(env: Env = process.env): string {
  return expand(env.HF_HOME || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'huggingface'), env);
}

/** The hub cache folder (absolute). */
export function hubCacheDir(env: Env = process.env): string {
  const dir = expand(env.HF_HUB_CACHE || env.HUGGINGFACE_HUB_CACHE || join(hfHome(env), 'hub'), env);
  return isAbsolute(dir) ? dir : resolve(dir);
}

export function hubOffline(env: Env = process.env): boolean {
  return truthy(env.HF_HUB_OFFLINE || env.TRANSFORMERS_OFFLINE);
}

/** HF_ENDPOINT without its trailing slash (default https://huggingface.co). */
export function hubEndpoint(env: Env = process.env): string {
  return (env.HF_ENDPOINT || 'https://huggingface.co').replace(/\/+$/, '');
}

/** HF_TOKEN, else the file huggingface-cli login writes ($HF_TOKEN_PATH or $HF_HOME/token). */
export function hubToken(env: Env = process.env): string | undefined {
  const t = env.HF_TOKEN?.trim();
  if (t) return t;
  const file = expand(env.HF_TOKEN_PATH || join(hfHome(env), 'token'), env);
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** A full commit hash (huggingface_hub's REGEX_COMMIT_HASH). */
export const COMMIT_HASH = /^[0-9a-f]{40}$/;

/** `org/name` as the Hub allows it (letters, digits, `-`, `_`, `.`; no `--` or `..`), one slash. */
const REPO_ID = /^[A-Za-z0-9][\w.-]{0,95}\/[A-Za-z0-9][\w.-]{0,95}$/;

export interface RepoRef {
  repoId: string;
  revision: string;
}

/** `org/name` or `org/name@revision` → its parts, or undefined when the text is not a repo id. */
export function parseRepoRef(text: string): RepoRef | undefined {
  const at = text.indexOf('@');
  const repoId = at < 0 ? text : text.slice(0, at);
  const revision = at < 0 ? 'main' : text.slice(at + 1);
  if (!REPO_ID.test(repoId) || repoId.includes('--') || repoId.includes('..') || /\.$/.test(repoId)) return undefined;
  if (!revision || /\s/.test(revision) || revision.startsWith('/') || revision.split('/').includes('..')) return undefined;
  return { repoId, revision };
}

/** models--org--name (huggingface_hub's repo_folder_name). */
export function repoFolderName(repoId: string): string {
  return ['models', ...repoId.split('/')].join('--');
}

export function repoFolder(repoId: string, env: Env = process.env): string {
  return join(hubCacheDir(env), repoFolderName(repoId));
}

/** The commit a revision names in the cache: itself when it is a commit hash, else refs/<revision>. */
export function cachedCommit(repoId: string, revision: string, env: Env = process.env): string | undefined {
  if (COMMIT_HASH.test(revision)) return revision;
  const ref = join(repoFolder(repoId, env), 'refs', revision);
  try {
    return readFileSync(ref, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The snapshot folder of `repoId@revision` when the cache holds it (with a config.json), else undefined. */
export function cachedSnapshot(repoId: string, revision = 'main', env: Env = process.env): string | undefined {
  const commit = cachedCommit(repoId, revision, env);
  if (!commit) return undefined;
  const dir = join(repoFolder(repoId, env), 'snapshots', commit);
  return existsSync(join(dir, 'config.json')) || existsSync(join(dir, 'adapter_config.json')) ? dir : undefined;
}

export class ModelNotCachedError extends Error {
  constructor(
    readonly ref: RepoRef,
    readonly cacheDir: string,
  ) {
    const rev = ref.revision === 'main' ? '' : ` --revision ${ref.revision}`;
    super(
      `${ref.repoId}${ref.revision === 'main' ? '' : `@${ref.revision}`} is not in the Hugging Face cache (${cacheDir}): run \`arbor pull ${ref.repoId}${rev}\` first`,
    );
  }
}

/**
 * A model reference as the CLI and configs take it: an existing folder wins (so a relative
 * `runs/a` is a path), else `org/name[@revision]` resolves from the cache, without the network.
 * Returns an absolute folder; throws ModelNotCachedError for a repo id the cache lacks. Any other
 * text comes back resolved against `baseDir` (the caller reports a missing folder as before).
 */
export function resolveModelRef(text: string, baseDir = process.cwd(), env: Env = process.env): string {
  const asPath = isAbsolute(text) ? text : resolve(baseDir, text);
  if (existsSync(asPath)) return asPath;
  const ref = isAbsolute(text) || text.startsWith('.') ? undefined : parseRepoRef(text);
  if (!ref) return asPath;
  const snap = cachedSnapshot(ref.repoId, ref.revision, env);
  if (!snap) throw new ModelNotCachedError(ref, hubCacheDir(env));
  return snap;
}

export interface CachedRepo {
  repoId: string;
  folder: string;
  /** Every snapshot: its commit, the refs pointing to it, its folder. */
  snapshots: { commit: string; refs: string[]; folder: string }[];
  /** Bytes of blobs/ (each blob once, whatever the snapshots sharing it). */
  sizeBytes: number;
}

/** Bytes of every file under a folder (links followed to their targets; a dangling or removed entry counts 0). */
export function treeBytes(dir: string): number {
  let n = 0;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const f of names) {
    try {
      const st = statSync(join(dir, f));
      n += st.isDirectory() ? treeBytes(join(dir, f)) : st.size;
    } catch {
      /* removed meanwhile, or a dangling link */
    }
  }
  return n;
}

function listRefs(refsDir: string, prefix = ''): [string, string][] {
  const out: [string, string][] = [];
  let names: string[];
  try {
    names = readdirSync(refsDir);
  } catch {
    return out;
  }
  for (const f of names) {
    const p = join(refsDir, f);
    if (statSync(p).isDirectory()) out.push(...listRefs(p, `${prefix}${f}/`));
    else out.push([`${prefix}${f}`, readFileSync(p, 'utf8').trim()]);
  }
  return out;
}

/** The model repositories in the cache (huggingface_hub's scan_cache_dir, models only). */
export function scanCache(env: Env = process.env): CachedRepo[] {
  const root = hubCacheDir(env);
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  const out: CachedRepo[] = [];
  for (const name of names.sort()) {
    if (!name.startsWith('models--')) continue;
    const folder = join(root, name);
    const repoId = name.slice('models--'.length).split('--').join('/');
    const refs = listRefs(join(folder, 'refs'));
    let commits: string[] = [];
    try {
      commits = readdirSync(join(folder, 'snapshots'));
    } catch {
      /* no snapshots yet */
    }
    out.push({
      repoId,
      folder,
      snapshots: commits.map((commit) => ({ commit, refs: refs.filter(([, c]) => c === commit).map(([r]) => r), folder: join(folder, 'snapshots', commit) })),
      sizeBytes: treeBytes(join(folder, 'blobs')),
    });
  }
  return out;
}

/**
 * A CLI argument that names a model folder (or a run, a checkpoint id, …): an existing path or any
 * text that is not `org/name[@revision]` comes back as given; a repo id becomes its cached snapshot,
 * or an error naming the argument and `arbor pull`.
 */
export function modelArg(text: string, what: string, env: Env = process.env): string {
  if (existsSync(text)) return text;
  const ref = isAbsolute(text) || text.startsWith('.') ? undefined : parseRepoRef(text);
  if (!ref) return text;
  const snap = cachedSnapshot(ref.repoId, ref.revision, env);
  if (!snap) throw new Error(`${what}: ${new ModelNotCachedError(ref, hubCacheDir(env)).message}`);
  return snap;
}

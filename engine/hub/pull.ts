/**
 * `arbor pull`: a model repository from the Hub (or a mirror at HF_ENDPOINT) into the Hugging Face
 * cache, in huggingface_hub's layout (engine/hub/cache.ts), as its snapshot_download does:
 *
 *  1. GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true: the commit (`sha`) and the
 *     files (`siblings`: rfilename, size, blobId, and for LFS files lfs.sha256 / lfs.size);
 *  2. per file kept by the include globs: HEAD {endpoint}/{repo}/resolve/{commit}/{file} without
 *     following redirects (relative ones, a renamed repo, are followed): X-Repo-Commit, the ETag
 *     (X-Linked-Etag, else ETag, without W/ and quotes) that names the blob, the size (X-Linked-Size,
 *     else Content-Length) and the Location of the file storage for an LFS file;
 *  3. GET that location into blobs/<etag>.incomplete, from where a previous try stopped (HTTP
 *     Range), hashing as it goes: an LFS file must match lfs.sha256, a git file its blob id (the
 *     git blob sha1); a mismatch deletes the partial blob and fails naming the file;
 *  4. rename to blobs/<etag>, link snapshots/<commit>/<file> → ../../blobs/<etag> (relative), and
 *     when every file is there write refs/<revision> = <commit>.
 *
 * HF_TOKEN (or the token file of `huggingface-cli login`) goes as `Authorization: Bearer` to the
 * endpoint (not to a file storage of another origin). HF_HUB_OFFLINE=1: no request at all; the
 * cached snapshot is the answer, or an error.
 */
import { createHash, type Hash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join, relative, sep } from 'node:path';
import { TOKENIZER_FILES, INDEX_FILE } from '../model/checkpoint';
import { cachedSnapshot, COMMIT_HASH, hubCacheDir, hubEndpoint, hubOffline, hubToken, repoFolder } from './cache';

type Env = Record<string, string | undefined>;

/**
 * What a model needs, fetched when no --include is given: transformers' weight files (model.safetensors
 * or its shards model-0000i-of-0000n.safetensors, and their index), not other formats or copies such
 * as Mistral's consolidated.safetensors or an onnx/ folder.
 */
export const DEFAULT_INCLUDE = [
  'config.json',
  'generation_config.json',
  ...TOKENIZER_FILES,
  'model.safetensors',
  'model-*.safetensors',
  INDEX_FILE,
  'adapter_config.json',
  'adapter_model.safetensors',
];

export interface PullOptions {
  repoId: string;
  /** Branch, tag or commit (default main). */
  revision?: string;
  /** Globs over the repository's file paths (fnmatch-like: `*` also crosses `/`, a trailing `/` means the folder). Default DEFAULT_INCLUDE. */
  include?: string[];
  env?: Env;
  signal?: AbortSignal;
  onProgress?: (p: PullProgress) => void;
}

export interface PullProgress {
  phase: 'metadata' | 'download' | 'verify' | 'done';
  file?: string;
  filesDone: number;
  files: number;
  /** Bytes of the selected files now in the cache (resumed parts included) of `totalBytes`. */
  bytes: number;
  totalBytes: number;
  /** Bytes received over the network by this pull. */
  transferred: number;
}

export interface PulledFile {
  path: string;
  size: number;
  etag: string;
  /** downloaded (fully or resumed), linked (the blob was already cached), cached (the snapshot had it). */
  how: 'downloaded' | 'resumed' | 'linked' | 'cached';
  /** For a resumed download, the bytes that were already there. */
  resumedFrom?: number;
}

export interface PullResult {
  repoId: string;
  revision: string;
  commit: string;
  folder: string;
  files: PulledFile[];
  transferred: number;
  offline: boolean;
}

export class HubError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

interface Sibling {
  rfilename: string;
  size?: number;
  blobId?: string;
  lfs?: { sha256?: string; oid?: string; size?: number };
}

const USER_AGENT = 'arbor (huggingface_hub-compatible cache)';

/** huggingface_hub's _normalize_etag: `W/"x"` and `"x"` → x. */
export function normalizeEtag(etag: string | null): string | undefined {
  if (!etag) return undefined;
  return etag.replace(/^W\//, '').replace(/^"+|"+$/g, '');
}

/**
 * Python's fnmatch.translate, which huggingface_hub's filter_repo_objects applies to allow_patterns:
 * `*` is any run of characters (`/` included), `?` one character, `[seq]` / `[!seq]` a set; a
 * pattern ending in `/` means everything under that folder.
 */
export function fnmatchRegExp(pattern: string): RegExp {
  const pat = pattern.endsWith('/') ? `${pattern}*` : pattern;
  let re = '';
  for (let i = 0; i < pat.length; i++) {
    const c = pat[i]!;
    if (c === '*') {
      re += '.*';
      while (pat[i + 1] === '*') i++;
    } else if (c === '?') re += '.';
    else if (c === '[') {
      const end = pat.indexOf(']', pat[i + 1] === '!' ? i + 3 : i + 2);
      if (end < 0) re += '\\[';
      else {
        let set = pat.slice(i + 1, end).replace(/\\/g, '\\\\');
        if (set.startsWith('!')) set = '^' + set.slice(1);
        else if (set.startsWith('^')) set = '\\' + set;
        re += `[${set}]`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|[\]\\/-]/g, '\\$&');
  }
  return new RegExp(`^${re}$`, 's');
}

export function matchesInclude(path: string, patterns: string[]): boolean {
  return patterns.some((p) => fnmatchRegExp(p).test(path));
}

const encodePath = (p: string) => p.split('/').map(encodeURIComponent).join('/');

function authHeaders(env: Env): Record<string, string> {
  const token = hubToken(env);
  return { 'user-agent': USER_AGENT, ...(token ? { authorization: `Bearer ${token}` } : {}) };
}

function httpError(what: string, url: string, status: number, statusText: string, repoId: string, env: Env): HubError {
  if (status === 401)
    return new HubError(
      hubToken(env)
        ? `${what}: ${url} answered 401 Unauthorized: the token (HF_TOKEN or ${join(hubCacheDir(env), '..', 'token')}) is not accepted for ${repoId}`
        : `${what}: ${url} answered 401 Unauthorized: ${repoId} is gated or private: set HF_TOKEN to an access token of an account that may read it`,
      status,
    );
  if (status === 403)
    return new HubError(`${what}: ${url} answered 403 Forbidden: this account has no access to ${repoId} (gated: ask for access on its model page)`, status);
  if (status === 404) return new HubError(`${what}: ${url} answered 404 Not Found: no model repository ${repoId} (or no such revision or file)`, status);
  return new HubError(`${what}: ${url} answered ${status} ${statusText}`, status);
}

async function request(url: string, init: RequestInit, what: string): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    throw new HubError(
      `${what}: ${url}: ${cause?.code ?? cause?.message ?? (e as Error).message} (no network? set HF_ENDPOINT to a mirror, or HF_HUB_OFFLINE=1 to use the cache only)`,
    );
  }
}

/** GET /api/models/{repo}/revision/{rev}?blobs=true. */
export async function modelInfo(repoId: string, revision: string, env: Env, signal?: AbortSignal): Promise<{ sha: string; siblings: Sibling[] }> {
  const url = `${hubEndpoint(env)}/api/models/${repoId}/revision/${encodeURIComponent(revision)}?blobs=true`;
  const res = await request(url, { headers: authHeaders(env), signal }, 'model info');
  if (!res.ok) throw httpError('model info', url, res.status, res.statusText, repoId, env);
  const body = (await res.json()) as { sha?: unknown; siblings?: unknown };
  if (typeof body.sha !== 'string' || !COMMIT_HASH.test(body.sha)) throw new HubError(`model info: ${url}: no commit hash (sha) in the answer`);
  if (!Array.isArray(body.siblings)) throw new HubError(`model info: ${url}: no file list (siblings) in the answer`);
  return { sha: body.sha, siblings: body.siblings as Sibling[] };
}

interface FileMeta {
  etag: string;
  size?: number;
  commit?: string;
  location: string;
}

/** HEAD on the resolve URL, following relative redirects only (huggingface_hub's get_hf_file_metadata). */
async function fileMetadata(url: string, repoId: string, env: Env, signal?: AbortSignal): Promise<FileMeta> {
  let cur = url;
  for (let hop = 0; hop < 10; hop++) {
    const res = await request(
      cur,
      { method: 'HEAD', redirect: 'manual', headers: { ...authHeaders(env), 'accept-encoding': 'identity' }, signal },
      'file metadata',
    );
    const loc = res.headers.get('location');
    const redirect = res.status >= 300 && res.status < 400 && loc;
    if (redirect && loc.startsWith('/') && !loc.startsWith('//')) {
      cur = new URL(loc, cur).href;
      continue;
    }
    if (!redirect && !res.ok) throw httpError('file metadata', cur, res.status, res.statusText, repoId, env);
    const etag = normalizeEtag(res.headers.get('x-linked-etag') ?? res.headers.get('etag'));
    if (!etag) throw new HubError(`file metadata: ${cur}: no ETag (X-Linked-Etag or ETag): the server is not a Hugging Face Hub endpoint`);
    if (etag.includes('/') || etag.includes('..')) throw new HubError(`file metadata: ${cur}: the ETag "${etag}" cannot name a blob`);
    const sizeHeader = res.headers.get('x-linked-size') ?? (redirect ? null : res.headers.get('content-length'));
    return {
      etag,
      size: sizeHeader !== null && /^\d+$/.test(sizeHeader) ? Number(sizeHeader) : undefined,
      commit: res.headers.get('x-repo-commit') ?? undefined,
      location: redirect ? new URL(loc, cur).href : cur,
    };
  }
  throw new HubError(`file metadata: ${url}: more than 10 redirects`);
}

/** The hash a file's contents must have: an LFS file's sha256, else its git blob sha1. */
function expectedHash(s: Sibling, size: number): { algo: 'sha256' | 'sha1'; hex: string; start: (h: Hash) => void } | undefined {
  const sha = s.lfs?.sha256 ?? s.lfs?.oid;
  if (sha && /^[0-9a-f]{64}$/.test(sha)) return { algo: 'sha256', hex: sha, start: () => {} };
  if (s.blobId && /^[0-9a-f]{40}$/.test(s.blobId)) return { algo: 'sha1', hex: s.blobId, start: (h) => h.update(`blob ${size}\0`) };
  return undefined;
}

/** Feed the first `n` bytes of a file to a hash. */
function hashPrefix(h: Hash, file: string, n: number): void {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    let pos = 0;
    while (pos < n) {
      const got = readSync(fd, buf, 0, Math.min(buf.length, n - pos), pos);
      if (got <= 0) break;
      h.update(buf.subarray(0, got));
      pos += got;
    }
  } finally {
    closeSync(fd);
  }
}

/** snapshots/<commit>/<file> → a relative link to blobs/<etag> (huggingface_hub's _create_symlink). */
function linkPointer(blob: string, pointer: string): void {
  mkdirSync(dirname(pointer), { recursive: true });
  try {
    unlinkSync(pointer);
  } catch {
    /* none yet */
  }
  symlinkSync(relative(dirname(pointer), blob), pointer);
}

function pointerPath(folder: string, commit: string, file: string): string {
  const snapshots = join(folder, 'snapshots');
  const p = join(snapshots, commit, ...file.split('/'));
  if (!p.startsWith(join(snapshots, commit) + sep)) throw new HubError(`the repository lists a file outside its snapshot: ${JSON.stringify(file)}`);
  return p;
}

function writeRef(folder: string, revision: string, commit: string): void {
  if (revision === commit) return;
  const ref = join(folder, 'refs', ...revision.split('/'));
  mkdirSync(dirname(ref), { recursive: true });
  const tmp = `${ref}.${process.pid}.tmp`;
  writeFileSync(tmp, commit);
  renameSync(tmp, ref);
}

/**
 * One download of a blob at a time (huggingface_hub's .locks/<repo folder>/<etag>.lock): the lock
 * file holds the owner's pid; a lock whose process is gone is taken over (a killed pull).
 */
function lockBlob(lock: string, file: string): () => void {
  mkdirSync(dirname(lock), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(lock, String(process.pid), { flag: 'wx' });
      return () => rmSync(lock, { force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const pid = Number(readFileSync(lock, 'utf8'));
      let alive: boolean;
      try {
        alive = Number.isInteger(pid) && pid > 0 && pid !== process.pid && (process.kill(pid, 0), true);
      } catch {
        alive = false;
      }
      if (alive) throw new HubError(`${file} is being downloaded by process ${pid} (${lock}); wait for it, or stop it`);
      rmSync(lock, { force: true });
    }
  }
  throw new HubError(`${file}: could not take the download lock ${lock}`);
}

export async function pull(o: PullOptions): Promise<PullResult> {
  const env = o.env ?? process.env;
  const revision = o.revision ?? 'main';
  const folder = repoFolder(o.repoId, env);
  if (hubOffline(env)) {
    const snap = cachedSnapshot(o.repoId, revision, env);
    if (!snap)
      throw new HubError(
        `HF_HUB_OFFLINE is set: no request made, and ${o.repoId}@${revision} is not in the cache (${hubCacheDir(env)}); pull it on a machine with network and copy the cache`,
      );
    const commit = snap.split(sep).at(-1)!;
    return { repoId: o.repoId, revision, commit, folder: snap, files: [], transferred: 0, offline: true };
  }
  const progress: PullProgress = { phase: 'metadata', filesDone: 0, files: 0, bytes: 0, totalBytes: 0, transferred: 0 };
  const emit = () => o.onProgress?.({ ...progress });
  emit();
  const info = await modelInfo(o.repoId, revision, env, o.signal);
  const include = o.include?.length ? o.include : DEFAULT_INCLUDE;
  const chosen = info.siblings.filter((s) => typeof s.rfilename === 'string' && matchesInclude(s.rfilename, include));
  if (!chosen.length) {
    const names = info.siblings.map((s) => s.rfilename).slice(0, 12);
    throw new HubError(
      `${o.include?.length ? '--include' : 'the default files (config, tokenizer, safetensors)'}: nothing matches ${include.join(', ')} in ${o.repoId}@${revision} (it has ${names.join(', ')}${info.siblings.length > names.length ? ', …' : ''})`,
    );
  }
  const commit = info.sha;
  progress.files = chosen.length;
  progress.totalBytes = chosen.reduce((a, s) => a + (s.lfs?.size ?? s.size ?? 0), 0);
  progress.phase = 'download';
  emit();
  const files: PulledFile[] = [];
  const endpointOrigin = new URL(hubEndpoint(env)).origin;
  for (const s of chosen) {
    o.signal?.throwIfAborted();
    const pointer = pointerPath(folder, commit, s.rfilename);
    progress.file = s.rfilename;
    if (existsSync(pointer)) {
      const size = statSync(pointer).size;
      const etag = lstatSync(pointer).isSymbolicLink() ? basename(readlinkSync(pointer)) : (s.lfs?.sha256 ?? s.blobId ?? '');
      files.push({ path: s.rfilename, size, etag, how: 'cached' });
      progress.bytes += size;
      progress.filesDone++;
      emit();
      continue;
    }
    const url = `${hubEndpoint(env)}/${o.repoId}/resolve/${commit}/${encodePath(s.rfilename)}`;
    const meta = await fileMetadata(url, o.repoId, env, o.signal);
    if (meta.commit && meta.commit !== commit)
      throw new HubError(`file metadata: ${url}: X-Repo-Commit ${meta.commit} is not the commit the model info named (${commit})`);
    const size = s.lfs?.size ?? meta.size ?? s.size;
    const blob = join(folder, 'blobs', meta.etag);
    if (existsSync(blob)) {
      linkPointer(blob, pointer);
      files.push({ path: s.rfilename, size: statSync(blob).size, etag: meta.etag, how: 'linked' });
      progress.bytes += statSync(blob).size;
      progress.filesDone++;
      emit();
      continue;
    }
    mkdirSync(dirname(blob), { recursive: true });
    const incomplete = `${blob}.incomplete`;
    const unlock = lockBlob(join(hubCacheDir(env), '.locks', basename(folder), `${meta.etag}.lock`), s.rfilename);
    try {
      let have = existsSync(incomplete) ? statSync(incomplete).size : 0;
      if (size !== undefined && have > size) {
        rmSync(incomplete);
        have = 0;
      }
      const resumedFrom = have;
      progress.bytes += have;
      emit();
      if (size === undefined || have < size) {
        const sameOrigin = new URL(meta.location).origin === endpointOrigin;
        // identity: the bytes as stored (what the size and hash describe, and what a Range counts).
        const headers: Record<string, string> = { ...(sameOrigin ? authHeaders(env) : { 'user-agent': USER_AGENT }), 'accept-encoding': 'identity' };
        if (have > 0) headers.range = `bytes=${have}-`;
        const res = await request(meta.location, { headers, redirect: 'follow', signal: o.signal }, `download ${s.rfilename}`);
        if (res.status === 416 && have > 0) {
          // The server has no bytes past ours (a stale size): start over.
          await res.body?.cancel();
          rmSync(incomplete);
          progress.bytes -= have;
          throw new HubError(`download ${s.rfilename}: ${meta.location} refused the range bytes=${have}- (416); the partial blob was removed, pull again`);
        }
        if (!res.ok) throw httpError(`download ${s.rfilename}`, meta.location, res.status, res.statusText, o.repoId, env);
        if (have > 0 && res.status !== 206) {
          // The Range was ignored: the whole file comes again.
          progress.bytes -= have;
          have = 0;
        }
        const fd = openSync(incomplete, have > 0 ? 'a' : 'w');
        try {
          if (res.body) {
            for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
              writeSync(fd, chunk);
              progress.bytes += chunk.byteLength;
              progress.transferred += chunk.byteLength;
              emit();
            }
          }
        } finally {
          closeSync(fd);
        }
      }
      const got = statSync(incomplete).size;
      if (size !== undefined && got !== size) {
        throw new HubError(`download ${s.rfilename}: got ${got} bytes of ${size}; run the pull again to continue from there`);
      }
      progress.phase = 'verify';
      emit();
      const want = expectedHash(s, got);
      if (want) {
        const h = createHash(want.algo);
        want.start(h);
        hashPrefix(h, incomplete, got);
        const hex = h.digest('hex');
        if (hex !== want.hex) {
          rmSync(incomplete, { force: true });
          progress.bytes -= got;
          throw new HubError(
            `${s.rfilename}: the downloaded content's ${want.algo} is ${hex}, the Hub's metadata says ${want.hex}: refused, and the bad blob was deleted (blobs/${meta.etag}.incomplete)`,
          );
        }
      }
      renameSync(incomplete, blob);
      linkPointer(blob, pointer);
      files.push({
        path: s.rfilename,
        size: got,
        etag: meta.etag,
        how: resumedFrom > 0 ? 'resumed' : 'downloaded',
        ...(resumedFrom > 0 ? { resumedFrom } : {}),
      });
    } finally {
      unlock();
    }
    progress.filesDone++;
    progress.phase = 'download';
    emit();
  }
  writeRef(folder, revision, commit);
  progress.phase = 'done';
  progress.file = undefined;
  emit();
  return { repoId: o.repoId, revision, commit, folder: join(folder, 'snapshots', commit), files, transferred: progress.transferred, offline: false };
}

// `arbor pull` against a local mock of the Hub's HTTP API: the exact huggingface_hub cache layout,
// a killed download resumed with a Range request, sha256 refusal, gated repos, HF_HUB_OFFLINE.
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pull, matchesInclude, normalizeEtag } from '../../../engine/hub/pull';
import { hubCacheDir, parseRepoRef, resolveModelRef, scanCache, ModelNotCachedError } from '../../../engine/hub/cache';
import { commitOf, gitBlobSha1, MockHub, sha256 } from './mock-hub';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
const rand = (n: number, seed: number) => {
  const b = Buffer.alloc(n);
  let x = seed;
  for (let i = 0; i < n; i++) b[i] = (x = (x * 1103515245 + 12345) >>> 0) >>> 24;
  return b;
};

const CONFIG = Buffer.from(JSON.stringify({ architectures: ['LlamaForCausalLM'], model_type: 'llama' }));
let hub: MockHub;

beforeAll(async () => {
  hub = await new MockHub().start();
  hub.add({
    id: 'acme/tiny',
    commit: commitOf('acme/tiny'),
    refs: { v1: commitOf('acme/tiny-v1') },
    files: [
      { path: 'config.json', content: CONFIG },
      { path: 'tokenizer.json', content: Buffer.from('{"model":{}}') },
      { path: 'model.safetensors', content: rand(300_000, 1), lfs: true },
      { path: 'README.md', content: Buffer.from('# tiny') },
      { path: 'pytorch_model.bin', content: rand(1000, 2), lfs: true },
      { path: 'onnx/model.onnx', content: rand(500, 3), lfs: true },
      { path: 'extra/notes.txt', content: Buffer.from('nested') },
      { path: 'consolidated.safetensors', content: rand(700, 4), lfs: true },
    ],
  });
  hub.add({ id: 'acme/gated', commit: commitOf('acme/gated'), token: 'hf_secret', files: [{ path: 'config.json', content: CONFIG }] });
});
afterAll(() => hub.stop());

const envFor = (extra: Record<string, string> = {}) => {
  const cache = mkdtempSync(join(tmpdir(), 'arbor-hf-'));
  return { HF_HUB_CACHE: cache, HF_ENDPOINT: hub.endpoint, HOME: cache, ...extra } as Record<string, string>;
};

/** Reads a cache back with huggingface_hub's layout rules: every snapshot entry is a relative link into blobs/ named by the file's ETag. */
function readLayout(cache: string, repo: string) {
  const folder = join(cache, `models--${repo.replace('/', '--')}`);
  const refs = Object.fromEntries(readdirSync(join(folder, 'refs')).map((r) => [r, readFileSync(join(folder, 'refs', r), 'utf8')]));
  const snapshots: Record<string, Record<string, { target: string; blob: string }>> = {};
  for (const commit of readdirSync(join(folder, 'snapshots'))) {
    const walk = (dir: string): [string, { target: string; blob: string }][] =>
      readdirSync(dir).flatMap((f) => {
        const p = join(dir, f);
        if (lstatSync(p).isSymbolicLink()) {
          const target = readlinkSync(p);
          return [[relative(join(folder, 'snapshots', commit), p), { target, blob: relative(folder, resolve(dirname(p), target)) }]];
        }
        return walk(p);
      });
    snapshots[commit] = Object.fromEntries(walk(join(folder, 'snapshots', commit)));
  }
  return { folder, refs, snapshots, blobs: readdirSync(join(folder, 'blobs')).sort() };
}

describe('arbor pull (mock Hub)', () => {
  it('writes the exact huggingface_hub cache layout: refs, blobs by ETag, relative snapshot links; default files only', async () => {
    const env = envFor();
    const progress: number[] = [];
    const r = await pull({ repoId: 'acme/tiny', env, onProgress: (p) => progress.push(p.bytes) });
    const commit = commitOf('acme/tiny');
    expect(r.commit).toBe(commit);
    const lay = readLayout(env.HF_HUB_CACHE!, 'acme/tiny');
    expect(lay.refs).toEqual({ main: commit }); // no trailing newline, as huggingface_hub writes it
    const model = hub.repos.get('acme/tiny')!.files;
    const f = (p: string) => model.find((x) => x.path === p)!.content;
    expect(lay.snapshots[commit]).toEqual({
      'config.json': { target: `../../blobs/${gitBlobSha1(f('config.json'))}`, blob: `blobs/${gitBlobSha1(f('config.json'))}` },
      'tokenizer.json': { target: `../../blobs/${gitBlobSha1(f('tokenizer.json'))}`, blob: `blobs/${gitBlobSha1(f('tokenizer.json'))}` },
      'model.safetensors': { target: `../../blobs/${sha256(f('model.safetensors'))}`, blob: `blobs/${sha256(f('model.safetensors'))}` },
    });
    expect(lay.blobs).toEqual([gitBlobSha1(f('config.json')), gitBlobSha1(f('tokenizer.json')), sha256(f('model.safetensors'))].sort());
    expect(readFileSync(join(r.folder, 'model.safetensors')).equals(f('model.safetensors'))).toBe(true);
    expect(progress.at(-1)).toBe(300_000 + CONFIG.length + 12);
    // The LFS file came from the file storage (another origin) after the 302, without the token header.
    const cdn = hub.requests('cdn');
    expect(cdn.some((q) => q.url.startsWith(`/${sha256(f('model.safetensors'))}`))).toBe(true);
    // A nested file (with --include) links one level further up; an existing snapshot is not fetched again.
    hub.log.length = 0;
    const again = await pull({ repoId: 'acme/tiny', env, include: ['extra/', '*.json'] });
    expect(again.files.map((x) => [x.path, x.how])).toEqual([
      ['config.json', 'cached'],
      ['tokenizer.json', 'cached'],
      ['extra/notes.txt', 'downloaded'],
    ]);
    expect(readlinkSync(join(again.folder, 'extra', 'notes.txt'))).toBe(`../../../blobs/${gitBlobSha1(f('extra/notes.txt'))}`);
    expect(hub.requests('cdn')).toEqual([]);
    // A tag is written to refs/<tag>; the cache resolves org/name and org/name@tag offline.
    await pull({ repoId: 'acme/tiny', revision: 'v1', env, include: ['config.json'] });
    expect(readFileSync(join(lay.folder, 'refs', 'v1'), 'utf8')).toBe(commitOf('acme/tiny-v1'));
    expect(resolveModelRef('acme/tiny@v1', '/', env)).toBe(join(lay.folder, 'snapshots', commitOf('acme/tiny-v1')));
    expect(resolveModelRef('acme/tiny', '/', env)).toBe(join(lay.folder, 'snapshots', commit));
    const scanned = scanCache(env);
    expect(scanned.map((s) => [s.repoId, s.snapshots.map((x) => x.refs.join(',')).sort()])).toEqual([['acme/tiny', ['main', 'v1']]]);
    expect(existsSync(join(lay.folder, 'blobs', `${sha256(f('model.safetensors'))}.incomplete`))).toBe(false);
  });

  it('a download killed midway resumes with a Range request and transfers only the rest', async () => {
    const env = envFor();
    const content = hub.repos.get('acme/tiny')!.files.find((x) => x.path === 'model.safetensors')!.content;
    const sha = sha256(content);
    const cut = 120_000;
    hub.stallAfter.set(sha, cut);
    hub.sent.delete(sha);
    const child = spawn(process.execPath, [bin, 'pull', 'acme/tiny'], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const incomplete = join(env.HF_HUB_CACHE!, 'models--acme--tiny', 'blobs', `${sha}.incomplete`);
    const t0 = Date.now();
    while (!(existsSync(incomplete) && statSync(incomplete).size === cut)) {
      if (child.exitCode !== null) throw new Error(`arbor pull ended early: ${stderr}`);
      if (Date.now() - t0 > 90_000) throw new Error(`no partial blob of ${cut} bytes: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(hub.sent.get(sha)).toBe(cut);
    hub.log.length = 0;
    const r = await pull({ repoId: 'acme/tiny', env });
    expect(r.files.find((x) => x.path === 'model.safetensors')).toMatchObject({ how: 'resumed', resumedFrom: cut, size: content.length });
    const gets = hub.requests('cdn');
    expect(gets.map((q) => [q.range, q.status])).toEqual([[`bytes=${cut}-`, 206]]);
    expect(hub.sent.get(sha)).toBe(content.length); // cut + the rest: no byte twice
    expect(r.files.map((x) => x.how)).toEqual(['cached', 'cached', 'resumed']); // the small files were done before the kill
    expect(r.transferred).toBe(content.length - cut);
    expect(readFileSync(join(r.folder, 'model.safetensors')).equals(content)).toBe(true);
    expect(existsSync(incomplete)).toBe(false);
  }, 120_000);

  it('refuses a blob whose content does not match its sha256 and deletes it', async () => {
    const env = envFor();
    const content = hub.repos.get('acme/tiny')!.files.find((x) => x.path === 'model.safetensors')!.content;
    const sha = sha256(content);
    hub.corrupt.set(sha, Buffer.from(content).fill(7, 1000, 1010));
    try {
      await expect(pull({ repoId: 'acme/tiny', env })).rejects.toThrow(
        new RegExp(`model\\.safetensors: the downloaded content's sha256 is [0-9a-f]{64}, the Hub's metadata says ${sha}: refused`),
      );
    } finally {
      hub.corrupt.delete(sha);
    }
    const folder = join(env.HF_HUB_CACHE!, 'models--acme--tiny');
    expect(readdirSync(join(folder, 'blobs')).filter((b) => b.startsWith(sha))).toEqual([]);
    expect(existsSync(join(folder, 'snapshots', commitOf('acme/tiny'), 'model.safetensors'))).toBe(false);
    expect(existsSync(join(folder, 'refs', 'main'))).toBe(false); // an incomplete snapshot is not named by a ref
    expect(() => resolveModelRef('acme/tiny', '/', env)).toThrow(ModelNotCachedError);
    // Pulled again with the right bytes, it completes.
    const r = await pull({ repoId: 'acme/tiny', env });
    expect(realpathSync(join(r.folder, 'model.safetensors'))).toBe(join(folder, 'blobs', sha));
  });

  it('a gated repository answers 401 without a token; HF_TOKEN opens it and goes to the Hub only', async () => {
    const env = envFor();
    await expect(pull({ repoId: 'acme/gated', env })).rejects.toThrow(/401 Unauthorized: acme\/gated is gated or private: set HF_TOKEN/);
    await expect(pull({ repoId: 'acme/gated', env: { ...env, HF_TOKEN: 'hf_wrong' } })).rejects.toThrow(/token .* is not accepted for acme\/gated/);
    hub.log.length = 0;
    const r = await pull({ repoId: 'acme/gated', env: { ...env, HF_TOKEN: 'hf_secret' } });
    expect(r.files.map((f) => f.path)).toEqual(['config.json']);
    expect(hub.requests('hub').every((q) => q.authorization === 'Bearer hf_secret')).toBe(true);
    // The token file of `huggingface-cli login` ($HF_HOME/token) is read too.
  });

  it('HF_HUB_OFFLINE=1 makes no request: the cached snapshot or an error', async () => {
    const env = envFor();
    hub.log.length = 0;
    await expect(pull({ repoId: 'acme/tiny', env: { ...env, HF_HUB_OFFLINE: '1' } })).rejects.toThrow(/HF_HUB_OFFLINE is set: no request made/);
    expect(hub.log).toEqual([]);
    await pull({ repoId: 'acme/tiny', env, include: ['config.json'] });
    hub.log.length = 0;
    const r = await pull({ repoId: 'acme/tiny', env: { ...env, HF_HUB_OFFLINE: 'true' } });
    expect(r.offline).toBe(true);
    expect(r.commit).toBe(commitOf('acme/tiny'));
    expect(hub.log).toEqual([]);
  });

  it("one download of a blob at a time: a live process's lock refuses, a dead one's is taken over", async () => {
    const env = envFor();
    const sha = sha256(hub.repos.get('acme/tiny')!.files.find((x) => x.path === 'model.safetensors')!.content);
    const lock = join(env.HF_HUB_CACHE!, '.locks', 'models--acme--tiny', `${sha}.lock`);
    mkdirSync(dirname(lock), { recursive: true });
    writeFileSync(lock, String(process.ppid));
    await expect(pull({ repoId: 'acme/tiny', env })).rejects.toThrow(`model.safetensors is being downloaded by process ${process.ppid}`);
    writeFileSync(lock, '999999999');
    const r = await pull({ repoId: 'acme/tiny', env });
    expect(r.files.find((x) => x.path === 'model.safetensors')?.how).toBe('downloaded');
    expect(existsSync(lock)).toBe(false);
  });

  it('names what went wrong: an unknown repository, an --include that matches nothing', async () => {
    const env = envFor();
    await expect(pull({ repoId: 'acme/none', env })).rejects.toThrow(/404 Not Found: no model repository acme\/none/);
    await expect(pull({ repoId: 'acme/tiny', env, include: ['*.gguf'] })).rejects.toThrow(
      /--include: nothing matches \*\.gguf in acme\/tiny@main \(it has config\.json/,
    );
  });
});

describe('cache rules', () => {
  it('finds the cache as huggingface_hub does', () => {
    expect(hubCacheDir({ HF_HUB_CACHE: '/a/hub', HF_HOME: '/b' })).toBe('/a/hub');
    expect(hubCacheDir({ HF_HOME: '/b' })).toBe('/b/hub');
    expect(hubCacheDir({ XDG_CACHE_HOME: '/x' })).toBe('/x/huggingface/hub');
    expect(hubCacheDir({ HUGGINGFACE_HUB_CACHE: '/legacy' })).toBe('/legacy');
  });
  it('parses org/name[@revision] and leaves paths alone', () => {
    expect(parseRepoRef('Qwen/Qwen3-0.6B')).toEqual({ repoId: 'Qwen/Qwen3-0.6B', revision: 'main' });
    expect(parseRepoRef('Qwen/Qwen3-0.6B@v1.0')).toEqual({ repoId: 'Qwen/Qwen3-0.6B', revision: 'v1.0' });
    for (const p of ['./a/b', 'a/b/c', '/abs/x', 'a', 'a/../b', 'a--b/c']) expect(parseRepoRef(p)).toBeUndefined();
    // An existing folder wins over the repo id reading of the same text.
    const dir = mkdtempSync(join(tmpdir(), 'arbor-ref-'));
    const env = { HF_HUB_CACHE: join(dir, 'cache') };
    expect(() => resolveModelRef('org/name', dir, env)).toThrow(/org\/name is not in the Hugging Face cache .* run `arbor pull org\/name` first/);
    const local = join(dir, 'org', 'name');
    mkdirSync(local, { recursive: true });
    expect(resolveModelRef('org/name', dir, env)).toBe(local);
  });
  it('normalizes ETags and matches includes as fnmatch does', () => {
    expect(normalizeEtag('W/"abc"')).toBe('abc');
    expect(normalizeEtag('"abc"')).toBe('abc');
    expect(matchesInclude('a/b.safetensors', ['*.safetensors'])).toBe(true);
    expect(matchesInclude('onnx/model.onnx', ['onnx/'])).toBe(true);
    expect(matchesInclude('model.bin', ['*.safetensors', 'config.json'])).toBe(false);
    expect(matchesInclude('model-00001-of-00002.safetensors', ['model-0000[12]-of-*.safetensors'])).toBe(true);
    expect(matchesInclude('model-00003-of-00002.safetensors', ['model-0000[!3]-of-*'])).toBe(false);
    expect(matchesInclude('a+b(c).json', ['a+b(c).json'])).toBe(true);
    expect(matchesInclude('axjson', ['a.json'])).toBe(false);
  });
});

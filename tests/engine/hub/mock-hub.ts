/**
 * A local stand-in for the Hugging Face Hub's HTTP API on 127.0.0.1, as huggingface_hub sees it:
 *  - GET /api/models/{org}/{name}/revision/{rev}[?blobs=true]: { id, sha, siblings: [{ rfilename,
 *    size, blobId, lfs?: { sha256, size, pointerSize } }] } (size/blobId/lfs only with blobs=true);
 *  - HEAD|GET /{org}/{name}/resolve/{rev}/{path}: X-Repo-Commit; a git file answers 200 with its
 *    blob sha1 as ETag; an LFS file answers 302 to the file storage (a second server, another
 *    origin, as cdn-lfs.hf.co is) with X-Linked-Etag (its sha256) and X-Linked-Size;
 *  - the file storage: GET /{sha256} with Range support (206), counting the bytes it sends.
 * A gated repository answers 401 without `Authorization: Bearer <its token>`. Test switches:
 * `corrupt` (serve other bytes for a sha256), `stallAfter` (send that many bytes, then hold the
 * connection open without more).
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface MockFile {
  path: string;
  content: Buffer;
  lfs?: boolean;
}

export interface MockRepo {
  id: string;
  commit: string;
  files: MockFile[];
  /** The token a gated repository wants. */
  token?: string;
  /** Branches/tags → commit (main → commit is implied). */
  refs?: Record<string, string>;
}

export interface LoggedRequest {
  server: 'hub' | 'cdn';
  method: string;
  url: string;
  range?: string;
  authorization?: string;
  status: number;
}

export const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
export const gitBlobSha1 = (b: Buffer) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');

export class MockHub {
  readonly repos = new Map<string, MockRepo>();
  readonly log: LoggedRequest[] = [];
  /** Bytes of file content the storage sent, per sha256. */
  readonly sent = new Map<string, number>();
  /** sha256 → bytes served instead of the real content. */
  readonly corrupt = new Map<string, Buffer>();
  /** sha256 → send this many bytes, then stall (once; cleared when reached). */
  readonly stallAfter = new Map<string, number>();
  private hub!: Server;
  private cdn!: Server;
  private held: ServerResponse[] = [];
  endpoint = '';
  cdnUrl = '';

  add(repo: MockRepo): MockRepo {
    this.repos.set(repo.id, repo);
    return repo;
  }

  async start(): Promise<this> {
    this.hub = createServer((q, s) => this.onHub(q, s));
    this.cdn = createServer((q, s) => this.onCdn(q, s));
    await Promise.all([this.hub, this.cdn].map((srv) => new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))));
    this.endpoint = `http://127.0.0.1:${(this.hub.address() as AddressInfo).port}`;
    this.cdnUrl = `http://127.0.0.1:${(this.cdn.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    for (const r of this.held) r.destroy();
    for (const srv of [this.hub, this.cdn]) {
      srv.closeAllConnections();
      await new Promise<void>((r) => srv.close(() => r()));
    }
  }

  requests(server?: 'hub' | 'cdn'): LoggedRequest[] {
    return this.log.filter((l) => !server || l.server === server);
  }

  private record(server: 'hub' | 'cdn', q: IncomingMessage, status: number): void {
    this.log.push({ server, method: q.method!, url: q.url!, range: q.headers.range, authorization: q.headers.authorization, status });
  }

  private commitOf(repo: MockRepo, rev: string): string | undefined {
    if (rev === repo.commit || Object.values(repo.refs ?? {}).includes(rev)) return rev;
    return rev === 'main' ? repo.commit : repo.refs?.[rev];
  }

  private onHub(q: IncomingMessage, s: ServerResponse): void {
    const url = new URL(q.url!, this.endpoint);
    const send = (status: number, body: string, headers: Record<string, string> = {}) => {
      this.record('hub', q, status);
      s.writeHead(status, { 'content-type': 'application/json', ...headers });
      s.end(q.method === 'HEAD' ? undefined : body);
    };
    const info = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname);
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    const repoId = info?.[1] ?? resolve?.[1];
    const repo = repoId ? this.repos.get(repoId) : undefined;
    if (!repo) return send(404, JSON.stringify({ error: 'Repository not found' }), { 'x-error-code': 'RepoNotFound' });
    if (repo.token && q.headers.authorization !== `Bearer ${repo.token}`)
      return send(401, JSON.stringify({ error: 'Access to model is restricted. You must have access to it and be authenticated to access it.' }), {
        'x-error-code': 'GatedRepo',
      });
    const rev = decodeURIComponent((info ?? resolve)![2]!);
    const commit = this.commitOf(repo, rev);
    if (!commit) return send(404, JSON.stringify({ error: `Invalid rev id: ${rev}` }), { 'x-error-code': 'RevisionNotFound' });
    if (info) {
      const blobs = url.searchParams.get('blobs') === 'true';
      const siblings = repo.files.map((f) =>
        blobs
          ? {
              rfilename: f.path,
              size: f.content.length,
              blobId: f.lfs
                ? gitBlobSha1(Buffer.from(`version https://git-lfs.github.com/spec/v1\noid sha256:${sha256(f.content)}\nsize ${f.content.length}\n`))
                : gitBlobSha1(f.content),
              ...(f.lfs ? { lfs: { sha256: sha256(f.content), size: f.content.length, pointerSize: 134 } } : {}),
            }
          : { rfilename: f.path },
      );
      return send(
        200,
        JSON.stringify({ _id: 'x', id: repo.id, modelId: repo.id, sha: commit, private: false, gated: repo.token ? 'manual' : false, siblings }),
      );
    }
    const path = decodeURIComponent(resolve![3]!);
    const file = repo.files.find((f) => f.path === path);
    if (!file) return send(404, JSON.stringify({ error: 'Entry not found' }), { 'x-error-code': 'EntryNotFound', 'x-repo-commit': commit });
    if (file.lfs) {
      const sha = sha256(file.content);
      this.record('hub', q, 302);
      s.writeHead(302, {
        location: `${this.cdnUrl}/${sha}?X-Amz-Signature=mock`,
        'x-repo-commit': commit,
        'x-linked-etag': `"${sha}"`,
        'x-linked-size': String(file.content.length),
        etag: `"${gitBlobSha1(file.content)}"`,
        'content-length': '0',
      });
      return void s.end();
    }
    this.serveBytes(q, s, file.content, gitBlobSha1(file.content), 'hub', { etag: `"${gitBlobSha1(file.content)}"`, 'x-repo-commit': commit });
  }

  private onCdn(q: IncomingMessage, s: ServerResponse): void {
    const sha = new URL(q.url!, this.cdnUrl).pathname.slice(1);
    const file = [...this.repos.values()].flatMap((r) => r.files).find((f) => f.lfs && sha256(f.content) === sha);
    if (!file) {
      this.record('cdn', q, 404);
      s.writeHead(404);
      return void s.end();
    }
    this.serveBytes(q, s, this.corrupt.get(sha) ?? file.content, sha, 'cdn');
  }

  private serveBytes(q: IncomingMessage, s: ServerResponse, content: Buffer, key: string, server: 'hub' | 'cdn', extra: Record<string, string> = {}): void {
    let start = 0;
    const m = /^bytes=(\d+)-$/.exec(q.headers.range ?? '');
    if (m) start = Number(m[1]);
    if (start > content.length || (m && start === content.length)) {
      this.record(server, q, 416);
      s.writeHead(416, { 'content-range': `bytes */${content.length}` });
      return void s.end();
    }
    const body = content.subarray(start);
    const status = m ? 206 : 200;
    this.record(server, q, status);
    s.writeHead(status, {
      ...extra,
      'content-length': String(body.length),
      'accept-ranges': 'bytes',
      ...(m ? { 'content-range': `bytes ${start}-${content.length - 1}/${content.length}` } : {}),
    });
    if (q.method === 'HEAD') return void s.end();
    const stall = this.stallAfter.get(key);
    if (stall !== undefined && stall < body.length) {
      this.stallAfter.delete(key);
      s.write(body.subarray(0, stall), () => this.sent.set(key, (this.sent.get(key) ?? 0) + stall));
      this.held.push(s);
      return;
    }
    this.sent.set(key, (this.sent.get(key) ?? 0) + body.length);
    s.end(body);
  }
}

/** A commit hash for a test repository. */
export const commitOf = (seed: string) => createHash('sha1').update(seed).digest('hex');

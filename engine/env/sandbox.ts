/**
 * The user-code sandbox behind the editor's "try it": a tool file run with given arguments, or
 * a reward file scoring a stored trajectory. The TypeScript is compiled with esbuild (source map
 * kept), then run in a sandbox process of its own (./sandbox-host.ts: Node's permission model, no
 * environment, a heap cap, a wall-clock limit that kills it), stopped after the call. Errors come
 * back with the user's file path and the line/column in their TypeScript source.
 */
import { DEFAULT_SANDBOX_LIMITS, type SandboxLimits, type TryResult } from './sandbox-compile';
import type { EpisodeSummary } from './rewards';
import { DEFAULT_LIMITS, runCall } from './tool';

/** A failure as the editor shows it: the message as thrown, the file, the TypeScript line and the mapped stack. */
async function failure(e: unknown, path: string, t0: number, logs: string[] = []): Promise<TryResult> {
  const { SandboxError } = await import('./sandbox-host');
  const ms = Math.round(performance.now() - t0);
  if (e instanceof SandboxError)
    return { ok: false, error: { message: e.detail, path: e.path || path, line: e.line, column: e.column, stack: e.userStack }, logs, ms };
  const message = String((e as Error)?.message ?? e);
  return { ok: false, error: { message: message.startsWith(path) ? message : `${path}: ${message}`, path }, logs, ms };
}

/**
 * One "try it" in a sandbox host of its own: `open` starts it, `use` runs the try; a throw
 * becomes the editor's failure (with the logs so far), and the host is closed in every case.
 */
async function tryInHost(
  path: string,
  open: (Host: typeof import('./sandbox-host').SandboxHost) => Promise<import('./sandbox-host').SandboxHost>,
  use: (host: import('./sandbox-host').SandboxHost, t0: number) => Promise<TryResult>,
): Promise<TryResult> {
  const t0 = performance.now();
  const { SandboxHost } = await import('./sandbox-host');
  let host: import('./sandbox-host').SandboxHost | undefined;
  try {
    host = await open(SandboxHost);
    return await use(host, t0);
  } catch (e) {
    return failure(e, path, t0, host?.takeLogs());
  } finally {
    await host?.close();
  }
}

/** Run the tool exported by `source` with `args`, as a model's call would run (validation, timeout). */
export async function tryTool(
  req: { source: string; path?: string; tool?: string; args: unknown; workspace?: string },
  limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS,
): Promise<TryResult> {
  const path = req.path ?? 'tool.ts';
  return tryInHost(
    path,
    (Host) => Host.open({ tools: [{ path, source: req.source }] }, limits, req.workspace),
    async (host, t0) => {
      const names = [...host.tools.keys()];
      const picked = req.tool ? names.find((n) => n === req.tool || host.exportNames.get(n) === req.tool) : names.length === 1 ? names[0] : undefined;
      if (!picked)
        return await failure(
          new Error(
            `${req.tool ? `no tool named "${req.tool}"` : 'exports several tools; choose one'} (exports: ${names.map((n) => `${host.exportNames.get(n)} (${n})`).join(', ')})`,
          ),
          path,
          t0,
        );
      // The same path a model's call takes (argument validation against the schema, size limit,
      // errors as observations); the sandbox's own time limit (and the host's kill 2 s after it) speaks first.
      const out = await runCall(
        host.tools,
        { name: picked, args: req.args as Record<string, unknown> },
        { ...DEFAULT_LIMITS, timeoutMs: limits.timeoutMs + 3000 },
        { episode: {} },
      );
      const logs = host.takeLogs();
      const value = { content: out.result, success: out.success, metadata: out.metadata, latencyMs: out.latencyMs };
      if (out.success) return { ok: true, value, logs, ms: Math.round(performance.now() - t0) };
      if (out.thrown) return { ...(await failure(out.thrown, path, t0, logs)), value };
      return { ok: false, value, error: { message: out.error ?? out.result, path }, logs, ms: Math.round(performance.now() - t0) };
    },
  );
}

/** Score an episode summary with the reward function exported by `source`. */
export async function tryReward(
  req: { source: string; path?: string; summary: EpisodeSummary },
  limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS,
): Promise<TryResult> {
  const path = req.path ?? 'reward.ts';
  return tryInHost(
    path,
    (Host) => Host.open({ reward: { path, source: req.source } }, limits),
    async (host, t0) => ({ ok: true, value: await host.reward(req.summary), logs: host.takeLogs(), ms: Math.round(performance.now() - t0) }),
  );
}

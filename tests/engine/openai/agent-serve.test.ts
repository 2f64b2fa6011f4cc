/**
 * Acceptance (#41): environment.agent.mode "serve" (engine/openai/agent-serve.ts) on a scripted
 * decode backend. One long-lived program is handed every episode; a worker that crashes mid-episode
 * fails that episode (reward 0, its stderr in the run log) and is started again for the next one;
 * an episode past timeout_ms scores 0 while the worker goes on (the timer starts when the episode is handed over, a worker's start-up included); a handler error is a failed
 * episode; episodes run concurrently in one worker.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { validateConfig } from '../../../engine/config/experiment';
import { hermesFormat } from '../../../engine/env/format-hermes';
import type { EnvTask } from '../../../engine/env/task';
import { ToolEnv } from '../../../engine/env/toolenv';
import { AgentRollouts } from '../../../engine/openai/agent';
import type { RolloutTask } from '../../../engine/rollout/ports';
import { toolsTokenizer } from '../../../engine/tasks/tools/kit';
import { ScriptedBackend } from './scripted';

const home = mkdtempSync(join(tmpdir(), 'arbor-agent-serve-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

const tok = toolsTokenizer().hf;
const end = tok.tokenId('<|im_end|>')!;
const script = [...tok.encode('<answer> 40 </answer>'), end];

function setup(concurrency: number, startFile: string, timeoutMs: number) {
  const backend = new ScriptedBackend(
    tok.vocabSize,
    Array.from({ length: 40 }, () => script),
  );
  const cfg = validateConfig(
    {
      model: { init: 'tiny' },
      task: { kind: 'custom' },
      rollout: { max_turns: 4, max_new_tokens: 16, max_total_length: 256 },
      environment: {
        tasks: 'unused.jsonl',
        agent: {
          command: [process.execPath, join(__dirname, 'fixtures', 'serve-agent.mjs')],
          mode: 'serve',
          concurrency,
          timeout_ms: timeoutMs,
          env: { START_FILE: startFile },
        },
      },
    },
    { checkFiles: false, baseDir: home },
  );
  const task = (id: string): RolloutTask => {
    const row: EnvTask = { id, prompt: 'how old was the founder of the iron bridge guild when it was founded ?', answers: ['40'] };
    return {
      id,
      createEnv: () =>
        new ToolEnv({
          task: row,
          tools: [],
          format: hermesFormat(),
          tokenizer: tok,
          userReward: (s) => ({ reward: s.answer === '40' ? 1 : 0, components: {} }),
        }),
    };
  };
  const logs: string[] = [];
  const agents = new AgentRollouts({
    cfg,
    spec: cfg.environment.agent!,
    backend,
    tokenizer: tok,
    stopTokenIds: [end],
    endStrings: [],
    log: (l) => logs.push(l),
  });
  return { agents, task, logs };
}

const starts = (f: string) => readFileSync(f, 'utf8').trim().split('\n').filter(Boolean).length;

describe('environment.agent.mode serve', () => {
  it('a crashed worker is restarted and its episode failed; a timed-out episode scores 0; the others go on', async () => {
    const startFile = join(home, 'starts-1');
    const { agents, task, logs } = setup(1, startFile, 5000);
    try {
      const ids = ['ok-1', 'crash', 'ok-2', 'hang', 'ok-3', 'silent', 'fail'];
      const groups = await agents.run(ids.map(task), 1, 5, { temperature: 1, topP: 1 });
      const r = Object.fromEntries(ids.map((id, i) => [id, groups[i]![0]!]));
      for (const id of ['ok-1', 'ok-2', 'ok-3']) {
        expect(r[id]!.outcome.reward, id).toBe(1);
        expect(r[id]!.calls).toBe(2);
        expect(r[id]!.trajectories.length).toBe(1);
        expect(r[id]!.trajectories[0]!.turns.map((u) => u.role)).toEqual(['model', 'tool', 'model']);
        expect(r[id]!.trajectories[0]!.turns[0]!.tokenIds).toEqual(script);
      }
      // crash: the worker died mid-episode → reward 0, the call it made kept with reward 0, stderr logged, worker restarted.
      expect(r.crash!.outcome.reward).toBe(0);
      expect(r.crash!.outcome.components.agent_failed).toBe(1);
      expect(r.crash!.trajectories.length).toBe(1);
      expect(r.crash!.trajectories[0]!.outcome.reward).toBe(0);
      const log = logs.join('\n');
      expect(log).toMatch(/task crash sample 0: agent worker 0 exited with code 3 with this episode in flight; reward 0\n\s+stderr: boom: the worker died/);
      expect(log).toContain('agent: worker 0 restarted');
      // hang: past timeout_ms → reward 0; the same worker answered ok-3 after it.
      expect(r.hang!.run.timedOut).toBe(true);
      expect(r.hang!.outcome.reward).toBe(0);
      expect(log).toContain('task hang sample 0: ran past environment.agent.timeout_ms = 5000 ms (its base URL closed)');
      expect(r.silent!.trajectories.length).toBe(0);
      expect(log).toContain('task silent sample 0: made no call to its OPENAI_BASE_URL');
      expect(r.fail!.outcome.reward).toBe(0);
      expect(log).toContain('task fail sample 0: the program answered episode');
      expect(log).toContain('Error: handler failed');
      // Started twice in all: once, and once after the crash.
      expect(starts(startFile)).toBe(2);
    } finally {
      await agents.close();
    }
  }, 60_000);

  it('runs episodes concurrently in one program', async () => {
    const startFile = join(home, 'starts-2');
    const { agents, task, logs } = setup(6, startFile, 60_000);
    try {
      const groups = await agents.run(['ok-1', 'ok-2', 'ok-3'].map(task), 2, 7, { temperature: 1, topP: 1 });
      expect(
        groups.flat().map((e) => e.outcome.reward),
        logs.join('\n'),
      ).toEqual([1, 1, 1, 1, 1, 1]);
      // Samples numbered per group in episode order.
      expect(groups.map((g) => g.flatMap((e) => e.trajectories.map((t) => t.sample)))).toEqual([
        [0, 1],
        [0, 1],
        [0, 1],
      ]);
      expect(starts(startFile)).toBe(1);
      // The step's split: model calls, rows per backend call, the agent's and the decode's time.
      const m = agents.takeMetrics();
      expect(m['agent/calls']).toBe(12);
      expect(m['agent/failed']).toBe(0);
      expect(m['agent/decode_batch']).toBeGreaterThanOrEqual(1);
      expect(Object.keys(m)).toEqual(expect.arrayContaining(['time/agent_s', 'time/decode_s']));
      expect(agents.takeMetrics()).toEqual({});
    } finally {
      await agents.close();
    }
  }, 60_000);
});

/**
 * External agent episodes (engine/openai/agent.ts) on a scripted decode backend: an agent that
 * talks to its base URL gets its calls as one multi-turn trajectory and the reward file receives
 * the whole episode (task, every call, the answer); one that exits non-zero, hangs past timeout_ms
 * (its process is killed) or makes no call gets reward 0 with its stderr in the run log, and the
 * other episodes go on.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { validateConfig } from '../../../engine/config/experiment';
import { hermesFormat } from '../../../engine/env/format-hermes';
import type { EpisodeSummary } from '../../../engine/env/rewards';
import type { EnvTask } from '../../../engine/env/task';
import { ToolEnv } from '../../../engine/env/toolenv';
import { AgentRollouts } from '../../../engine/openai/agent';
import type { RolloutTask } from '../../../engine/rollout/ports';
import { toolsTokenizer } from '../../../engine/tasks/tools/kit';
import { ScriptedBackend } from './scripted';

const home = mkdtempSync(join(tmpdir(), 'arbor-agent-ep-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('external agent episodes', () => {
  it('records calls as trajectories, scores the whole episode, and survives failing agents', async () => {
    const tok = toolsTokenizer().hf;
    const end = tok.tokenId('<|im_end|>')!;
    const script = [...tok.encode('<answer> 40 </answer>'), end];
    const backend = new ScriptedBackend(tok.vocabSize, [script, script, script]);
    const pidFile = join(home, 'hang.pid');
    const cfg = validateConfig(
      {
        model: { init: 'tiny' },
        task: { kind: 'custom' },
        rollout: { max_turns: 4, max_new_tokens: 16, max_total_length: 256 },
        environment: {
          tasks: 'unused.jsonl',
          agent: { command: [process.execPath, join(__dirname, 'fixtures', 'agent.mjs')], concurrency: 1, timeout_ms: 3000, env: { PID_FILE: pidFile } },
        },
      },
      { checkFiles: false, baseDir: home },
    );
    const seen: EpisodeSummary[] = [];
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
            userReward: (s) => {
              seen.push(s);
              return { reward: s.answer === '40' ? 1 : 0, components: { calls: s.agent?.calls.length ?? -1 } };
            },
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
    try {
      const groups = await agents.run(['ok', 'crash', 'hang', 'silent'].map(task), 1, 5, { temperature: 1, topP: 1 });
      const [ok, crash, hang, silent] = groups.map((g) => g[0]!);
      // ok: two calls, the second continuing the first → one trajectory of two model turns.
      expect(ok!.calls).toBe(2);
      expect(ok!.outcome.reward).toBe(1);
      expect(ok!.outcome.components.calls).toBe(2);
      expect(ok!.trajectories.length).toBe(1);
      const t = ok!.trajectories[0]!;
      expect(t.turns.map((u) => u.role)).toEqual(['model', 'tool', 'model']);
      expect(t.turns[0]!.tokenIds).toEqual(script);
      expect(t.outcome.answer).toBe('40');
      // The reward file saw the task, every call and the answer.
      const s = seen.find((x) => x.task.id === 'ok')!;
      expect(s.answer).toBe('40');
      expect(s.agent!.calls.map((c) => c.kind)).toEqual(['chat', 'chat']);
      expect((s.agent!.calls[1]!.request as { messages: unknown[] }).messages.length).toBe(3);
      expect(s.history.length).toBe(2);
      // crash: reward 0 although it made a call; its stderr is in the log.
      expect(crash!.outcome.reward).toBe(0);
      expect(crash!.outcome.components.agent_failed).toBe(1);
      expect(crash!.trajectories.length).toBe(1);
      expect(crash!.trajectories[0]!.outcome.reward).toBe(0);
      expect(logs.join('\n')).toMatch(/task crash sample 0: exited with code 3; reward 0\n\s+stderr: boom: the agent failed/);
      // hang: killed at timeout_ms, reward 0, and its process is gone.
      expect(hang!.run.timedOut).toBe(true);
      expect(hang!.outcome.reward).toBe(0);
      expect(logs.join('\n')).toContain('task hang sample 0: ran past environment.agent.timeout_ms = 3000 ms (killed)');
      expect(existsSync(pidFile)).toBe(true);
      const pid = Number(readFileSync(pidFile, 'utf8'));
      expect(() => process.kill(pid, 0)).toThrow();
      // silent: an answer without a call is not an episode of the policy.
      expect(silent!.outcome.reward).toBe(0);
      expect(silent!.trajectories.length).toBe(0);
      expect(logs.join('\n')).toContain('task silent sample 0: made no call to its OPENAI_BASE_URL');
    } finally {
      await agents.close();
    }
  }, 60_000);
});

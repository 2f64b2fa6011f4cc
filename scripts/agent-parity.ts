/**
 * `npx tsx scripts/agent-parity.ts <config with environment.agent> [--n 8] [--threads 1]`
 *
 * Is an external agent's training signal the in-process one? With the config's model (model.path)
 * and its first N held-out tasks, greedy: each task once as Arbor's own episode (the rollout
 * engine with the task's tools) and once through the agent program (environment.agent: the run's
 * OpenAI-compatible endpoint on the same decode backend), both turned into training episodes
 * (trajectoryToEpisode). Per task it prints whether the token ids (prompt, model turns,
 * observations), loss masks, rollout logprobs, the reward and the step rewards (summed per token
 * position) agree, and where the two first part. Used for docs/areas/train.md ("External agent
 * program"); the agent and the task's own environment may differ by design (e.g. what the agent
 * does after a malformed call), which this shows.
 */
import { Command } from 'commander';
import '../engine/builtins'; // the built-in estimators, losses, formats and task kinds, before a config is read
import { loadConfig } from '../engine/config/experiment';
import { openEnvironmentKit } from '../engine/tasks/open';
import { PolicyModel } from '../engine/model/runtime';
import { eosTokenIds, policyDecodeBackend } from '../engine/rollout/model-backend';
import { rollout } from '../engine/rollout/engine';
import { AgentRollouts } from '../engine/openai/agent';
import { turnStopIds, type ChatTokenizer } from '../engine/openai/chat';
import { trajectoryToEpisode } from '../engine/train/trajectories';
import type { Episode } from '../engine/train/episode';

const o = new Command('agent-parity')
  .argument('<config>', 'experiment config with environment.agent and model.path')
  .option('--n <n>', 'held-out tasks', (v) => Number(v), 8)
  .option('--threads <n>', 'ONNX Runtime threads', (v) => Number(v), 1)
  .parse();
const [file] = o.args as [string];
const opts = o.opts<{ n: number; threads: number }>();

const loaded = await loadConfig(file);
const { cfg } = loaded;
if (!cfg.environment.agent) throw new Error(`${file}: environment.agent is not set (nothing to compare)`);
if (!cfg.model.path) throw new Error(`${file}: model.path is not set (compare a trained checkpoint)`);
const { env, kit } = await openEnvironmentKit(loaded);
const model = PolicyModel.load(cfg.model.path, { threads: opts.threads, tokenizerFolder: kit.tokenizerFolder });
const backend = policyDecodeBackend(model, { maxBatch: 8, maxLength: cfg.rollout.max_total_length, shards: 1 });
const tasks = kit.evalTasks.slice(0, opts.n);
const limits = { maxNewTokens: cfg.rollout.max_new_tokens, maxTurns: cfg.rollout.max_turns, maxTotalLength: cfg.rollout.max_total_length };
const own = (await rollout(backend, { tasks, n: 1, seed: 1, sampling: { temperature: 0 }, limits, stop: kit.stop, tokenizer: kit.tokenizer })).trajectories;
const tok = ((kit.tokenizer as { hf?: unknown }).hf ?? kit.tokenizer) as ChatTokenizer & { eosTokenId?: number };
const agents = new AgentRollouts({
  cfg,
  spec: cfg.environment.agent,
  backend,
  tokenizer: tok,
  stopTokenIds: [...new Set([...kit.stop.tokenIds, ...turnStopIds({ tokenId: (t) => tok.tokenId(t), eosTokenId: tok.eosTokenId }, eosTokenIds(model.config))])],
  endStrings: kit.stop.strings,
  log: (l) => console.error(l),
});
const viaAgent = (await agents.run(tasks, 1, 1, { temperature: 0, topP: 1 })).map((g) => g[0]!.trajectories);
await agents.close();

/** Step rewards summed per token position (the loss sees their sum at each position). */
const stepsAt = (e: Episode) => {
  const m = new Map<number, number>();
  for (const s of e.stepRewards) m.set(s.at, (m.get(s.at) ?? 0) + s.value);
  return JSON.stringify([...m].filter(([, v]) => v !== 0).sort((a, b) => a[0] - b[0]));
};
const show = (ids: number[]) => (ids.length ? kit.tokenizer.decode(ids) : '(ended)');
let identical = 0;
for (const [i, task] of tasks.entries()) {
  const t = own.find((x) => x.taskId === task.id)!;
  const ag = viaAgent[i]!;
  if (ag.length !== 1) {
    console.log(JSON.stringify({ task: task.id, agentTrajectories: ag.length }));
    continue;
  }
  const a = trajectoryToEpisode(t);
  const b = trajectoryToEpisode(ag[0]!);
  const A = Array.from(a.tokens);
  const B = Array.from(b.tokens);
  let d = 0;
  while (d < Math.min(A.length, B.length) && A[d] === B[d]) d++;
  const same = d === A.length && A.length === B.length;
  let masks = true;
  let lp = 0;
  for (let k = 0; k < Math.min(d, A.length); k++) {
    if (a.lossMask[k] !== b.lossMask[k]) masks = false;
    if (a.lossMask[k]) lp = Math.max(lp, Math.abs(a.rolloutLogprobs[k]! - b.rolloutLogprobs[k]!));
  }
  const steps = stepsAt(a) === stepsAt(b);
  if (same && masks && steps && a.reward === b.reward) identical++;
  console.log(
    JSON.stringify({
      task: task.id,
      tokens: [A.length, B.length],
      sameTokens: same,
      firstDifference: same ? null : d,
      sameLossMask: masks,
      maxLogprobDiff: lp,
      reward: [a.reward, b.reward],
      sameStepRewards: steps,
      ...(same ? {} : { ownFromThere: show(A.slice(d, d + 40)), agentFromThere: show(B.slice(d, d + 40)) }),
    }),
  );
}
console.log(`${identical} of ${tasks.length} held-out tasks: the same tokens, loss masks, reward and step rewards in-process and through the agent`);
await backend.close?.();
await model.dispose();
await env.close();

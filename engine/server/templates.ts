/**
 * Run templates and area handlers plugged into the engine server: the agentic RL training
 * job (engine/train) writing to the workspace store, the user-code sandbox for the editor's
 * "try it", and the environment API types for Monaco.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { episodeToRecord } from '../train/store-sink';
import type { RunTemplate } from './runs';
import type { EngineServer } from './server';

export { episodeToRecord } from '../train/store-sink';

async function trainingTemplate(t: { id: string; name: string; description: string; example: Record<string, unknown> }): Promise<RunTemplate> {
  const { experimentJsonSchema, validateConfig } = await import('../train/config');
  return {
    ...t,
    schema: experimentJsonSchema(),
    validate(config) {
      validateConfig(config, { checkFiles: true });
    },
    async run(ctx) {
      const { runExperiment } = await import('../train/experiment');
      const { openTaskSession, decoderFor } = await import('../train/wiring');
      const cfg = validateConfig(ctx.config, { checkFiles: true });
      const decode = decoderFor(cfg);
      const session = await openTaskSession(cfg);
      ctx.log(`training ${cfg.task.kind} for ${cfg.steps} steps (${cfg.algorithm.adv_estimator}, backend ${cfg.backend})`);
      try {
        await runExperiment(cfg, {
          runDir: ctx.runDir,
          session,
          resume: ctx.resume,
          signal: ctx.signal,
          sink: {
            metrics: (step, values) => ctx.metric(step, values),
            truncateAfter: (step) => ctx.truncateAfter(step),
            trajectories: (step, episodes, advantages) =>
              ctx.trajectories(step, episodes.map((e) => episodeToRecord(step, e, advantages.get(e), decode)), { full: step % cfg.logging.full_trajectories_every === 0 }),
            event: (kind, payload) => {
              if (kind === 'checkpoint' && typeof payload.step === 'number' && typeof payload.dir === 'string') ctx.checkpoint(payload.step, payload.dir);
              else ctx.log(`${kind}: ${JSON.stringify(payload)}`);
            },
          },
          onPhase: (phase, total) => ctx.log(`phase ${phase} (${total})`),
        });
      } finally {
        await session.close();
      }
    },
  };
}

export async function builtinTemplates(home?: string): Promise<RunTemplate[]> {
  return [
    await trainingTemplate({
      id: 'multihop',
      name: 'Multi-hop search agent (SFT warm start + GRPO/PPO)',
      description: 'The built-in synthetic multi-hop world with a BM25 search tool; a tiny model trained on this machine.',
      example: { model: { init: 'tiny' }, task: { kind: 'multihop' }, steps: 20 },
    }),
    await trainingTemplate({
      id: 'qa',
      name: 'Your QA dataset (search agent)',
      description:
        'Questions from a JSONL file in the workspace (question, answers, HotpotQA-style context paragraphs, which become the search corpus); ' +
        'the same search tool, format and rewards; every fifth question held out.',
      example: { model: { init: 'tiny' }, task: { kind: 'qa', dataset: home ? `${home}/workspace/envs/qa.jsonl` : 'workspace/envs/qa.jsonl' }, steps: 20, sft: { warm_start: true } },
    }),
  ];
}

export async function registerAreaHandlers(engine: EngineServer): Promise<void> {
  // The editor's type definitions for 'arbor/env' (kept in step with engine/env by a typecheck).
  const typesFile = fileURLToPath(new URL('../../resources/types/arbor-env.d.ts', import.meta.url));
  engine.on('env.types', () => [{ path: 'node_modules/@types/arbor-env/index.d.ts', content: readFileSync(typesFile, 'utf8') }]);

  // "Try it": user tools and rewards in the sandbox (engine/env/sandbox.ts).
  const sb = await import('../env/sandbox');
  engine.on('sandbox.tryTool', (p: { source: string; path?: string; tool?: string; args: unknown }) => sb.tryTool(p));
  engine.on('sandbox.tryReward', (p: { source: string; path?: string; trajectoryId: string }) => {
    const t = engine.store!.getTrajectory(p.trajectoryId);
    const o = t.outcomeData as { answer?: string; golds?: string[]; formatOk?: boolean; toolCalls?: number; toolErrors?: number; gts?: unknown };
    const golds = o.golds ?? (typeof o.gts === 'string' ? [o.gts] : Array.isArray(o.gts) ? (o.gts as string[]) : []);
    const summary = {
      answer: o.answer, golds, turns: t.turnsData.filter((u) => u.role === 'model').map((u) => u.text),
      formatOk: o.formatOk ?? true, toolCalls: o.toolCalls ?? 0, toolErrors: o.toolErrors ?? 0,
      retrieved: t.turnsData.filter((u) => u.role === 'tool').map((u) => u.text), supporting: [],
    };
    return sb.tryReward({ source: p.source, path: p.path, summary });
  });
}

/**
 * Built-in rollout sources (see ../sources.ts): the multi-hop search task on a model folder or
 * with the scripted expert, in 'tools' mode (base tool calling) or 'naive-rag' mode.
 */
import { HfTokenizer, buildWordTokenizer } from '../../model/tokenizer';
import { PolicyModel } from '../../model/runtime';
import { multihopVocabulary } from './world';
import { openMultihop, TASK_PROMPT_TEMPLATE } from './task';
import { expertTurn } from './expert';
import { eosTokenIds, policyDecodeBackend } from '../../rollout/model-backend';
import type { RolloutTask, TextPolicy } from '../../rollout/ports';
import { registerRolloutTask, type RolloutSourceRequest } from '../sources';

export const MULTIHOP_STOP_STRINGS = ['</search>', '</answer>'];

function hopsOption(req: RolloutSourceRequest): (1 | 2 | 3)[] {
  const h = (req.options?.hops as number[] | undefined) ?? [1, 2];
  for (const x of h) if (x !== 1 && x !== 2 && x !== 3) throw new Error(`task option hops: ${x} is not 1, 2 or 3`);
  return h as (1 | 2 | 3)[];
}

/** The scripted expert as a text policy (reads the question from the task meta). */
export function multihopExpert(mistakeRate = 0): TextPolicy {
  return {
    async act(ctx) {
      const question = String(ctx.task.meta?.question ?? '');
      const observations = ctx.history.filter((h) => h.role !== 'model').map((h) => h.text);
      const modelTurns = ctx.history.filter((h) => h.role === 'model').map((h) => h.text);
      return expertTurn(question, observations, modelTurns, ctx.seed, { mistakeRate });
    },
  };
}

registerRolloutTask('multihop', async (req) => {
  let model: PolicyModel | undefined;
  let tokenizer: HfTokenizer;
  if (req.model) {
    model = PolicyModel.load(req.model);
    tokenizer = HfTokenizer.load(req.model);
  } else {
    if (req.policy !== 'expert') throw new Error(`--policy: unknown policy "${req.policy}" for task multihop (available: expert)`);
    const { tokenizer: tj, config } = buildWordTokenizer(multihopVocabulary());
    tokenizer = new HfTokenizer(tj, config);
  }
  const worldSeed = Number(req.options?.worldSeed ?? 1001);
  // Checkpoints trained on the task (engine/train's multi-hop kit) carry TASK_PROMPT_TEMPLATE and
  // were trained on the bare question: give them the same prompt.
  const instruction = tokenizer.chatTemplate === TASK_PROMPT_TEMPLATE ? '' : undefined;
  const mt = openMultihop(
    { worldSeed, questionSeed: req.seed, questions: req.questions, hops: hopsOption(req), mode: req.mode ?? 'tools', instruction },
    tokenizer,
  );
  const tasks: RolloutTask[] = mt.questions.map((q) => ({
    id: q.id,
    createEnv: () => mt.createEnv(q),
    meta: { hops: q.hops, relation: q.relation, question: q.question, answers: q.answers, worldSeed },
  }));
  const maxLen = model ? Math.min(1024, model.config.maxPositionEmbeddings) : 1024;
  const eos = model ? eosTokenIds(model.config) : tokenizer.eosTokenId !== undefined ? [tokenizer.eosTokenId] : [];
  return {
    tasks,
    tokenizer,
    stop: { strings: MULTIHOP_STOP_STRINGS, tokenIds: eos },
    limits: { maxNewTokens: 32, maxTurns: req.mode === 'naive-rag' ? 1 : 4, maxTotalLength: maxLen },
    backend: model ? policyDecodeBackend(model, { maxBatch: req.maxBatch ?? 16, maxLength: maxLen }) : undefined,
    policy: model ? undefined : multihopExpert(Number(req.options?.mistakeRate ?? 0)),
    close: async () => {
      await model?.dispose();
    },
  };
});

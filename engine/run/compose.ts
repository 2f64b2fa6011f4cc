/**
 * Builds a TaskSession (everything a run needs) from a config and a TaskKit (what a task
 * contributes: tokenizer, train / held-out tasks, stop strings, the scripted expert, the tiny
 * model, the naive-RAG baseline). The model side is always the same: PolicyModel (ORT or tfjs),
 * the KV-cache decode backend for rollouts, the score graph for old/reference logprobs, the
 * train graph for updates.
 */
import { resolveProviders } from '../tensor/ort';
import { resolveLora } from '../model/lora';
import { baseQuantSpec } from '../model/quantize';
import { CriticModel } from '../model/critic';
import { getEstimator } from '../rl';
import { PolicyModel } from '../model/runtime';
import { rollout, rolloutTextPolicy, type RolloutLimits } from '../rollout/engine';
import { policyDecodeBackend } from '../rollout/model-backend';
import type { RolloutTask } from '../rollout/ports';
import { advantagePort } from '../train/advantage';
import type { ExperimentConfig, LoadedConfig } from '../config/experiment';
import { stepSeed } from '../train/episode';
import type { AdvantagePort } from '../train/loop';
import { AdamW } from '../rl/optimizer';
import { ModelPolicyPort } from '../train/model-port';
import { pickTasks, engineRolloutPort } from '../train/rollout-port';
import { withJudge } from '../train/judge-rollout';
import { openTeacher } from '../train/distill';
import type { TaskSession } from './run-dir';
import { evalMetrics, summarizeEval, type EvalSummary, type TaskKit } from '../tasks/kit';
import { readTokenDemos, type Demo } from '../train/sft';
import { cutDemosWarning, demoNeeds, demoWasCut, MEASURE_LIMITS, sizeLimits } from './limits';
import { trajectoryToDemo } from '../train/trajectories';
import type { AgentSession } from '../openai/agent-session';

/**
 * Out-of-vocabulary check of the task's prompts (ToolEnv counts <unk> ids): a warning naming the
 * tasks, so words the tokenizer cannot represent are reported instead of trained on as <unk>.
 * (Observations are counted per episode: the oov_tokens_per_episode metric.)
 */
export async function vocabularyWarnings(kit: TaskKit, sample = 200): Promise<string[]> {
  const tasks = [...kit.trainTasks.slice(0, sample), ...kit.evalTasks.slice(0, sample)];
  const bad: { id: string; n: number; text: string }[] = [];
  let total = 0;
  for (const t of tasks) {
    const env = t.createEnv() as ReturnType<RolloutTask['createEnv']> & { oov?: { prompt: number } };
    const p = await env.prompt();
    const n = env.oov?.prompt ?? 0;
    if (n > 0) {
      bad.push({ id: t.id, n, text: p.text ?? '' });
      total += n;
    }
  }
  if (!bad.length) return [];
  const ex = bad[0]!;
  return [
    `${bad.length} of ${tasks.length} task prompts checked hold text outside the tokenizer's vocabulary (${total} <unk> tokens), e.g. task ${ex.id}: "${ex.text.slice(0, 160)}"; use a tokenizer that covers it (model.path) or rephrase the tasks`,
  ];
}

export interface TaskSessionExtras {
  /** Advantage estimator for names the loop does not implement itself (engine/rl's registry). */
  advantage?: (cfg: ExperimentConfig, model: ModelPolicyPort) => AdvantagePort;
}

/**
 * eval.validation: that many training questions, drawn once (the same for every seed), taken out
 * of the kit's training and RL questions (so never a demonstration or an RL prompt).
 */
export function splitValidation(cfg: ExperimentConfig, kit: TaskKit): { kit: TaskKit; validation: RolloutTask[] } {
  const n = cfg.eval.validation;
  if (n === 0) return { kit, validation: [] };
  if (n >= kit.trainTasks.length)
    throw new Error(`eval.validation: ${n} is not fewer than the task's ${kit.trainTasks.length} training questions (some must be left to train on)`);
  const validation = pickTasks(kit.trainTasks, n, stepSeed(0, 0, 7000));
  const held = new Set(validation);
  const rest = (ts: RolloutTask[]) => ts.filter((t) => !held.has(t));
  return { kit: { ...kit, trainTasks: rest(kit.trainTasks), ...(kit.rlTasks ? { rlTasks: rest(kit.rlTasks) } : {}) }, validation };
}

/** A session for a config (`defaults`: the rollout limits it left out, sized from the task) over its task's kit. */
export async function buildTaskSession(
  { cfg, defaults }: Pick<LoadedConfig, 'cfg' | 'defaults'>,
  taskKit: TaskKit,
  extras: TaskSessionExtras = {},
): Promise<TaskSession> {
  const { kit, validation } = splitValidation(cfg, taskKit);
  // Limits that fit the task (./limits.ts): measured before the model and the KV cache are sized by them.
  const sized = await sizeLimits(cfg, defaults, kit);
  const providers = cfg.backend === 'ort' ? await resolveProviders(cfg.device) : undefined;
  const model = openPolicyModel(cfg, kit, providers);
  const policy = new ModelPolicyPort(model, cfg, new AdamW({ ...cfg.optim }));
  const limits = { maxNewTokens: cfg.rollout.max_new_tokens, maxTurns: cfg.rollout.max_turns, maxTotalLength: cfg.rollout.max_total_length };
  const backendOpts = { maxBatch: Math.min(64, cfg.rollout.prompts_per_step * cfg.rollout.n), maxLength: cfg.rollout.max_total_length };
  const backend = policyDecodeBackend(model, backendOpts);
  // rollout.quantize: the training rollouts sample with the quantized copy of the weights; evaluation keeps float32.
  const rolloutBackend = cfg.rollout.quantize !== 'none' ? policyDecodeBackend(model, { ...backendOpts, quantized: true }) : backend;
  // engine/rl's registry; GAE gets a critic: the policy's transformer with a value head, from the same weights.
  const critic = getEstimator(cfg.algorithm.adv_estimator).needsCritic ? attachCritic(cfg, policy, model, providers) : undefined;
  const advantage = extras.advantage ? extras.advantage(cfg, policy) : advantagePort(cfg, critic ? { values: (eps) => policy.values(eps) } : undefined);
  // The KL reference: the starting weights, replaced by the SFT model after a warm start (setReference).
  // Under LoRA it holds only a copy of the adapters (B = 0 at the start: exactly the base model);
  // the frozen base weights are the policy's own, never copied.
  let referenceWeights = cfg.algorithm.kl_coef > 0 ? model.cloneWeights() : undefined;
  const reference = referenceWeights ? { score: (eps: Parameters<ModelPolicyPort['score']>[0]) => policy.frozen(referenceWeights!).score(eps) } : undefined;

  // algorithm.distill: the teacher on the same device, its own score session (its tokenizer checked against the student's).
  let teacher: ReturnType<typeof openTeacher> | undefined;
  try {
    if (cfg.algorithm.distill)
      teacher = openTeacher(cfg, model.opts.tokenizerFolder ?? cfg.model.path, { backend: cfg.backend, threads: cfg.threads, providers });
  } catch (e) {
    await critic?.dispose();
    await model.dispose();
    throw e;
  }

  // environment.agent: episodes run by the user's agent program through the run's OpenAI-compatible endpoint (engine/openai/).
  let agent: AgentSession | undefined;
  if (cfg.environment.agent) agent = (await import('../openai/agent-session')).openAgentSession(cfg, kit, backend, model.config);
  const evaluate = (n: number, onProgress?: (done: number, total: number) => void): Promise<EvalSummary> => evaluateOn(kit.evalTasks.slice(0, n), onProgress);
  const evaluateOn = async (tasks: RolloutTask[], onProgress?: (done: number, total: number) => void): Promise<EvalSummary> => {
    if (agent) return agent.evaluate(tasks, onProgress);
    const { trajectories } = await rollout(backend, {
      tasks,
      n: 1,
      seed: stepSeed(cfg.seed, 0, 3000),
      sampling: { temperature: cfg.eval.temperature },
      limits,
      stop: kit.stop,
      tokenizer: kit.tokenizer,
      ...(onProgress ? { onProgress: (p: { done: number }) => onProgress(p.done, tasks.length) } : {}),
    });
    return summarizeEval(trajectories);
  };

  const sampleEval: NonNullable<TaskSession['sampleEval']> = async (o) => {
    const pool = o.all ? [...new Map([...taskKit.evalTasks, ...taskKit.trainTasks].map((t) => [t.id, t])).values()] : kit.evalTasks;
    const tasks = o.n !== undefined ? pool.slice(0, o.n) : pool;
    const { trajectories } = await rollout(backend, {
      tasks,
      n: o.k,
      seed: stepSeed(cfg.seed, 0, 5000),
      sampling: { temperature: o.temperature },
      limits,
      stop: kit.stop,
      tokenizer: kit.tokenizer,
      ...(o.onProgress ? { onProgress: (p: { done: number; total: number }) => o.onProgress!(p.done, p.total) } : {}),
    });
    return trajectories;
  };

  return {
    warnings: [...sized, ...(await vocabularyWarnings(kit))],
    tokenizer: kit.tokenizer,
    ports: {
      // environment.judge: the judge scores each sampled group before the loop sees it (engine/train/judge-rollout.ts).
      rollout: withJudge(
        cfg,
        agent?.rollout ?? engineRolloutPort(cfg, { backend: rolloutBackend, tokenizer: kit.tokenizer, tasks: kit.rlTasks ?? kit.trainTasks, stop: kit.stop }),
        (ids) => kit.tokenizer.decode(ids),
      ),
      policy,
      reference,
      ...(teacher ? { teacher } : {}),
      advantage,
      eval: { evaluate: async ({ n }) => evalMetrics(await evaluate(n)) },
    },
    sft: policy,
    demos: async () => (cfg.sft.demos_path ? readTokenDemos(cfg.sft.demos_path, { vocabSize: model.config.vocabSize }) : expertDemos(cfg, kit, limits)),
    evaluate,
    ...(validation.length ? { validate: async () => evalMetrics(await evaluateOn(validation)) } : {}),
    sampleEval,
    evaluateNaiveRag: kit.naiveRag ? (n) => kit.naiveRag!(kit.evalTasks.slice(0, n)) : undefined,
    loadPolicy: (dir) => policy.load(dir),
    async setReference(dir) {
      if (!referenceWeights) return;
      const next = model.cloneWeights(); // the reference's own buffers, shaped like the policy's trainable ones
      if (dir) for (const [k, v] of model.readTrainable(dir)) next.get(k)?.set(v);
      referenceWeights = next;
    },
    ...(agent ? { takeLogs: () => agent.takeLogs() } : {}),
    close: async () => {
      await agent?.close();
      await critic?.dispose();
      await teacher?.close();
      await model.dispose();
    },
  };
}

type Providers = Awaited<ReturnType<typeof resolveProviders>> | undefined;

/** The policy: the model at model.path, or the task's tiny model initialised from the run's seed (LoRA, recompute and quantization as the config says). */
function openPolicyModel(cfg: ExperimentConfig, kit: TaskKit, providers: Providers): PolicyModel {
  const lora = cfg.model.lora ? resolveLora(cfg.model.lora) : undefined;
  const modelOpts = {
    backend: cfg.backend,
    threads: cfg.threads,
    providers,
    tokenizerFolder: kit.tokenizerFolder,
    lora,
    loraSeed: cfg.seed,
    recomputeLayers: cfg.model.recompute_layers ?? false,
    quantize: cfg.rollout.quantize,
    // model.quantize_base: the frozen LoRA base block-quantized in every phase (engine/model/quantize.ts).
    // The config decides (null: the float32 base even for an adapter folder trained on a quantized one).
    quantizeBase: baseQuantSpec(cfg.model.quantize_base, cfg.model.quantize_block) ?? null,
  };
  return cfg.model.path ? PolicyModel.load(cfg.model.path, modelOpts) : PolicyModel.init(kit.tinyModel(cfg), cfg.seed, modelOpts);
}

/** A critic for an estimator that needs one (GAE): the policy's transformer without LoRA adapters and a value head, trained in full by its own AdamW. */
function attachCritic(cfg: ExperimentConfig, policy: ModelPolicyPort, model: PolicyModel, providers: Providers): CriticModel {
  if (cfg.backend !== 'ort')
    throw new Error(
      `algorithm.adv_estimator: "${cfg.algorithm.adv_estimator}" needs a critic, which runs on backend "ort" only (got backend "${cfg.backend}")`,
    );
  const critic = CriticModel.fromPolicy(model.config, model.baseWeights(), { threads: cfg.threads, providers });
  policy.attachCritic(critic, new AdamW({ ...cfg.optim }));
  return critic;
}

/**
 * The SFT demonstrations the task's scripted expert writes (sft.demos of the training questions). Demonstrations a limit cut are
 * flagged (SFT on them teaches half calls), naming the limits and what the cut ones need.
 */
async function expertDemos(cfg: ExperimentConfig, kit: TaskKit, limits: RolloutLimits): Promise<Demo[]> {
  if (!kit.expert) throw new Error(`task "${cfg.task.kind}" has no scripted expert${kit.noExpert ? `: ${kit.noExpert}` : ''}; give sft.demos_path`);
  const tasks = pickTasks(kit.trainTasks, cfg.sft.demos, stepSeed(cfg.seed, 0, 4000));
  const { trajectories } = await rolloutTextPolicy(kit.expert, {
    tasks,
    n: 1,
    seed: cfg.seed,
    limits,
    tokenizer: kit.tokenizer,
    imitateMistakes: cfg.sft.imitate_mistakes,
  });
  const cut = trajectories.filter(demoWasCut);
  if (cut.length) {
    const whole = await rolloutTextPolicy(kit.expert, {
      tasks: cut.map((t) => tasks.find((x) => x.id === t.taskId)!),
      n: 1,
      seed: cfg.seed,
      limits: MEASURE_LIMITS,
      tokenizer: kit.tokenizer,
    });
    // Flagged, not refused: limits the config sets are the researcher's (sized ones fit).
    process.stderr.write(`warning: ${cutDemosWarning(trajectories, cfg.rollout, demoNeeds(whole.trajectories, []))}\n`);
  }
  return trajectories.map(trajectoryToDemo);
}

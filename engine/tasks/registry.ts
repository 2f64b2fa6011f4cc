/**
 * The task registry: task.kind → the task kit (./kit.ts TaskKit). One registry
 * serves training (`arbor train`, the run templates), `arbor eval`, `arbor rollout` and
 * `arbor init-model`, so every command accepts every kind.
 *
 *  multihop  the built-in synthetic multi-hop world with BM25 search (./multihop/)
 *  qa        a QA dataset (HotpotQA style) whose contexts are the search corpus (./qa/)
 *  custom    a task file of {id, prompt | messages, answers?, meta?} and your own tools (./custom/)
 *  tools     the built-in two-tool task (lookup + calculator in Hermes JSON) over resources/examples/tools-task (./tools/)
 */
import { registerTaskKind, TASK_KINDS, type ExperimentConfig, type TaskKindSpec } from '../config/experiment';
import { customKit } from './custom/kit';
import { multihopKit, multihopTokenizer } from './multihop/kit';
import type { TokenizerPort } from '../rollout/ports';
import { qaKit } from './qa/kit';
import { toolsKit, toolsTokenizer } from './tools/kit';
import type { KitExtras, KitFactory, TaskKit } from './kit';

const kits = new Map<string, KitFactory>([
  ['multihop', multihopKit],
  ['qa', qaKit],
  ['custom', customKit],
  ['tools', toolsKit],
]);

/**
 * Add a task kind: its kit, and what the config knows of it (engine/config/experiment.ts
 * TaskKindSpec: its own `task.<kind>` options, whether it reads environment.tasks, its checks).
 * One call, in one file (a config's `plugins:`; README "Write your own task kind").
 */
export function registerTaskKit(kind: string, factory: KitFactory, spec: TaskKindSpec): void {
  if (kits.has(kind)) throw new Error(`registerTaskKit: a task kind "${kind}" is already registered`);
  registerTaskKind(kind, spec);
  kits.set(kind, factory);
}

// The built-in kinds are declared to the config there (it cannot import this layer); they must be these.
if (TASK_KINDS.join() !== [...kits.keys()].join()) throw new Error(`task kits ${[...kits.keys()].join(', ')} ≠ config TASK_KINDS ${TASK_KINDS.join(', ')}`);

export function taskKinds(): string[] {
  return [...kits.keys()];
}

/** The tokenizer of the last kit opened for a config (a run's stored trajectories decode with it). */
const kitTokenizers = new WeakMap<ExperimentConfig, TokenizerPort>();

export function openTaskKit(cfg: ExperimentConfig, extras: KitExtras = {}): TaskKit {
  const f = kits.get(cfg.task.kind);
  if (!f) throw new Error(`task.kind: unknown task "${cfg.task.kind}" (available: ${taskKinds().join(', ')})`);
  const kit = f(cfg, extras);
  kitTokenizers.set(cfg, kit.tokenizer);
  return kit;
}

/** The tokenizer a config's task uses: the kit already opened for this config, else a fresh kit's (the multi-hop one directly). */
export function taskTokenizerFor(cfg: ExperimentConfig): TokenizerPort {
  const known = kitTokenizers.get(cfg);
  if (known) return known;
  if (cfg.task.kind === 'multihop') return multihopTokenizer();
  if (cfg.task.kind === 'tools') return toolsTokenizer();
  return openTaskKit(cfg).tokenizer;
}

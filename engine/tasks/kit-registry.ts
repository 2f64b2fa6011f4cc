/**
 * The task-kind registry: task.kind → the task kit (./kit.ts TaskKit) and what else a kind says of
 * itself. One registry serves training (`arbor train`, the run templates), `arbor eval`,
 * `arbor rollout`, `arbor init-model`, the playground, `arbor mcp serve` and `arbor export verl`,
 * so every command accepts every kind. A kind registers itself from its own kit module
 * (./multihop/kit.ts, …; ./builtins.ts lists the built-in ones) or from a config's `plugins:` file
 * (README "Write your own task kind"), exactly alike.
 */
import { registerTaskKind, type ExperimentConfig, type TaskKindSpec } from '../config/experiment';
import type { Tool } from '../env/tool';
import type { TokenizerPort } from '../rollout/ports';
import type { KitFactory, TaskKit, KitExtras } from './kit';

/** A task's own built-in tools outside a training run, and where they come from. */
export interface BuiltinTools {
  tools: Tool[];
  /** e.g. "BM25 search over qa.jsonl" (what `arbor mcp serve` prints). */
  describe: string;
  /** The corpus a chat's search reads, as the playground reports it (a world seed or a dataset file). */
  corpus?: { world: number } | { dataset: string };
}

/** What registerTaskKit takes beside the kit: the config's side of the kind (TaskKindSpec) and the rest. */
export interface TaskKindEntry extends TaskKindSpec {
  /**
   * The task's built-in tools outside a run: `served` for `arbor mcp serve` and verl (each call
   * names its episode's task), `chat` for the playground (a conversation, no task). Absent or
   * undefined: none (the config's own tools, MCP servers and files still join).
   */
  tools?: (cfg: ExperimentConfig, where: 'served' | 'chat') => BuiltinTools | undefined;
  /** The tokenizer when it does not depend on the config (read without opening the kit: a stored run's trajectories decode with it). */
  tokenizer?: () => TokenizerPort;
  /**
   * The vocabulary size of this kind's tiny model (`model.init: tiny`), at least, when its tokenizer
   * is built from the environment (the tools' schemas): the memory plan sizes the model before the
   * environment is open.
   */
  tinyVocabBound?: (cfg: ExperimentConfig) => number;
}

const kits = new Map<string, { factory: KitFactory; entry: TaskKindEntry }>();

/**
 * Add a task kind: its kit, and everything else about it (TaskKindEntry: its own `task.<kind>`
 * options, the shared keys it reads, whether it reads environment.tasks, its checks, its built-in
 * tools). One call, in one file; the config learns the kind through registerTaskKind.
 */
export function registerTaskKit(kind: string, factory: KitFactory, entry: TaskKindEntry): void {
  if (kits.has(kind)) throw new Error(`registerTaskKit: a task kind "${kind}" is already registered`);
  registerTaskKind(kind, entry);
  kits.set(kind, { factory, entry });
}

export function taskKinds(): string[] {
  return [...kits.keys()];
}

function kindOf(kind: string) {
  const k = kits.get(kind);
  if (!k)
    throw new Error(
      kits.size
        ? `task.kind: unknown task "${kind}" (available: ${taskKinds().join(', ')})`
        : `task.kind: unknown task "${kind}"; no task kind is registered in this process (the built-in ones register when engine/builtins.ts is imported)`,
    );
  return k;
}

/** A task's built-in tools outside a run (its entry's `tools`), or undefined when it has none. */
export function builtinTaskTools(cfg: ExperimentConfig, where: 'served' | 'chat'): BuiltinTools | undefined {
  return kindOf(cfg.task.kind).entry.tools?.(cfg, where);
}

export function openTaskKit(cfg: ExperimentConfig, extras: KitExtras = {}): TaskKit {
  return kindOf(cfg.task.kind).factory(cfg, extras);
}

/** The kind's tinyVocabBound (TaskKindEntry), when its tiny model's tokenizer is built from the environment. */
export function tinyVocabBound(cfg: ExperimentConfig): number | undefined {
  return kindOf(cfg.task.kind).entry.tinyVocabBound?.(cfg);
}

/**
 * The tokenizer a config's task uses when no kit is open (a stored run's replay): the kind's fixed
 * one, else a fresh kit's. A run's own session carries its kit's (TaskSession.tokenizer).
 */
export function taskTokenizer(cfg: ExperimentConfig): TokenizerPort {
  return kindOf(cfg.task.kind).entry.tokenizer?.() ?? openTaskKit(cfg).tokenizer;
}

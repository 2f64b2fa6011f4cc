/** A task as a task file or a built-in task gives it: what an episode of ToolEnv (./toolenv.ts) runs and a reward (./rewards.ts) sees. */
export interface EnvTask {
  id: string;
  /** The user message: a question, an instruction, … (or give `messages`). */
  prompt?: string;
  /** QA form: the question (the prompt when `prompt` is not given). */
  question?: string;
  /** A whole conversation instead of `prompt` (system / user / assistant messages). */
  messages?: { role: string; content: string }[];
  /** Gold answers, for answer rewards (exact match, F1); none for open tasks. */
  answers?: string[];
  /** Texts whose retrieval counts as finding a supporting fact (process reward). */
  supportingFacts?: string[];
  meta?: Record<string, unknown>;
}

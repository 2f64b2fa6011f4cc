/**
 * The branching machine of a rollout (ARPO / AEPO, the rules in ./branching.ts): the SamplePlan of
 * the rollout's episodes (./episodes.ts) that admits each prompt's group whole, measures the
 * entropy window of every sample's first turn and of the turn after each tool response, takes
 * the group's branch decisions together, starts branches from a forked cache, and fills the
 * budget with fresh samples when nothing is left to branch from.
 *
 * A group reserves M = rollout.n slots when it is admitted (so its branches never wait for a
 * slot) and gives them back when its M-th trajectory is in.
 */
import { Rng, mixSeed } from '../base/rng';
import { aepoGlobalSamples, decideBranches, windowEntropy, type BranchingOptions } from './branching';
import type { RolloutTask } from './ports';
import type { EpisodeHost, SamplePlan } from './episodes';
import { beginTurn, cloneTurn, newSeq, type Seq } from './sequence';
import type { BranchPoint } from './types';

/** Where a branch would start: after a tool response, `turns` turns and `tokens` tokens in, at tool step `depth`. */
interface BranchSite {
  turns: number;
  tokens: number;
  depth: number;
}

/** A sample's branching state. */
interface SampleState {
  seq: Seq;
  g: GroupState;
  decisionRng: Rng;
  /** Normalised window entropy of the first model turn (undefined until measured). */
  h0?: number;
  /** After a tool response: measure the next turn's window; the branch point it would create. */
  measure: BranchSite | null;
  /** Measured, waiting for the group's decisions at this tool step. */
  pending: (BranchSite & { entropy: number }) | null;
  resume: (() => void) | null;
  /** Tool responses in the sequence (inherited by branches). */
  depth: number;
  /** AEPO: consecutive earlier high-entropy tool steps of the lineage. */
  consecutive: number;
  /** AEPO: the pre-monitoring sample (never branches). */
  monitor: boolean;
  point?: BranchPoint;
  /** Prefix tokens taken from the parent's forked cache. */
  forked?: number;
}

interface GroupState {
  task: RolloutTask;
  group: number;
  /** Sequences created so far (next sample index). */
  started: number;
  finished: number;
  live: Set<SampleState>;
  /** Slots reserved for the group (M of them, so its branches never wait for a slot). */
  slots: number[];
  /** Branches the budget still allows. */
  branchLeft: number;
  phase: 'monitor' | 'run' | 'fill';
  parked: SampleState[];
  /** AEPO: the monitor sample's first-turn window entropy. */
  hRoot?: number;
}

export interface BranchingGroupsOptions {
  branching: BranchingOptions;
  /** M: trajectories per prompt (rollout.n). */
  budget: number;
  /** The rollout's seed (each sample's streams derive from it). */
  seed: number;
  /** |V|, which window entropies are normalised by. */
  vocabSize: number;
  /** Copy a slot's first `length` cached tokens into an empty slot; null: a branch prefills its prefix. */
  fork: ((from: number, to: number, length: number) => void) | null;
}

export class BranchingGroups implements SamplePlan {
  /** Branches created. */
  branches = 0;
  /** Prefix tokens branches took from a forked cache instead of prefilling them. */
  prefixTokensSaved = 0;
  private readonly queue: GroupState[];
  /** Groups whose bookkeeping is due (a sample parked or finished). */
  private readonly dirty = new Set<GroupState>();
  private readonly samples = new Map<Seq, SampleState>();
  private readonly br: BranchingOptions;

  constructor(
    private readonly o: BranchingGroupsOptions,
    groups: { task: RolloutTask; group: number }[],
    private readonly host: EpisodeHost,
  ) {
    this.br = o.branching;
    this.queue = groups.map(({ task, group }) => ({
      task,
      group,
      started: 0,
      finished: 0,
      live: new Set(),
      slots: [],
      branchLeft: 0,
      phase: 'run',
      parked: [],
    }));
  }

  /** Between ticks: bookkeeping of the groups that changed, then whole groups into free slots (M each). */
  admit(free: number[], starting: Promise<void>[]): void {
    const M = this.o.budget;
    const gs = [...this.dirty];
    this.dirty.clear();
    for (const g of gs) this.maintain(g, free, starting);
    while (this.queue.length && free.length >= M) {
      const g = this.queue.shift()!;
      g.slots = free.splice(free.length - M, M);
      const aepo = this.br.mode === 'aepo';
      g.phase = aepo ? 'monitor' : 'run';
      // AEPO starts its pre-monitoring sample alone; ARPO its N initial samples.
      const first = aepo ? 1 : this.br.initialSamples;
      if (!aepo) g.branchLeft = M - first;
      for (let i = 0; i < first; i++) starting.push(this.startRoot(g, aepo));
    }
  }

  /** A finished sample's slot goes back to its group. */
  release(s: Seq): void {
    const b = this.samples.get(s)!;
    const g = b.g;
    g.slots.push(s.slot);
    g.live.delete(b);
    g.finished++;
    this.dirty.add(g);
  }

  hasQueued(): boolean {
    return this.queue.length > 0;
  }

  hasBookkeeping(): boolean {
    return this.dirty.size > 0;
  }

  /** A sample about to measure an entropy window decodes no further than the window's end in one call. */
  stepLimit(s: Seq): number {
    const b = this.samples.get(s)!;
    const n = s.cur!.tokenIds.length;
    const W = this.br.entropyWindow;
    return (b.measure || b.h0 === undefined) && n < W ? W - n : Infinity;
  }

  /** A tool response: the next turn's first k tokens are measured; a branch would start here. */
  observed(s: Seq, tokens: number): void {
    if (!tokens) return;
    const b = this.samples.get(s)!;
    b.depth++;
    b.measure = { turns: s.turns.length, tokens: s.length, depth: b.depth };
  }

  lineage(s: Seq): { forked?: number; point?: BranchPoint } {
    const b = this.samples.get(s)!;
    return { forked: b.forked, point: b.point };
  }

  /**
   * A sampled token may complete a measurement window (k tokens, or the turn's end). Returns true
   * when the sample parked to wait for its group's decisions (it then resumes with `resume`).
   */
  parkAfterToken(s: Seq, ended: boolean, resume: () => void): boolean {
    const b = this.samples.get(s)!;
    const W = this.br.entropyWindow;
    const turn = s.cur!;
    if (!(ended || turn.tokenIds.length === W)) return false;
    if (b.h0 === undefined && s.modelTurns === 0) {
      b.h0 = windowEntropy(turn.entropy, W, this.o.vocabSize);
      if (b.monitor) b.g.hRoot = b.h0;
      return false;
    }
    const at = b.measure;
    if (!at) return false;
    b.measure = null;
    const entropy = windowEntropy(turn.entropy, W, this.o.vocabSize);
    if (b.monitor) {
      // AEPO: the monitor's first post-tool window completes pre-monitoring; it then takes part
      // in this tool step's decisions like any sample.
      b.monitor = false;
      const starting: Promise<void>[] = [];
      this.split(b.g, b.h0 ?? 0, entropy, starting);
      for (const p of starting) this.host.track(p);
    }
    if (b.g.phase !== 'run' || b.g.branchLeft <= 0) return false;
    b.pending = { ...at, entropy };
    b.resume = resume;
    b.g.parked.push(b);
    this.dirty.add(b.g);
    return true;
  }

  /** Group bookkeeping, run between ticks: AEPO's split, decisions at a tool step, fill, slots back. */
  private maintain(g: GroupState, free: number[], starting: Promise<void>[]): void {
    const M = this.o.budget;
    // AEPO: the pre-monitoring sample ended before any tool response: H_tool = H_root.
    if (g.phase === 'monitor' && g.finished === 1) this.split(g, g.hRoot ?? 0, g.hRoot ?? 0, starting);
    if (g.phase === 'run' && g.parked.length && [...g.live].every((b) => b.pending)) this.decide(g);
    if (g.phase === 'run' && g.live.size === 0 && g.started < M) {
      // Nothing left to branch from: fill the budget with fresh samples.
      g.phase = 'fill';
      g.branchLeft = 0;
      while (g.started < M) starting.push(this.startRoot(g, false));
    }
    if (g.finished === M) free.push(...g.slots.splice(0));
  }

  /** Every live sample of the group measured this tool step: decide in sample order, start the branches, resume the parents. */
  private decide(g: GroupState): void {
    const parents = g.parked.splice(0).sort((a, b) => a.seq.sample - b.seq.sample);
    const dec = decideBranches(
      this.br,
      parents.map((p) => ({ deltaH: p.pending!.entropy - (p.h0 ?? 0), consecutive: p.consecutive, rng: p.decisionRng })),
      g.branchLeft,
    );
    parents.forEach((p, i) => {
      const d = dec[i]!;
      for (let j = 0; j < d.children; j++) this.startBranch(g, p, d.probability, d.consecutive);
      g.branchLeft -= d.children;
      p.consecutive = d.consecutive;
    });
    for (const p of parents) {
      p.pending = null;
      const r = p.resume!;
      p.resume = null;
      r();
    }
  }

  /** AEPO's budget split from pre-monitoring: m global samples (the monitor included), M − m branches. */
  private split(g: GroupState, hRoot: number, hTool: number, starting: Promise<void>[]): void {
    const M = this.o.budget;
    const m = aepoGlobalSamples(M, this.br.budgetBeta, hRoot, hTool);
    g.phase = 'run';
    g.branchLeft = M - m;
    for (let i = 1; i < m; i++) starting.push(this.startRoot(g, false));
  }

  /** A new sample of the group in one of its slots, with its branching state. */
  private newSample(g: GroupState, monitor: boolean): SampleState {
    const s = newSeq(g.task, g.group, g.started++, this.o.seed);
    const b: SampleState = {
      seq: s,
      g,
      decisionRng: new Rng(mixSeed(s.seed, 0x62726e63)),
      measure: null,
      pending: null,
      resume: null,
      depth: 0,
      consecutive: 0,
      monitor,
    };
    this.samples.set(s, b);
    s.slot = g.slots.pop()!;
    g.live.add(b);
    return b;
  }

  /** Start a fresh sample of the group (a root: its own prompt, no shared prefix). */
  private startRoot(g: GroupState, monitor: boolean): Promise<void> {
    return this.host.start(this.newSample(g, monitor).seq);
  }

  /** A branch of `p` from its pending branch point: the parent's prefix, its cache forked up to the prefix's last token. */
  private startBranch(g: GroupState, p: SampleState, probability: number, consecutive: number): void {
    const parent = p.seq;
    const at = p.pending!;
    const b = this.newSample(g, false);
    b.h0 = p.h0;
    b.depth = at.depth;
    b.consecutive = consecutive;
    b.point = { parent: parent.sample, turn: at.turns, tokens: at.tokens, entropy: at.entropy, deltaH: at.entropy - (p.h0 ?? 0), probability };
    const c = b.seq;
    c.promptIds = parent.promptIds;
    c.promptText = parent.promptText;
    c.turns = parent.turns.slice(0, at.turns).map(cloneTurn);
    c.modelTurns = c.turns.filter((u) => u.role === 'model').length;
    c.length = at.tokens;
    const prefix = [...parent.promptIds, ...c.turns.flatMap((u) => u.tokenIds)];
    if (prefix.length !== at.tokens) throw new Error(`branch of task ${g.task.id}: prefix has ${prefix.length} tokens, expected ${at.tokens}`);
    if (this.o.fork) {
      // The branch feeds the prefix's last token itself and samples its first token from its own stream.
      this.o.fork(parent.slot, c.slot, at.tokens - 1);
      c.unfed = [prefix[at.tokens - 1]!];
      b.forked = at.tokens - 1;
      this.prefixTokensSaved += at.tokens - 1;
    } else c.unfed = prefix;
    beginTurn(c);
    this.branches++;
    c.t0 = performance.now();
    this.host.track(this.replay(c));
  }

  /**
   * The branch's environment replays the shared turns (tool calls run again, observations are
   * the parent's recorded tokens), so its state (calls made, episode context) matches; then the
   * branch decodes.
   */
  private async replay(c: Seq): Promise<void> {
    await c.env.prompt();
    for (const u of c.turns)
      if (u.role === 'model') {
        const r = await c.env.step({ text: u.text, tokenIds: u.tokenIds.slice(), stopReason: u.stop?.reason ?? 'policy' });
        if (r.done) throw new Error(`branch of task ${c.task.id}: the environment ended the episode while replaying the parent's turns`);
      }
    c.envMs += performance.now() - c.t0;
    this.host.ready(c);
  }
}

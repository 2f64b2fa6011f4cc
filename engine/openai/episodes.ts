/**
 * An external agent's episode as trajectories. The episode is the calls the agent made through its
 * base URL (./server.ts records them). Each (call, choice) is a model turn; a call whose prompt
 * continues an earlier turn (a conversation sent back: ./memory.ts spliced the sampled ids in, or,
 * for raw completions, a prompt that starts with that turn's ids) hangs under it. Every path from a
 * first call to a turn nothing continued is one multi-turn trajectory: the root call's prompt, then
 * model turns (the sampled ids, logprobs and entropy, loss mask 1) separated by what the agent added
 * in between (tool results, new user messages, the template's markers: loss mask 0). Calls that
 * continue nothing start trajectories of their own; all of an episode's trajectories share its reward.
 */
import type { Trajectory, Turn, ToolCall, OutcomeReward } from '../rollout/types';
import type { Drift } from './memory';
import type { EpisodeSink, RecordedCall, RecordedChoice } from './server';

/** Records an episode's calls (the sink the endpoint writes to for /episodes/<id>/v1). */
export class EpisodeRecorder implements EpisodeSink {
  readonly calls: RecordedCall[] = [];
  record(call: RecordedCall): void {
    this.calls.push(call);
  }
}

interface Node {
  call: RecordedCall;
  choice: number;
  c: RecordedChoice;
  parent?: Node;
  children: number;
  full: number[];
}

/** Tool results the agent sent back, by tool-call id (from every chat request of the episode). */
export function toolResults(calls: RecordedCall[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const call of calls) {
    const msgs = (call.request as { messages?: { role?: string; tool_call_id?: string; content?: unknown }[] }).messages ?? [];
    for (const m of msgs)
      if (m.role === 'tool' && typeof m.tool_call_id === 'string')
        out.set(
          m.tool_call_id,
          typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? m.content.map((p: { text?: string }) => p.text ?? '').join('') : '',
        );
  }
  return out;
}

/** The tool calls of a model turn, with the results the agent sent back for them. */
export function turnToolCalls(c: RecordedChoice, results: Map<string, string>): ToolCall[] {
  const ids = (c.message?.tool_calls ?? []).map((t) => t.id);
  let k = 0;
  return c.calls.map((call) => {
    if (call.parseError) return { name: call.name, args: call.args, result: '', error: call.parseError, latencyMs: 0 };
    const id = ids[k++];
    const result = id !== undefined ? results.get(id) : undefined;
    return {
      name: call.name,
      args: call.args,
      result: result ?? '',
      ...(result === undefined ? { error: 'no tool result came back for this call' } : {}),
      latencyMs: 0,
    };
  });
}

function isPrefix(p: number[], of: number[]): boolean {
  if (p.length > of.length) return false;
  for (let i = 0; i < p.length; i++) if (p[i] !== of[i]) return false;
  return true;
}

export interface EpisodeTrajectoryOptions {
  taskId: string;
  group: number;
  /** Sample index of the first trajectory (the others follow). */
  firstSample: number;
  seed: number;
  outcome: OutcomeReward & { stepRewards?: number[] };
  /** Per model turn of the episode (in call order): its step reward (the reward file's steps summed per turn). */
  turnStepRewards?: Map<RecordedChoice, number>;
  decode(ids: number[]): string;
  meta?: Record<string, unknown>;
  /** Most tokens of one trajectory (longer ones are cut at a model turn's end and marked truncated). */
  maxTotalLength?: number;
}

/** An episode's calls → its trajectories (see the header), in the order their first calls were made. */
export function episodeTrajectories(calls: RecordedCall[], o: EpisodeTrajectoryOptions): Trajectory[] {
  const nodes: Node[] = [];
  const byId = new Map<string, Node[]>();
  const results = toolResults(calls);
  for (const call of calls) {
    let parent: Node | undefined;
    if (call.parent) parent = byId.get(call.parent.call)?.[call.parent.choice];
    if (!parent) {
      // Raw completions (or a chat the memory could not match): the longest earlier turn the prompt starts with.
      for (const n of nodes) if (isPrefix(n.full, call.promptIds) && (!parent || n.full.length > parent.full.length)) parent = n;
    }
    const own = call.choices.map((c, choice): Node => {
      const n: Node = { call, choice, c, parent, children: 0, full: [...call.promptIds, ...c.ids] };
      return n;
    });
    if (parent) parent.children += own.length;
    byId.set(call.id, own);
    nodes.push(...own);
  }
  const out: Trajectory[] = [];
  for (const leaf of nodes) {
    if (leaf.children > 0) continue;
    const path: Node[] = [];
    for (let n: Node | undefined = leaf; n; n = n.parent) path.unshift(n);
    const root = path[0]!;
    const turns: Turn[] = [];
    const drift: Drift[] = [];
    const seen = new Set<string>();
    let length = root.call.promptIds.length;
    let truncated = false;
    let prev: number[] = root.call.promptIds;
    for (const n of path) {
      for (const d of n.call.drift) {
        const k = `${d.kind}:${d.turn}:${d.position}`;
        if (!seen.has(k)) {
          seen.add(k);
          drift.push(d);
        }
      }
      const obs = n === root ? [] : n.call.promptIds.slice(prev.length);
      const ids = n.c.ids;
      if (o.maxTotalLength !== undefined && length + obs.length + ids.length > o.maxTotalLength) {
        truncated = true;
        break;
      }
      if (obs.length) {
        const z = obs.map(() => 0);
        turns.push({ role: 'tool', tokenIds: obs, text: o.decode(obs), logprobs: z, entropy: z.slice(), lossMask: z.slice() });
      }
      const calls = turnToolCalls(n.c, results);
      const step = o.turnStepRewards?.get(n.c);
      turns.push({
        role: 'model',
        tokenIds: ids.slice(),
        text: n.c.text,
        logprobs: n.c.logprobs.slice(),
        entropy: n.c.entropy.slice(),
        lossMask: ids.map(() => 1),
        ...(calls.length ? { toolCalls: calls } : {}),
        ...(step !== undefined ? { stepReward: step } : {}),
        stop: n.c.finish === 'length' ? { reason: 'max_new_tokens' } : { reason: 'stop_token' },
      });
      length += obs.length + ids.length;
      prev = n.full;
      if (n === leaf && n.c.finish === 'length') truncated = true;
    }
    if (!turns.some((u) => u.role === 'model')) continue;
    const generated = turns.filter((u) => u.role === 'model').reduce((a, u) => a + u.tokenIds.length, 0);
    out.push({
      taskId: o.taskId,
      group: o.group,
      sample: o.firstSample + out.length,
      promptIds: root.call.promptIds.slice(),
      promptText: root.call.promptText,
      turns,
      outcome: { ...o.outcome, components: { ...o.outcome.components } },
      truncated,
      seed: o.seed,
      timings: {
        totalMs: path[path.length - 1]!.call.endedMs - root.call.startedMs,
        modelMs: path.reduce((a, n) => a + (n.call.endedMs - n.call.startedMs), 0),
        envMs: 0,
        prefillTokens: root.call.promptIds.length,
        generatedTokens: generated,
      },
      meta: { ...(o.meta ?? {}), agent_calls: path.length, ...(drift.length ? { drift } : {}) },
    });
  }
  return out;
}

// How a trajectory was steered by hand, so the replay marks it wherever it appears: a what-if fork's
// edit (replay.fork: the tool result replaced in an observation, or text written into a model turn)
// and a live rollout's forced tokens and edited observations (live.*: outcome.live).
import type { TrajectorySummary } from '../api/types';

export interface Steering {
  /** Turn index → what was edited there. */
  edited: Map<number, string>;
  /** Turn index → positions of the tokens the user forced. */
  forced: Map<number, Set<number>>;
  /** Turn index of a model turn whose tool-call cards show results the fork replaced in the next turn. */
  staleCalls: Map<number, string>;
}

type Steerable = Pick<TrajectorySummary, 'fork' | 'outcomeData'> & { turnsData?: { role: string }[] };

export function steeringOf(t: Steerable): Steering {
  const out: Steering = { edited: new Map(), forced: new Map(), staleCalls: new Map() };
  const f = t.fork;
  if (f?.edit) {
    if (f.edit.kind === 'observation') {
      out.edited.set(f.turn, f.edit.replaced === 'result' ? "what-if edit: the tool's result replaced" : 'what-if edit: the observation replaced');
      // The tool-call cards of the model turn before it show what the tool really returned.
      for (let k = f.turn - 1; k >= 0; k--)
        if (!t.turnsData || t.turnsData[k]?.role === 'model') {
          out.staleCalls.set(k, `the results below are what the tool returned; in this what-if replay turn ${f.turn + 1} shows an edited result instead`);
          break;
        }
    } else out.edited.set(f.turn, `what-if edit: ${f.edit.ids.length} tokens written into this turn`);
  }
  const live = (t.outcomeData as { live?: { forced?: { turn: number; token: number }[]; edited?: number[] } } | null)?.live;
  for (const { turn, token } of live?.forced ?? []) {
    const s = out.forced.get(turn) ?? new Set<number>();
    s.add(token);
    out.forced.set(turn, s);
  }
  for (const turn of live?.edited ?? []) out.edited.set(turn, 'live rollout: the observation edited before the model saw it');
  return out;
}

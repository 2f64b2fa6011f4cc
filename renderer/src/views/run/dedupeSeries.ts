import type { Series } from '../../api/types';

/** Series keys with identical curves folded into the first key (its aliases listed), filtered by text. */
export function dedupeSeries(series: Record<string, Series>, filter: string): { keys: string[]; aliases: Record<string, string[]> } {
  const byCurve = new Map<string, string>();
  const aliases: Record<string, string[]> = {};
  const keys: string[] = [];
  // The headline key of a set of identical curves comes first (reward/mean over exact_match, …).
  const rank = (k: string) => (k === 'reward/mean' ? 0 : 1);
  for (const k of Object.keys(series).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0))) {
    if (!k.includes(filter)) continue;
    const s = series[k]!;
    const sig = s.step.length > 1 ? `${s.step.join(',')}|${s.value.join(',')}` : `${k}`;
    const first = byCurve.get(sig);
    if (first) (aliases[first] ??= []).push(k);
    else {
      byCurve.set(sig, k);
      keys.push(k);
    }
  }
  return { keys, aliases };
}

// The Run and Compare views' chart sections: which metric goes under which heading, in reading order.

/** Chart sections, in the order researchers read them; a metric goes to the first section that matches. */
const SECTIONS: [string, RegExp][] = [
  ['Reward', /^reward(\/|$)/],
  // environment.judge: requests, tokens, seconds, cost, failures, agreement.
  ['Judge', /^judge\//],
  ['Accuracy', /^(exact_match|em|format_rate|accuracy)$/],
  ['Held-out evaluation', /^eval\//],
  // Branching rollouts (ARPO/AEPO): branches per prompt, prefix tokens not recomputed, entropy and ΔH at branch points.
  ['Branching rollouts', /^rollout\/(branch|prefix_tokens)/],
  ['Policy: KL, entropy, clipping, loss', /^(actor|critic|advantage)\/|(^|\/)(kl|entropy)$|clip|^groups\/|logprob_mismatch/],
  ['Lengths and turns', /length|^turns\/|truncated/],
  ['Tool calls', /tool/],
  ['Throughput and time', /^(perf|time)\/|tokens_per_s|throughput/],
  ['Optimizer', /^optim\//],
  ['SFT warm start', /^sft\//],
];

export function groupMetricKeys(keys: string[]): { title: string; keys: string[] }[] {
  const groups = new Map<string, string[]>();
  for (const k of [...keys].sort()) {
    // The SFT warm start's own metrics stay together (sft/tokens_per_s is not RL throughput).
    const title = k.startsWith('sft/') ? 'SFT warm start' : (SECTIONS.find(([, re]) => re.test(k))?.[0] ?? 'Other');
    groups.set(title, [...(groups.get(title) ?? []), k]);
  }
  const order = [...SECTIONS.map(([t]) => t), 'Other'];
  // Within a section the headline comes first (reward/mean before its components).
  const head = (k: string) => (/\/mean$|^exact_match$|kl$/.test(k) ? 0 : 1);
  return order.filter((t) => groups.has(t)).map((title) => ({ title, keys: groups.get(title)!.sort((a, b) => head(a) - head(b) || a.localeCompare(b)) }));
}

export function sortMetricKeys(keys: string[]): string[] {
  return groupMetricKeys(keys).flatMap((g) => g.keys);
}

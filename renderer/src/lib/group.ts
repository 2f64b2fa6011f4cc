// The group view's helpers (a GRPO group's samples side by side).
/** Indices of the rewards unlike the group's most common one (none when all are equal or no value is the most common). */
export function oddSamples(rewards: number[]): Set<number> {
  const counts = new Map<string, number>();
  for (const r of rewards) counts.set(r.toFixed(6), (counts.get(r.toFixed(6)) ?? 0) + 1);
  const ranked = [...counts.values()].sort((a, b) => b - a);
  if (ranked.length < 2 || ranked[0] === ranked[1]) return new Set();
  const mode = [...counts].find(([, n]) => n === ranked[0])![0];
  return new Set(rewards.flatMap((r, i) => (r.toFixed(6) === mode ? [] : [i])));
}

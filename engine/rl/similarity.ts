/**
 * Text similarity for GiGPO's optional similarity-based step groups: the ratio of Python's
 * difflib.SequenceMatcher(None, a, b).ratio(), which verl-agent's `are_similar` uses —
 * 2·M / (|a| + |b|) with M the characters in the matching blocks found by recursively taking the
 * longest common substring (Ratcliff/Obershelp), including difflib's "autojunk" heuristic (for
 * |b| ≥ 200, characters occurring in more than 1% + 1 of b's positions do not seed matches,
 * though matches may extend over them). Ported so that a threshold means the same as in
 * verl-agent runs; no npm port of difflib is maintained with types.
 */
export function sequenceMatcherRatio(a: string, b: string): number {
  const la = a.length;
  const lb = b.length;
  if (la + lb === 0) return 1;
  // b2j: positions of each character of b, without the popular ones (autojunk).
  const b2j = new Map<string, number[]>();
  for (let j = 0; j < lb; j++) {
    const c = b[j]!;
    const l = b2j.get(c);
    if (l) l.push(j);
    else b2j.set(c, [j]);
  }
  if (lb >= 200) {
    const ntest = Math.floor(lb / 100) + 1;
    for (const [c, idx] of [...b2j]) if (idx.length > ntest) b2j.delete(c);
  }
  const longest = (alo: number, ahi: number, blo: number, bhi: number): [number, number, number] => {
    let besti = alo;
    let bestj = blo;
    let bestsize = 0;
    let j2len = new Map<number, number>();
    for (let i = alo; i < ahi; i++) {
      const next = new Map<number, number>();
      for (const j of b2j.get(a[i]!) ?? []) {
        if (j < blo) continue;
        if (j >= bhi) break;
        const k = (j2len.get(j - 1) ?? 0) + 1;
        next.set(j, k);
        if (k > bestsize) {
          besti = i - k + 1;
          bestj = j - k + 1;
          bestsize = k;
        }
      }
      j2len = next;
    }
    // Extend over characters that could not seed a match (no junk function: only popular ones).
    while (besti > alo && bestj > blo && a[besti - 1] === b[bestj - 1]) {
      besti--;
      bestj--;
      bestsize++;
    }
    while (besti + bestsize < ahi && bestj + bestsize < bhi && a[besti + bestsize] === b[bestj + bestsize]) bestsize++;
    return [besti, bestj, bestsize];
  };
  let matched = 0;
  const queue: [number, number, number, number][] = [[0, la, 0, lb]];
  while (queue.length) {
    const [alo, ahi, blo, bhi] = queue.pop()!;
    const [i, j, k] = longest(alo, ahi, blo, bhi);
    if (!k) continue;
    matched += k;
    if (alo < i && blo < j) queue.push([alo, i, blo, j]);
    if (i + k < ahi && j + k < bhi) queue.push([i + k, ahi, j + k, bhi]);
  }
  return (2 * matched) / (la + lb);
}

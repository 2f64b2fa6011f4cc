/**
 * Outcome-based group advantages used by the loop (GRPO, Dr.GRPO, RLOO): one scalar per
 * episode, broadcast onto its model tokens (mask 1) and zero on tool/env tokens.
 *
 * The full estimator family (REINFORCE++, GAE with a critic, GiGPO, process rewards) lives in
 * engine/rl under the same config names; these three need nothing but rewards and groups, so the
 * loop keeps them here to run without a tensor backend (the tabular policy, tests).
 */
import type { ExperimentConfig } from './config';
import type { Episode } from './episode';
import type { AdvantagePort } from './loop';

export function groupScalarAdvantages(episodes: Episode[], estimator: 'grpo' | 'drgrpo' | 'rloo', normByStd: boolean, eps = 1e-6): number[] {
  const byGroup = new Map<number, number[]>();
  episodes.forEach((e, i) => {
    const g = byGroup.get(e.group) ?? [];
    g.push(i);
    byGroup.set(e.group, g);
  });
  const out = new Array<number>(episodes.length).fill(0);
  for (const idx of byGroup.values()) {
    const rs = idx.map((i) => episodes[i]!.reward);
    const G = rs.length;
    const mean = rs.reduce((a, b) => a + b, 0) / G;
    if (estimator === 'rloo') {
      if (G < 2) continue;
      idx.forEach((i, k) => (out[i] = (G / (G - 1)) * (rs[k]! - mean)));
      continue;
    }
    // torch.std is unbiased (verl's GRPO uses it); a group of one has no baseline.
    const std = G > 1 ? Math.sqrt(rs.reduce((a, b) => a + (b - mean) ** 2, 0) / (G - 1)) : 0;
    const divide = estimator === 'grpo' && normByStd;
    // Equal rewards carry no signal: exactly 0 (not 0/eps noise).
    idx.forEach((i, k) => (out[i] = G > 1 && std > 0 ? (rs[k]! - mean) / (divide ? std + eps : 1) : 0));
  }
  return out;
}

export function broadcastToTokens(e: Episode, a: number): Float32Array {
  const t = new Float32Array(e.lossMask.length);
  for (let i = 0; i < t.length; i++) if (e.lossMask[i]) t[i] = a;
  return t;
}

export function groupAdvantagePort(cfg: ExperimentConfig): AdvantagePort {
  const est = cfg.algorithm.adv_estimator;
  if (est !== 'grpo' && est !== 'drgrpo' && est !== 'rloo')
    throw new Error(`algorithm.adv_estimator: "${est}" needs engine/rl's estimator registry; the built-in group estimators are grpo, drgrpo, rloo`);
  return {
    compute({ episodes }) {
      const a = groupScalarAdvantages(episodes, est, cfg.algorithm.norm_adv_by_std);
      return { advantages: new Map(episodes.map((e, i) => [e, broadcastToTokens(e, a[i]!)] as const)) };
    },
  };
}

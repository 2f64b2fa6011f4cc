/**
 * One rule for flags and configs, shared by every command:
 *  - a flag's value is parsed and checked when it is read, and a bad one is refused naming the
 *    flag (intFlag, numberFlag);
 *  - a flag given on the command line overrides the config's key; a flag's default never does
 *    (`given`: commander's getOptionValueSource is 'cli' only for what the user typed).
 */
import type { Command } from 'commander';

/** An integer flag ≥ `min` (default 0), e.g. `.option('--n <count>', '…', intFlag('n', 1), 4)`. */
export const intFlag =
  (name: string, min = 0) =>
  (v: string): number => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isInteger(n) || n < min)
      throw new Error(`--${name} must be ${min === 1 ? 'a positive integer' : min === 0 ? 'an integer ≥ 0' : `an integer ≥ ${min}`} (got "${v}")`);
    return n;
  };

/** A finite number flag ≥ `min` when given. */
export const numberFlag =
  (name: string, min?: number) =>
  (v: string): number => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || (min !== undefined && n < min))
      throw new Error(`--${name} must be a number${min !== undefined ? ` ≥ ${min}` : ''} (got "${v}")`);
    return n;
  };

/** Whether the user gave option `key` (its camelCase name) on the command line. */
export function given(cmd: Command, key: string): boolean {
  return cmd.getOptionValueSource(key) === 'cli';
}

/**
 * Sets dotted config paths in a raw config from the flags the user gave (and only those):
 * `overlayGiven(raw, cmd, opts, { n: 'rollout.n', topP: 'rollout.top_p' })`.
 */
export function overlayGiven(raw: Record<string, unknown>, cmd: Command, opts: Record<string, unknown>, map: Record<string, string>): void {
  for (const [key, path] of Object.entries(map)) {
    if (!given(cmd, key)) continue;
    const parts = path.split('.');
    let o = raw;
    for (const p of parts.slice(0, -1)) o = (o[p] ??= {}) as Record<string, unknown>;
    o[parts.at(-1)!] = opts[key];
  }
}

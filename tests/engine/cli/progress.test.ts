// The shared progress helper off a TTY: the first and last positions, then a line per 5% of the
// work at most every minIntervalMs, each with elapsed and remaining time; stop() shows where a
// stopped job ended.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { formatDuration, progressBar } from '../../../engine/cli/progress';

const sink = () => {
  const lines: string[] = [];
  const stream = new Writable({ write: (c, _e, cb) => (lines.push(...String(c).split('\n').filter(Boolean)), cb()) });
  return { lines, stream };
};

describe('progressBar off a terminal', () => {
  it('prints at most one line per 5% with elapsed and remaining time', () => {
    const { lines, stream } = sink();
    const bar = progressBar('train', 900, { tty: false, minIntervalMs: 0, stream, fields: ['reward'] });
    for (let s = 1; s <= 900; s++) bar.update(s, { reward: 0.5 });
    bar.stop();
    // 900 steps: the first, one per 5% boundary (20), no duplicate for the last one.
    expect(lines.length).toBe(21);
    expect(lines[0]).toMatch(/^train 1\/900 0% elapsed \S+ remaining \S+ reward=0\.500$/);
    expect(lines.at(-1)).toMatch(/^train 900\/900 100% elapsed \S+ remaining 0s reward=0\.500$/);
  });
  it('holds lines back within minIntervalMs but shows the final position on stop', () => {
    const { lines, stream } = sink();
    const bar = progressBar('sft', 100, { tty: false, minIntervalMs: 60_000, stream });
    for (let s = 1; s <= 40; s++) bar.update(s);
    bar.stop();
    expect(lines.map((l) => l.split(' ')[1])).toEqual(['1/100', '40/100']);
  });
  it('is silent when quiet', () => {
    const { lines, stream } = sink();
    const bar = progressBar('x', 10, { quiet: true, tty: false, stream });
    bar.update(5);
    bar.stop();
    expect(lines).toEqual([]);
    expect(formatDuration(65)).toBe('1m05s');
    expect(formatDuration(3.21)).toBe('3.2s');
  });
});

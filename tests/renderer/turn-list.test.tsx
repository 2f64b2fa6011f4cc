// The replay view must stay usable on 10k-token trajectories: rows are virtualised, so the DOM
// holds a bounded number of token spans however long the trajectory is.
import { render, cleanup } from '@testing-library/react';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TurnList } from '../../renderer/src/views/trajectories/TurnList';
import { buildRows, TOKENS_PER_ROW } from '../../renderer/src/views/trajectories/turns/rows';
import type { TrajectoryView, TurnView } from '../../renderer/src/api/types';

afterEach(cleanup);

// jsdom has no layout: give every element a 600×800 client box (the viewport the virtualiser
// sees) and a 200 px rendered height (what it measures for each row).
const saved = {
  h: Object.getOwnPropertyDescriptor(HTMLElement.prototype, 'clientHeight'),
  w: Object.getOwnPropertyDescriptor(HTMLElement.prototype, 'clientWidth'),
  o: Object.getOwnPropertyDescriptor(HTMLElement.prototype, 'offsetHeight'),
};
beforeAll(() => {
  Object.defineProperty(HTMLElement.prototype, 'offsetHeight', { configurable: true, get: () => 200 });
  Object.defineProperty(HTMLElement.prototype, 'clientHeight', { configurable: true, get: () => 600 });
  Object.defineProperty(HTMLElement.prototype, 'clientWidth', { configurable: true, get: () => 800 });
});
afterAll(() => {
  if (saved.h) Object.defineProperty(HTMLElement.prototype, 'clientHeight', saved.h);
  if (saved.w) Object.defineProperty(HTMLElement.prototype, 'clientWidth', saved.w);
  if (saved.o) Object.defineProperty(HTMLElement.prototype, 'offsetHeight', saved.o);
});

function modelTurn(n: number): TurnView {
  const ids = Array.from({ length: n }, (_, i) => i % 5000);
  return {
    role: 'model',
    text: '',
    tokenIds: ids,
    tokens: ids.map((i) => `t${i} `),
    logprob: ids.map((i) => -((i % 7) / 2)),
    refLogprob: ids.map((i) => -((i % 5) / 2)),
    entropy: ids.map((i) => (i % 3) / 2),
    advantage: ids.map(() => 0.5),
    value: null,
    lossMask: ids.map(() => 1),
    toolCalls: [{ name: 'search', args: { query: 'x' }, result: 'doc' }],
    stepReward: null,
  };
}

function trajectory(turns: TurnView[]): TrajectoryView {
  return {
    id: 't1',
    runId: 'r',
    step: 1,
    group: 0,
    sample: 0,
    reward: 1,
    turns: turns.length,
    hasError: false,
    full: true,
    outcomeData: {},
    timings: {},
    rewardBreakdown: {},
    turnsData: turns,
  };
}

describe('trajectory turn list', () => {
  it('splits long turns into rows of bounded size', () => {
    const rows = buildRows(trajectory([modelTurn(10_000), { ...modelTurn(0), role: 'tool', text: 'observation', toolCalls: [] }]));
    const tokenRows = rows.filter((r) => r.kind === 'tokens');
    expect(tokenRows.length).toBe(Math.ceil(10_000 / TOKENS_PER_ROW));
    expect(rows.filter((r) => r.kind === 'text').length).toBe(1);
    expect(rows[0]).toEqual({ kind: 'head', turn: 0 });
  });

  it('renders a bounded number of token spans for a 10k-token trajectory', () => {
    const { container } = render(<TurnList traj={trajectory([modelTurn(10_000)])} channel="logprob" turnIndex={0} height={600} />);
    const spans = container.querySelectorAll('span.t').length;
    expect(spans).toBeGreaterThan(0);
    expect(spans).toBeLessThan(10_000 / 2);
    // the first turn head is present and marked active
    expect(container.querySelector('[data-testid="turn"][data-active="true"]')?.getAttribute('data-turn-index')).toBe('0');
  });
});

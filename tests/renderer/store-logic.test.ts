// Store logic that does not need the engine: run filtering and sorting, live series appends,
// GRPO siblings, and the chat history rebuilt from the transcript.
import { describe, expect, it } from 'vitest';
import { filterRuns, sortRuns } from '../../renderer/src/store/runs';
import { appendPoint } from '../../renderer/src/store/run';
import { siblingsOf } from '../../renderer/src/store/trajectories';
import { transcriptToMessages } from '../../renderer/src/store/playground';
import { fileKind } from '../../renderer/src/store/editor';
import type { RunSummary, TrajectoryView, TrajectorySummary, TurnView } from '../../renderer/src/api/types';
import { deriveToolCalls, normalizeTry } from '../../renderer/src/api/connection';

const run = (id: string, over: Partial<RunSummary> = {}): RunSummary => ({
  id,
  name: id,
  status: 'completed',
  tags: [],
  createdAt: 0,
  startedAt: null,
  endedAt: null,
  step: 0,
  metrics: {},
  ...over,
});

describe('runs table', () => {
  const runs = [
    run('a', { name: 'grpo-lr3', tags: ['sweep'], metrics: { 'reward/mean': 0.7 }, createdAt: 3 }),
    run('b', { name: 'ppo-base', status: 'running', metrics: { 'reward/mean': 0.2 }, createdAt: 1 }),
    run('c', { name: 'grpo-lr1', tags: ['sweep'], createdAt: 2 }),
  ];
  it('filters by words across name, status and tags, and by metric comparisons', () => {
    expect(filterRuns(runs, 'grpo').map((r) => r.id)).toEqual(['a', 'c']);
    expect(filterRuns(runs, 'running').map((r) => r.id)).toEqual(['b']);
    expect(filterRuns(runs, 'sweep reward/mean>0.5').map((r) => r.id)).toEqual(['a']);
    expect(filterRuns(runs, 'reward/mean<0.5').map((r) => r.id)).toEqual(['b']);
    expect(filterRuns(runs, '').length).toBe(3);
  });
  it('sorts by column or metric, runs without the metric last when descending', () => {
    expect(sortRuns(runs, { key: 'createdAt', desc: true }).map((r) => r.id)).toEqual(['a', 'c', 'b']);
    expect(sortRuns(runs, { key: 'metric:reward/mean', desc: true }).map((r) => r.id)).toEqual(['a', 'b', 'c']);
    expect(sortRuns(runs, { key: 'name', desc: false }).map((r) => r.id)).toEqual(['c', 'a', 'b']);
  });
});

describe('live series', () => {
  it('appends new steps, replaces a repeated last step, ignores stale ones', () => {
    let s = appendPoint(undefined, 1, 0.5);
    s = appendPoint(s, 2, 0.6);
    s = appendPoint(s, 2, 0.65);
    s = appendPoint(s, 1, 9);
    expect(s).toEqual({ step: [1, 2], value: [0.5, 0.65] });
  });
});

describe('GRPO siblings', () => {
  it('are the samples of the same step and group, in sample order', () => {
    const t = (id: string, step: number, group: number, sample: number): TrajectorySummary => ({
      id,
      runId: 'r',
      step,
      group,
      sample,
      reward: 0,
      turns: 1,
      hasError: false,
      full: true,
      outcomeData: {},
      timings: {},
    });
    const list = [t('x', 1, 0, 1), t('y', 1, 1, 0), t('z', 1, 0, 0), t('w', 2, 0, 0)];
    expect(siblingsOf(list, { step: 1, group: 0 }).map((x) => x.id)).toEqual(['z', 'x']);
  });
});

describe('playground history', () => {
  it('sends user and assistant messages and tool observations as the model saw them, not the call markers', () => {
    const msgs = transcriptToMessages([
      { kind: 'user', text: 'who?' },
      { kind: 'assistant', text: '<search>x</search>', done: true },
      { kind: 'tool_call', name: 'search', args: { query: 'x' } },
      { kind: 'observation', name: 'search', content: 'doc' },
      { kind: 'observation', name: 'search', content: ' <information> Error: timeout </information> ', error: 'timeout' },
      { kind: 'error', message: 'boom' },
    ]);
    expect(msgs).toEqual([
      { role: 'user', content: 'who?' },
      { role: 'assistant', content: '<search>x</search>' },
      { role: 'tool', name: 'search', content: 'doc' },
      { role: 'tool', name: 'search', content: ' <information> Error: timeout </information> ' },
    ]);
  });
});

describe('editor file kinds', () => {
  it('uses the engine-reported kind, else guesses from the path', () => {
    expect(fileKind('a.ts', [{ path: 'a.ts', kind: 'reward' }])).toBe('reward');
    expect(fileKind('rewards/len.ts', [])).toBe('reward');
    expect(fileKind('tools/search.ts', [])).toBe('tool');
  });
});

describe('tool calls of trajectories stored without call records', () => {
  const turn = (role: string, text: string, toolCalls: TurnView['toolCalls'] = []): TurnView => ({
    role,
    text,
    tokenIds: [],
    tokens: [],
    logprob: null,
    refLogprob: null,
    entropy: null,
    advantage: null,
    value: null,
    lossMask: null,
    stepReward: null,
    toolCalls,
  });
  const traj = (turnsData: TurnView[]): TrajectoryView => ({
    id: '1',
    runId: 'r',
    step: 1,
    group: 0,
    sample: 0,
    reward: 0,
    turns: turnsData.length,
    hasError: false,
    full: true,
    outcomeData: {},
    timings: {},
    rewardBreakdown: {},
    turnsData,
  });
  it('reads Search-R1 and Hermes calls from model turns, with the next observation as the result', () => {
    const t = deriveToolCalls(
      traj([
        turn('env', 'question : who ?'),
        turn('model', 'think <search> tara bell </search>'),
        turn('tool', ' <information> tara bell was born in york . </information> '),
        turn('model', '<tool_call>{"name": "calc", "arguments": {"x": 2}}</tool_call><tool_call>{bad</tool_call>'),
        turn('tool', 'out'),
        turn('model', '<answer> york </answer>'),
      ]),
    );
    expect(t.turnsData[1].toolCalls).toEqual([
      { name: 'search', args: { query: 'tara bell' }, derived: true, result: '<information> tara bell was born in york . </information>' },
    ]);
    expect(t.turnsData[3].toolCalls).toEqual([
      { name: 'calc', args: { x: 2 }, derived: true },
      { name: '?', args: '{bad', error: 'arguments are not valid JSON', derived: true, result: 'out' },
    ]);
    expect(t.turnsData[5].toolCalls).toEqual([]);
  });
  it('leaves trajectories that have call records alone', () => {
    const t = traj([turn('model', '<search> a </search>', [{ name: 'search', args: { query: 'a' }, result: 'r' }]), turn('model', '<search> b </search>')]);
    expect(deriveToolCalls(t)).toBe(t);
  });
});

describe('sandbox answers', () => {
  it('keep a value, and an error with its line (given, or from the first stack frame in the file)', () => {
    expect(normalizeTry({ ok: true, value: 1.25, ms: 3 })).toEqual({ ok: true, value: 1.25, ms: 3, logs: undefined });
    expect(normalizeTry({ ok: false, error: { message: 'no luck', line: 6, column: 11 } })).toMatchObject({
      ok: false,
      error: { message: 'no luck', line: 6, column: 11 },
    });
    const stack = 'Error: no luck\n    at run (node:internal/x:1:2)\n    at execute (file:///ws/tools/explode.ts:6:11)\n    at main (sandbox.js:40:3)';
    expect(normalizeTry({ error: { message: 'no luck', stack } }, 'tools/explode.ts')).toMatchObject({
      ok: false,
      error: { message: 'no luck', line: 6, column: 11 },
    });
    expect(normalizeTry({ ok: false, error: 'timed out after 2000 ms' })).toMatchObject({ ok: false, error: { message: 'timed out after 2000 ms' } });
  });
});

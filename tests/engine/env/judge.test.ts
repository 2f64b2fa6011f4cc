/**
 * The judge (engine/env/judge.ts) against a mock OpenAI-compatible server on 127.0.0.1: both
 * modes, retries of malformed JSON, a 429 and a timeout, named failures, the content cache, the
 * seeded shuffle, reversed-order agreement and judge/* metrics.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { extractJson, Judge, pairwiseAgreement, parseRankAnswer, ranksOf, type JudgeOptions } from '../../../engine/env/judge';
import { contentScore, MockJudge } from './judge-mock';

let mock: MockJudge;
beforeEach(async () => {
  mock = new MockJudge();
  await mock.start();
});
afterEach(async () => mock.close());

const judge = (o: Partial<JudgeOptions> = {}) =>
  new Judge({
    baseUrl: mock.url,
    model: 'judge-m',
    rubric: 'Reward trajectories that say good.',
    mode: 'rank',
    retries: 2,
    timeoutMs: 2000,
    agreement: false,
    maxTokens: 256,
    temperature: 0,
    concurrency: 4,
    backoffMs: () => 0,
    ...o,
  });

const T = ['good good bad', 'bad bad bad', 'good good good', 'good bad bad'];
const group = (seed = 1, transcripts = T) => ({ task: 'say good', samples: transcripts.map((t, i) => ({ id: i, transcript: t })), seed });
/** The order the prompt showed the transcripts in. */
const shownOrder = (content: string) => [...content.matchAll(/<trajectory \d+>\n(.*)\n/g)].map((m) => m[1]!);

describe('judge: rank mode', () => {
  it('scores and ranks a whole group in one request, by content, whatever the shuffled order', async () => {
    const j = judge();
    const r = await j.judgeGroup(group());
    expect(mock.requests.length).toBe(1);
    expect(mock.requests[0]!.model).toBe('judge-m');
    expect(mock.requests[0]!.messages[0]!.content).toContain('Reward trajectories that say good.');
    T.forEach((t, i) => expect(r.samples.get(i)!.score).toBeCloseTo(contentScore(t), 6));
    expect(T.map((_, i) => r.samples.get(i)!.rank)).toEqual([2, 4, 1, 3]);
    // The audit: the prompt as sent, the raw answer, the order it showed.
    expect(r.calls).toHaveLength(1);
    expect(r.calls[0]!.prompt).toBe(mock.requests[0]!.messages[1]!.content);
    expect(JSON.parse(r.calls[0]!.answer!)).toHaveProperty('scores');
    expect(r.calls[0]!.order.map((id) => T[id])).toEqual(shownOrder(r.calls[0]!.prompt));
    const m = j.takeMetrics();
    expect(m).toMatchObject({
      'judge/requests': 1,
      'judge/calls': 1,
      'judge/failures': 0,
      'judge/tokens_in': 100,
      'judge/tokens_out': 20,
      'judge/tokens': 120,
    });
    expect(m['judge/seconds']).toBeGreaterThan(0);
    expect(m).not.toHaveProperty('judge/cost');
    expect(j.takeMetrics()).toEqual({});
  });

  it('shuffles with the seed: the same seed shows the same order, other seeds others', async () => {
    const orders = new Set<string>();
    for (const seed of [1, 1, 2, 3, 4, 5]) {
      await judge().judgeGroup(group(seed));
      orders.add(shownOrder(mock.requests.at(-1)!.messages[1]!.content).join('|'));
    }
    const first = shownOrder(mock.requests[0]!.messages[1]!.content).join('|');
    expect(shownOrder(mock.requests[1]!.messages[1]!.content).join('|')).toBe(first);
    expect(orders.size).toBeGreaterThan(1);
  });

  it('shows identical trajectories once and gives them one score; the same group again is served from the cache', async () => {
    const j = judge();
    const r = await j.judgeGroup(group(7, ['good bad', 'bad bad', 'good bad', 'good bad']));
    expect(shownOrder(mock.requests[0]!.messages[1]!.content).sort()).toEqual(['bad bad', 'good bad']);
    expect([0, 2, 3].map((i) => r.samples.get(i)!.score)).toEqual([0.5, 0.5, 0.5]);
    expect(r.samples.get(1)!.rank).toBe(2);
    // The same trajectories under another seed (another order): no request, the same scores.
    const again = await j.judgeGroup(group(8, ['bad bad', 'good bad', 'good bad', 'good bad']));
    expect(mock.requests.length).toBe(1);
    expect(again.calls[0]!.cached).toBe(true);
    expect(again.samples.get(0)!.score).toBe(0);
    expect(again.samples.get(3)!.score).toBe(0.5);
    expect(j.takeMetrics()).toMatchObject({ 'judge/requests': 2, 'judge/calls': 1, 'judge/cache_hits': 1 });
  });

  it('retries malformed JSON, a 429 and a timeout, then scores', async () => {
    mock.script.push(
      { content: 'Sure! Trajectory 1 is best.' },
      { status: 429, raw: '{"error":{"message":"rate limited"}}', headers: { 'retry-after': '0' } },
      { delayMs: 800 },
    );
    const j = judge({ retries: 3, timeoutMs: 300 });
    const r = await j.judgeGroup(group());
    expect(mock.requests.length).toBe(4);
    expect(r.samples.get(2)!.score).toBe(1);
    expect(r.calls[0]!.attempts).toBe(4);
    expect(r.calls[0]!.error).toBeUndefined();
    expect(j.takeMetrics()).toMatchObject({ 'judge/calls': 4, 'judge/retries': 3, 'judge/failures': 0 });
  });

  it('names the failure after its retries (never a crash, never a score), and does not cache it', async () => {
    mock.script.push({ content: '{"scores": [' }, { content: '{"scores": [{"trajectory": 1, "score": 0.5}]}' }, { content: 'no' });
    const j = judge({ retries: 2 });
    const r = await j.judgeGroup(group());
    for (let i = 0; i < T.length; i++) {
      expect(r.samples.get(i)!.score).toBeUndefined();
      expect(r.samples.get(i)!.failed).toMatch(/^malformed answer: the answer is not JSON: "no" \(after 3 attempts\)$/);
    }
    expect(r.calls[0]!.error).toContain('malformed answer');
    expect(r.calls[0]!.answer).toBe('no');
    expect(j.takeMetrics()).toMatchObject({ 'judge/calls': 3, 'judge/failures': 4 });
    // Asked again, the group is sent again (now answered).
    const again = await j.judgeGroup(group());
    expect(mock.requests.length).toBe(4);
    expect(again.samples.get(2)!.score).toBe(1);
  });

  it('names a timeout and an HTTP error', async () => {
    mock.script.push({ delayMs: 600 });
    const r = await judge({ retries: 0, timeoutMs: 200 }).judgeGroup(group());
    expect(r.samples.get(0)!.failed).toBe('no answer within 200 ms (timeout_ms) (after 1 attempt)');
    mock.script.push({ status: 429, raw: 'slow down' }, { status: 429, raw: 'slow down' });
    const r2 = await judge({ retries: 1 }).judgeGroup(group(2));
    expect(r2.samples.get(0)!.failed).toBe('HTTP 429 (rate limited): slow down (after 2 attempts)');
  });

  it('agreement: a second request in reversed order, pairwise agreement measured, the mean score kept', async () => {
    const j = judge({ agreement: true });
    const r = await j.judgeGroup(group());
    expect(mock.requests.length).toBe(2);
    const fwd = shownOrder(mock.requests[0]!.messages[1]!.content);
    expect(shownOrder(mock.requests[1]!.messages[1]!.content)).toEqual([...fwd].reverse());
    expect(r.agreement).toBe(1);
    expect(r.calls.map((c) => c.kind)).toEqual(['rank', 'rank-reversed']);
    expect(j.takeMetrics()['judge/agreement']).toBe(1);
    // A judge with a position bias: the first trajectory shown gets 1, the rest 0.
    const biased = new MockJudge((req) => {
      const n = [...req.messages[1]!.content.matchAll(/<trajectory (\d+)>/g)].length;
      return JSON.stringify({ scores: Array.from({ length: n }, (_, i) => ({ trajectory: i + 1, score: i === 0 ? 1 : 0 })) });
    });
    await biased.start();
    try {
      const b = await judge({ agreement: true, baseUrl: biased.url }).judgeGroup(group());
      // Pairs with the first-shown or last-shown trajectory disagree in order; 1 of 6 pairs (two middle ones, tied both times) agrees.
      expect(b.agreement).toBeCloseTo(1 / 6, 6);
      expect([...b.samples.values()].filter((s) => s.score === 0.5)).toHaveLength(2);
    } finally {
      await biased.close();
    }
  });

  it('cost from the configured price; the key sent as a bearer token', async () => {
    const j = judge({ price: { inputPerMtok: 3, outputPerMtok: 15 }, apiKey: 'sk-test' });
    await j.judgeGroup(group());
    expect(j.takeMetrics()['judge/cost']).toBeCloseTo((100 * 3 + 20 * 15) / 1e6, 12);
    expect(mock.requests[0]!.authorization).toBe('Bearer sk-test');
  });
});

describe('judge: score mode', () => {
  it('one request per distinct trajectory; identical ones share the request and the score', async () => {
    const j = judge({ mode: 'score' });
    const r = await j.judgeGroup(group(1, ['good bad', 'good good', 'good bad']));
    expect(mock.requests.length).toBe(2);
    expect(r.samples.get(0)!.score).toBe(0.5);
    expect(r.samples.get(2)!.score).toBe(0.5);
    expect(r.samples.get(1)).toEqual({ score: 1, rank: 1 });
    expect(r.samples.get(0)!.rank).toBe(2);
    expect(r.calls.map((c) => c.order)).toEqual([[0], [1], [2]]);
    expect(r.calls.filter((c) => c.cached)).toHaveLength(1);
    expect(j.takeMetrics()).toMatchObject({ 'judge/requests': 3, 'judge/calls': 2, 'judge/cache_hits': 1 });
  });

  it('a malformed answer fails that trajectory only, named', async () => {
    mock.script.push({ content: '{"score": "high"}' });
    const r = await judge({ mode: 'score', retries: 0, concurrency: 1 }).judgeGroup(group(1, ['good bad', 'good good']));
    expect(r.samples.get(0)!.failed).toBe('malformed answer: the answer: "score" is not a number ("high") (after 1 attempt)');
    expect(r.samples.get(1)!.score).toBe(1);
  });
});

describe('judge: parsing', () => {
  it('reads fenced JSON and text around it; refuses missing, repeated and out-of-range scores', () => {
    expect(extractJson('Here:\n```json\n{"a": 1}\n```')).toEqual({ a: 1 });
    expect(extractJson('verdict {"a": 2} done')).toEqual({ a: 2 });
    expect(parseRankAnswer('{"scores": [{"trajectory_id": "2", "score": 0.1}, {"trajectory": 1, "score": "0.9"}]}', 2).scores).toEqual([0.9, 0.1]);
    expect(() => parseRankAnswer('{"scores": [{"trajectory": 1, "score": 0.1}]}', 2)).toThrow('scores no trajectory 2');
    expect(() => parseRankAnswer('{"scores": [{"trajectory": 1, "score": 0.1}, {"trajectory": 1, "score": 0.2}]}', 2)).toThrow('scored twice');
    expect(() => parseRankAnswer('{"scores": [{"trajectory": 1, "score": 3}]}', 1)).toThrow('outside [0, 1]');
    expect(ranksOf([0.5, 0.9, 0.5, 0])).toEqual([2, 1, 2, 4]);
    expect(pairwiseAgreement([1, 2, 3], [3, 2, 1])).toBe(0);
  });
});

// The per-sequence turn rules (engine/rollout/sequence.ts): where a sampled turn ends, and what
// follows an environment step (shared by the model path and the text policy).
import { describe, expect, it } from 'vitest';
import { TurnLengths } from '../../../engine/rollout/decode-steps';
import { TurnRules, afterEnvStep, beginTurn, newSeq, type RolloutLimits, type TurnEnd } from '../../../engine/rollout/sequence';
import type { Turn } from '../../../engine/rollout/types';
import { WordTokenizer, searchTasks } from './helpers';

const tok = new WordTokenizer();
const ids = (text: string) => tok.encode(text);
const limits: RolloutLimits = { maxNewTokens: 5, maxTurns: 3, maxTotalLength: 30 };
const tokenOf = (word: string) => ({ id: ids(word)[0]!, logprob: -0.5, entropy: 1 });

function started(l: RolloutLimits = limits) {
  const lengths = new TurnLengths();
  const rules = new TurnRules({ strings: ['</search>', '</answer>'], tokenIds: [1] }, l, tok, lengths);
  const s = newSeq(searchTasks(tok)[0]!, 0, 0, 1);
  rules.start(s, { ids: ids('user what is the capital of france ? assistant') });
  return { rules, s, lengths };
}
const modelTurn = (text: string): Turn => {
  const t = ids(text);
  return { role: 'model', tokenIds: t, text, logprobs: t.map(() => 0), entropy: t.map(() => 0), lossMask: t.map(() => 1) };
};

describe('TurnRules: where a sampled turn ends', () => {
  it('a stop string completed by its last token ends the turn; the text is decoded; tokens go unfed one at a time', () => {
    const { rules, s } = started();
    expect(rules.accept(s, tokenOf('<search>'))).toBeNull();
    expect(rules.accept(s, tokenOf('france'))).toBeNull();
    expect(s.unfed).toEqual(ids('france'));
    expect(rules.accept(s, tokenOf('</search>'))).toEqual({ reason: 'stop_string', value: '</search>' });
    expect(s.cur!.text).toBe('<search> france </search>');
    expect(s.cur!.lossMask).toEqual([1, 1, 1]);
    expect(s.length).toBe(9 + 3);
    expect(s.generatedTokens).toBe(3);
  });

  it('a stop token ends the turn and is kept; the per-turn limit, then the total length, cut it otherwise', () => {
    const a = started();
    expect(a.rules.accept(a.s, { id: 1, logprob: 0, entropy: 0 })).toEqual({ reason: 'stop_token', value: 1 });
    expect(a.s.cur!.tokenIds).toEqual([1]);
    const b = started();
    const ends = ['paris', 'paris', 'paris', 'paris', 'paris'].map((w) => b.rules.accept(b.s, tokenOf(w)));
    expect(ends).toEqual([null, null, null, null, { reason: 'max_new_tokens' }]);
    const c = started({ ...limits, maxTotalLength: 11 });
    expect(c.rules.room(c.s)).toBe(2);
    expect([c.rules.accept(c.s, tokenOf('paris')), c.rules.accept(c.s, tokenOf('paris'))]).toEqual([null, { reason: 'max_total_length' }]);
  });

  it('closing a turn records its length (stopped or cut) and counts the model turn', () => {
    const { rules, s, lengths } = started();
    rules.accept(s, tokenOf('<answer>'));
    rules.accept(s, tokenOf('</answer>'));
    const turn = rules.close(s, { reason: 'stop_string', value: '</answer>' });
    expect(s.cur).toBeNull();
    expect(s.turns).toEqual([turn]);
    expect(s.modelTurns).toBe(1);
    expect(lengths.hazard(2)).toBe(1);
  });

  it('after the step, the observation is appended unfed with loss mask 0 and the next turn opens', () => {
    const { rules, s } = started();
    rules.accept(s, tokenOf('</search>'));
    const turn = rules.close(s, { reason: 'stop_string', value: '</search>' });
    const n = rules.afterStep(s, turn, turn.stop!, { done: false, observation: { text: '<information> paris </information>' } });
    expect(n).toBe(3);
    expect(s.turns[1]).toMatchObject({ role: 'tool', tokenIds: ids('<information> paris </information>'), lossMask: [0, 0, 0] });
    expect(s.unfed).toEqual(ids('</search> <information> paris </information>'));
    expect(s.length).toBe(9 + 1 + 3);
    expect(s.cur).toMatchObject({ role: 'model', tokenIds: [] });
  });
});

describe('afterEnvStep: what follows a model turn (model and text policy alike)', () => {
  const at = { length: 20, modelTurns: 1 };
  const stop: TurnEnd = { reason: 'stop_string', value: '</search>' };
  it('the environment ends the episode: truncated only when the turn was cut by the total length', () => {
    const turn = modelTurn('<answer> paris </answer>');
    expect(afterEnvStep(turn, stop, { done: true, stepReward: 1 }, at, limits, tok)).toEqual({ end: true, truncated: false });
    expect(turn.stepReward).toBe(1);
    expect(afterEnvStep(modelTurn('paris'), { reason: 'max_total_length' }, { done: true }, at, limits, tok)).toEqual({ end: true, truncated: true });
  });

  it('the last allowed turn, a turn cut by the total length, or an observation leaving no room truncate the episode', () => {
    const obs = { done: false, observation: { text: '<information> paris </information>' } };
    expect(afterEnvStep(modelTurn('paris'), stop, obs, { length: 20, modelTurns: 3 }, limits, tok)).toEqual({ end: true, truncated: true });
    expect(afterEnvStep(modelTurn('paris'), { reason: 'max_total_length' }, obs, at, limits, tok)).toEqual({ end: true, truncated: true });
    expect(afterEnvStep(modelTurn('paris'), stop, obs, { length: 27, modelTurns: 1 }, limits, tok)).toEqual({ end: true, truncated: true });
    expect(afterEnvStep(modelTurn('paris'), stop, obs, { length: 26, modelTurns: 1 }, limits, tok)).toMatchObject({ end: false });
  });

  it('tool calls go on the turn; observation ids are kept as given (text decoded from them), no observation → none', () => {
    const turn = modelTurn('<search> france </search>');
    const calls = [{ name: 'search', args: { query: 'france' }, result: 'paris', latencyMs: 1 }];
    const next = afterEnvStep(turn, stop, { done: false, toolCalls: calls, observation: { ids: ids('paris'), role: 'env' } }, at, limits, tok);
    expect(turn.toolCalls).toBe(calls);
    expect(next).toEqual({ end: false, observation: { role: 'env', tokenIds: ids('paris'), text: 'paris', logprobs: [0], entropy: [0], lossMask: [0] } });
    expect(afterEnvStep(modelTurn('paris'), stop, { done: false }, at, limits, tok)).toEqual({ end: false, observation: null });
  });
});

describe('beginTurn', () => {
  it('opens an empty model turn and restarts the stop-string scan', () => {
    const s = newSeq(searchTasks(tok)[0]!, 0, 0, 1);
    s.scanFrom = 7;
    beginTurn(s);
    expect(s.cur).toEqual({ role: 'model', tokenIds: [], text: '', logprobs: [], entropy: [], lossMask: [] });
    expect(s.scanFrom).toBe(0);
  });
});

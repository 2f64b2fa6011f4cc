/**
 * `arbor generate` through the real CLI on a tiny model folder: the prompt ids are the
 * tokenizer's, the greedy continuation matches a no-cache argmax loop, the top logits are those
 * of a full forward over the prompt, and bad input is refused with a message naming it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initTinyModel } from '../../../engine/cli/commands/init-model';
import { generate } from '../../../engine/cli/commands/generate';
import { PolicyModel } from '../../../engine/model/runtime';
import { HfTokenizer } from '../../../engine/model/tokenizer';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
const arbor = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8' });

const models: PolicyModel[] = [];
afterAll(async () => {
  for (const m of models) await m.dispose();
});

describe('arbor generate', () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'arbor-gen-')), 'tiny');
  initTinyModel(dir, { task: 'multihop', seed: 3, hidden: 32, layers: 1, heads: 2 });

  it('--greedy --json: prompt ids, a continuation equal to a no-cache argmax loop, the prompt position top logits', async () => {
    const prompt = 'who directed the film';
    const r = arbor('generate', dir, '--prompt', prompt, '--greedy', '--json', '--max-new', '6', '--threads', '1');
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    const tok = HfTokenizer.load(dir);
    expect(out.promptIds).toEqual(tok.encodeWithSpecialTokens(prompt));
    const m = PolicyModel.load(dir, { threads: 1 });
    models.push(m);
    const eos = m.config.eosTokenId;
    const seq = [...out.promptIds];
    const expected: number[] = [];
    let firstLogits: Float32Array | undefined;
    for (let i = 0; i < 6; i++) {
      const [l] = await m.lastLogits([seq]);
      firstLogits ??= l;
      let best = 0;
      for (let j = 1; j < l.length; j++) if (l[j] > l[best]) best = j;
      expected.push(best);
      seq.push(best);
      if (best === eos) break;
    }
    expect(out.generatedIds).toEqual(expected);
    expect(out.stop).toBe(expected.length < 6 ? 'eos' : 'max_new');
    expect(out.topLogits).toHaveLength(10);
    const sorted = Array.from(firstLogits!.keys()).sort((a, b) => firstLogits![b] - firstLogits![a]);
    expect(out.topLogits.map((t: { id: number }) => t.id)).toEqual(sorted.slice(0, 10));
    expect(out.topLogits[0].logit).toBeCloseTo(firstLogits![sorted[0]], 4);
    expect(out.text).toBe(tok.decode(expected.filter((id) => id !== eos)));
  });

  it('--chat renders the chat template; sampling is reproducible by seed', async () => {
    const a = await generate(dir, { prompt: 'hello', chat: true, maxNew: 4, seed: 7, threads: 1 });
    const tok = HfTokenizer.load(dir);
    expect(a.promptIds).toEqual(tok.encode(tok.renderChat([{ role: 'user', content: 'hello' }])));
    expect(a.sampling).toMatchObject({ greedy: false, seed: 7, topK: 50 });
    const b = await generate(dir, { prompt: 'hello', chat: true, maxNew: 4, seed: 7, threads: 1 });
    expect(b.generatedIds).toEqual(a.generatedIds);
    await expect(generate(dir, { prompt: 'hello', temperature: 0 })).rejects.toThrow(/--temperature must be > 0/);
    // A repetition penalty changes the greedy continuation of a prompt that repeats tokens (tiny random models loop).
    const plain = await generate(dir, { prompt: 'who who who', greedy: true, maxNew: 8, threads: 1 });
    const penalised = await generate(dir, { prompt: 'who who who', greedy: true, maxNew: 8, threads: 1, repetitionPenalty: 50 });
    expect(penalised.sampling.repetitionPenalty).toBe(50);
    expect(new Set(penalised.generatedIds).size).toBe(penalised.generatedIds.length); // every id once: seen ids are pushed down
    expect(penalised.generatedIds).not.toEqual(plain.generatedIds);
  });

  it('refuses a missing folder with a message naming it', () => {
    const r = arbor('generate', join(dir, 'nope'), '--prompt', 'x');
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/model folder .*nope does not exist/);
  });
});

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { initTinyModel } from '../../../engine/cli/commands/init-model';
import { PolicyModel } from '../../../engine/model/runtime';
import { HfTokenizer } from '../../../engine/model/tokenizer';
import { multihopVocabulary } from '../../../engine/tasks/multihop/world';
import { rollout } from '../../../engine/rollout/engine';
import { eosTokenIds, policyDecodeBackend } from '../../../engine/rollout/model-backend';

const dir = mkdtempSync(join(tmpdir(), 'arbor-init-model-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('arbor init-model --tiny --task multihop', () => {
  it('writes an HF folder that loads, tokenises the task vocabulary, and samples through the rollout engine', async () => {
    const r = initTinyModel(dir, { task: 'multihop', seed: 3, hidden: 32, layers: 2, heads: 4, maxLength: 256 });
    const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    expect(cfg.vocab_size).toBe(r.vocabSize);
    const tcfg = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'));
    expect(typeof tcfg.chat_template).toBe('string');
    const tok = HfTokenizer.load(dir);
    const words = multihopVocabulary()
      .slice(0, 20)
      .map((w) => w.toLowerCase());
    const ids = tok.encode(words.join(' '));
    expect(ids).toHaveLength(20);
    expect(tok.decode(ids)).toBe(words.join(' '));
    const model = PolicyModel.load(dir, { threads: 1 });
    try {
      expect(eosTokenIds(model.config)).toEqual([tok.eosTokenId]);
      const prompt = tok.encode(tok.renderChat([{ role: 'user', content: words.slice(0, 5).join(' ') }]));
      const { trajectories } = await rollout(policyDecodeBackend(model, { maxBatch: 2 }), {
        tasks: [
          {
            id: 'q',
            createEnv: () => ({
              prompt: async () => ({ ids: prompt }),
              step: async () => ({ done: true }),
              outcome: async () => ({ reward: 0, components: {} }),
            }),
          },
        ],
        n: 2,
        seed: 1,
        sampling: { temperature: 1 },
        tokenizer: tok,
        limits: { maxNewTokens: 8, maxTurns: 1, maxTotalLength: 128 },
        stop: { strings: ['</answer>'], tokenIds: eosTokenIds(model.config) },
      });
      for (const t of trajectories) {
        expect(t.promptIds).toEqual(prompt);
        expect(t.turns[0]!.tokenIds.every((i) => i >= 0 && i < r.vocabSize)).toBe(true);
      }
    } finally {
      await model.dispose();
    }
  });
});

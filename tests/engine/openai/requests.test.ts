// The endpoint's requests on the rollout's scheduler (engine/openai/requests.ts over
// engine/rollout/scheduler.ts): requests sharing a batch on the worker KV cache, several decode
// steps per call, a request that ends mid-call rewound before its slot goes to the next one, and
// logits-path requests (top_p, top_logprobs) in the same stream, each sample exactly what it
// samples alone on a host cache with sampleToken.
import { afterAll, describe, expect, it } from 'vitest';
import { tinyConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { policyDecodeBackend } from '../../../engine/rollout/model-backend';
import { RequestSource, type GenRequest, type GenResult } from '../../../engine/openai/requests';

const decode = (ids: number[]) => ids.join(' ');
const request = (r: Partial<GenRequest> & { promptIds: number[]; seed: number }): GenRequest => ({
  maxTokens: 12,
  temperature: 1,
  topP: 1,
  stopTokenIds: [],
  stopStrings: [],
  topLogprobs: 0,
  ...r,
});
const summary = (r: GenResult) => ({ ids: r.tokens.map((t) => t.id), finish: r.finish, stop: r.stop, top: r.tokens.map((t) => t.top?.map((x) => x.id)) });

describe('RequestSource: the endpoint as a source of the rollout scheduler', () => {
  const model = PolicyModel.init(
    tinyConfig({ vocabSize: 40, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 128, eosTokenId: 1, padTokenId: 0 }),
    5,
    { threads: 1 },
  );
  afterAll(() => model.dispose());

  /** Each request alone, one at a time, on a host cache (logits + sampleToken). */
  async function alone(reqs: GenRequest[]): Promise<GenResult[]> {
    const backend = policyDecodeBackend(model, { maxBatch: 1, cache: 'host' });
    const src = new RequestSource(backend, decode);
    const out: GenResult[] = [];
    for (const r of reqs) out.push(await src.generate(r));
    await src.close();
    return out;
  }

  it('batched requests, several steps per call and rewinds, sample what each samples alone', async () => {
    const prompts = [
      [5, 9, 12, 3],
      [7, 7, 2],
      [30, 4, 11, 19, 8],
      [14, 2],
      [3, 3, 3, 3, 3, 3],
      [22, 6, 17],
    ];
    // A stop token that ends request 0 at its third token, inside the first 8-step call.
    const probe = (await alone([request({ promptIds: prompts[0]!, seed: 1 })]))[0]!;
    const stopAt = probe.tokens[2]!.id;
    const reqs = [
      request({ promptIds: prompts[0]!, seed: 1, stopTokenIds: [stopAt] }),
      request({ promptIds: prompts[1]!, seed: 2, temperature: 0 }),
      request({ promptIds: prompts[2]!, seed: 3, maxTokens: 9, stopStrings: [' 1'] }),
      request({ promptIds: prompts[3]!, seed: 4, topP: 0.8, maxTokens: 6 }),
      request({ promptIds: prompts[4]!, seed: 5, topLogprobs: 3, maxTokens: 5 }),
      request({ promptIds: prompts[5]!, seed: 6, temperature: 0.7 }),
    ];
    const backend = policyDecodeBackend(model, { maxBatch: 2 });
    const src = new RequestSource(backend, decode);
    try {
      const got = await Promise.all(reqs.map((r) => src.generate(r)));
      const want = await alone(reqs);
      expect(got.map(summary)).toEqual(want.map(summary));
      got.forEach((r, i) => r.tokens.forEach((t, k) => expect(Math.abs(t.logprob - want[i]!.tokens[k]!.logprob)).toBeLessThan(1e-4)));
      expect(got[0]!.stop).toEqual({ kind: 'token', id: stopAt });
      expect(got[0]!.tokens.length).toBeLessThanOrEqual(3);
      expect(got[4]!.tokens.every((t) => t.top?.length === 3)).toBe(true);
      const st = src.stats;
      expect(st.rowSum).toBeGreaterThan(st.calls); // requests shared calls
      expect(st.steps).toBeGreaterThan(st.calls); // the backend sampled several steps per call
      expect(st.discarded).toBeGreaterThan(0); // request 0 ended inside a call and was rewound
    } finally {
      await src.close();
      await backend.close?.();
    }
  });
});

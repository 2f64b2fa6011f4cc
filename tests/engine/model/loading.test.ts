/**
 * Honest loading and safe saving of HF folders: what Arbor cannot run is refused with the field,
 * tensor or shard named; saves keep the source dtype and rope_scaling, shard above a limit, and a
 * save that fails midway leaves the previous checkpoint loadable.
 */
import { describe, expect, it } from 'vitest';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadCheckpoint, readModelConfig, saveCheckpoint } from '../../../engine/model/checkpoint';
import { readSafetensors, readSafetensorsHeader, writeSafetensors, f32BitsToBf16, f32BitsToF16 } from '../../../engine/model/safetensors';
import { HfTokenizer, writeWordTokenizer } from '../../../engine/model/tokenizer';

const FIXTURES = join(__dirname, '..', '..', 'fixtures', 'models');

function copyFixture(name: string): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'arbor-load-')), name);
  cpSync(join(FIXTURES, name), dir, { recursive: true });
  return dir;
}

function editConfig(dir: string, edit: (c: Record<string, unknown>) => void): void {
  const f = join(dir, 'config.json');
  const c = JSON.parse(readFileSync(f, 'utf8'));
  edit(c);
  writeFileSync(f, JSON.stringify(c));
}

const bitsOf = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0];

describe('loading refuses what it cannot run', () => {
  it('unknown rope_scaling type, unknown rope field, missing required field', () => {
    const dir = copyFixture('llama-llama3rope-f16');
    editConfig(dir, (c) => {
      c.rope_scaling = { rope_type: 'longrope', short_factor: [1], long_factor: [1] };
    });
    expect(() => loadCheckpoint(dir)).toThrow(
      /config\.json: rope_scaling\.rope_type "longrope" is not supported \(supported: default, linear, dynamic, yarn, llama3\)/,
    );
    editConfig(dir, (c) => {
      c.rope_scaling = { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4 };
    });
    expect(() => loadCheckpoint(dir)).toThrow(/rope_scaling\.original_max_position_embeddings is required for rope_type 'llama3'/);
    editConfig(dir, (c) => {
      c.rope_scaling = { type: 'linear', factor: 2, extrapolation: 3 };
    });
    expect(() => loadCheckpoint(dir)).toThrow(/rope_scaling\.extrapolation is not a field of rope_type 'linear'/);
  });

  it('unsupported hidden_act, mlp_bias, sliding window, o_proj bias, partial rotary', () => {
    const dir = copyFixture('qwen2-f32');
    const orig = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    const reset = (extra: Record<string, unknown>) => writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...orig, ...extra }));
    reset({ hidden_act: 'gelu_pytorch_tanh' });
    expect(() => loadCheckpoint(dir)).toThrow(/hidden_act "gelu_pytorch_tanh" is not supported \(supported: silu\)/);
    reset({ mlp_bias: true });
    expect(() => loadCheckpoint(dir)).toThrow(/mlp_bias: true is not supported/);
    reset({ use_sliding_window: true, sliding_window: 8, max_window_layers: 0 });
    expect(() => loadCheckpoint(dir)).toThrow(/use_sliding_window: true with sliding_window 8 < max_position_embeddings 256/);
    // Switched off, or a window no sequence can exceed: same results, accepted.
    reset({ use_sliding_window: false, sliding_window: 8, max_window_layers: 0 });
    expect(loadCheckpoint(dir).config.extra).toMatchObject({ use_sliding_window: false, sliding_window: 8 });
    reset({ layer_types: ['sliding_attention'], sliding_window: 4 });
    expect(() => loadCheckpoint(dir)).toThrow(/layer_types\[0\] is "sliding_attention" with sliding_window 4; only full attention/);
    reset({ partial_rotary_factor: 0.5 });
    expect(() => loadCheckpoint(dir)).toThrow(/partial_rotary_factor 0\.5 is not supported/);
    const llama = copyFixture('llama-linear-bf16');
    editConfig(llama, (c) => {
      c.attention_bias = true;
    });
    expect(() => loadCheckpoint(llama)).toThrow(/attention_bias: true is not supported for LlamaForCausalLM/);
  });

  it('an unexpected tensor is named', () => {
    const dir = copyFixture('qwen2-f32');
    const file = join(dir, 'model.safetensors');
    const t = readSafetensors(file);
    t.set('model.layers.0.mlp.gate_proj.bias', { shape: [32], data: new Float32Array(32) });
    writeSafetensors(file, t);
    expect(() => loadCheckpoint(dir)).toThrow(
      /model\.safetensors: unexpected tensor 'model\.layers\.0\.mlp\.gate_proj\.bias' \(shape \[32\]\), not part of a Qwen2ForCausalLM/,
    );
    // A stored rotary inv_freq buffer is derived from the config: skipped.
    t.delete('model.layers.0.mlp.gate_proj.bias');
    t.set('model.layers.0.self_attn.rotary_emb.inv_freq', { shape: [8], data: new Float32Array(8) });
    writeSafetensors(file, t);
    expect(loadCheckpoint(dir).weights.has('model.layers.0.self_attn.rotary_emb.inv_freq')).toBe(false);
    // A tied head stored anyway must equal the embedding.
    t.set('lm_head.weight', { shape: [48, 32], data: new Float32Array(48 * 32) });
    writeSafetensors(file, t);
    expect(() => loadCheckpoint(dir)).toThrow(/'lm_head\.weight' differs from 'model\.embed_tokens\.weight' but config\.json has tie_word_embeddings: true/);
    t.set('lm_head.weight', { shape: [48, 32], data: t.get('model.embed_tokens.weight')!.data });
    writeSafetensors(file, t);
    expect(loadCheckpoint(dir).weights.size).toBe(loadCheckpoint(join(FIXTURES, 'qwen2-f32')).weights.size);
  });

  it('a missing shard names the index and the shard', () => {
    const dir = copyFixture('llama-sharded-f32');
    rmSync(join(dir, 'model-00002-of-00003.safetensors'));
    expect(() => loadCheckpoint(dir)).toThrow(
      /model\.safetensors\.index\.json: shard 'model-00002-of-00003\.safetensors' \(holding '.+' and \d+ more tensors\) is missing from/,
    );
  });

  it('generation_config.json eos ids are read; the chat template comes from chat_template.jinja or a named list', () => {
    const c = readModelConfig(join(FIXTURES, 'llama-sharded-f32'));
    expect(c.eosTokenId).toEqual([2, 5]); // config.json 2 ∪ generation_config.json [2, 5]
    const dir = mkdtempSync(join(tmpdir(), 'arbor-tpl-'));
    writeWordTokenizer(dir, ['hello']);
    const tc = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'));
    delete tc.chat_template;
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(tc));
    expect(HfTokenizer.load(dir).chatTemplate).toBeUndefined();
    writeFileSync(join(dir, 'chat_template.jinja'), '{% for m in messages %}{{ m.content }}{% endfor %}');
    expect(HfTokenizer.load(dir).renderChat([{ role: 'user', content: 'hello' }])).toBe('hello');
    rmSync(join(dir, 'chat_template.jinja'));
    writeFileSync(
      join(dir, 'tokenizer_config.json'),
      JSON.stringify({
        ...tc,
        chat_template: [
          { name: 'tool_use', template: 'T' },
          { name: 'default', template: 'D{{ messages[0].content }}' },
        ],
      }),
    );
    expect(HfTokenizer.load(dir).renderChat([{ role: 'user', content: 'x' }])).toBe('Dx');
  });
});

describe('saving', () => {
  it('float16/bfloat16 rounding is to nearest even', () => {
    expect(f32BitsToF16(bitsOf(65504))).toBe(0x7bff);
    expect(f32BitsToF16(bitsOf(65520))).toBe(0x7c00); // rounds up to inf
    expect(f32BitsToF16(bitsOf(1 + 2 ** -11))).toBe(0x3c00); // halfway → even
    expect(f32BitsToF16(bitsOf(1 + 3 * 2 ** -11))).toBe(0x3c02);
    expect(f32BitsToF16(bitsOf(-(2 ** -24)))).toBe(0x8001); // smallest subnormal
    expect(f32BitsToF16(bitsOf(2 ** -25))).toBe(0); // halfway → even (0)
    expect(f32BitsToF16(bitsOf(1.5 * 2 ** -25))).toBe(1);
    expect(f32BitsToBf16(bitsOf(1 + 2 ** -8))).toBe(0x3f80);
    expect(f32BitsToBf16(bitsOf(1 + 3 * 2 ** -8))).toBe(0x3f82);
    expect(f32BitsToBf16(bitsOf(NaN)) & 0x7fc0).toBe(0x7fc0);
  });

  it('keeps the source dtype, torch_dtype and rope_scaling; the saved file equals the source byte for byte', () => {
    for (const name of ['llama-llama3rope-f16', 'qwen3-bf16']) {
      const src = join(FIXTURES, name);
      const ck = loadCheckpoint(src);
      const out = join(mkdtempSync(join(tmpdir(), 'arbor-save-')), 'model');
      saveCheckpoint(out, ck.config, ck.weights, { tokenizerFrom: src });
      const cfgIn = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8'));
      const cfgOut = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
      expect(cfgOut.torch_dtype).toBe(cfgIn.torch_dtype);
      expect(cfgOut.rope_scaling ?? null).toEqual(cfgIn.rope_scaling ?? null);
      expect(cfgOut.transformers_version).toBe(cfgIn.transformers_version); // carried
      expect(readFileSync(join(out, 'model.safetensors')).equals(readFileSync(join(src, 'model.safetensors')))).toBe(true);
      const back = loadCheckpoint(out);
      for (const [k, w] of ck.weights) expect(Buffer.from(back.weights.get(k)!.buffer).equals(Buffer.from(w.buffer)), k).toBe(true);
    }
  });

  it('shards above the size limit with an index, and reloads identically', () => {
    const ck = loadCheckpoint(join(FIXTURES, 'qwen2-f32'));
    const out = join(mkdtempSync(join(tmpdir(), 'arbor-shard-')), 'model');
    const progress: number[] = [];
    saveCheckpoint(out, ck.config, ck.weights, { dtype: 'bfloat16', maxShardBytes: 4096, onProgress: (w) => progress.push(w) });
    const files = readdirSync(out).filter((f) => f.endsWith('.safetensors'));
    expect(files.length).toBeGreaterThan(2);
    expect(files.every((f) => /^model-\d{5}-of-\d{5}\.safetensors$/.test(f))).toBe(true);
    const index = JSON.parse(readFileSync(join(out, 'model.safetensors.index.json'), 'utf8'));
    expect(Object.keys(index.weight_map).sort()).toEqual([...ck.weights.keys()].sort());
    for (const f of files) {
      const h = readSafetensorsHeader(join(out, f));
      expect([...h.tensors.values()].every((t) => t.dtype === 'BF16')).toBe(true);
      expect([...h.tensors.values()].reduce((a, t) => a + t.end - t.begin, 0)).toBeLessThanOrEqual(4096);
    }
    expect(index.metadata.total_size).toBe(progress[progress.length - 1]);
    expect(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).torch_dtype).toBe('bfloat16');
    const back = loadCheckpoint(out);
    expect(back.config.dtype).toBe('bfloat16');
    // Saving the BF16 model again (single file now) is exact and removes the stale shards.
    saveCheckpoint(out, back.config, back.weights);
    expect(
      readdirSync(out)
        .filter((f) => f.endsWith('.safetensors') || f.endsWith('.json'))
        .sort(),
    ).toEqual(['config.json', 'generation_config.json', 'model.safetensors']);
    const again = loadCheckpoint(out);
    for (const [k, w] of back.weights) expect(Buffer.from(again.weights.get(k)!.buffer).equals(Buffer.from(w.buffer)), k).toBe(true);
  });

  it('a save that fails midway leaves the previous checkpoint loadable and no temporary folder', () => {
    const ck = loadCheckpoint(join(FIXTURES, 'llama-sharded-f32'));
    const parent = mkdtempSync(join(tmpdir(), 'arbor-fail-'));
    const out = join(parent, 'model');
    saveCheckpoint(out, ck.config, ck.weights, { maxShardBytes: 8192 });
    const before = new Map(readdirSync(out).map((f) => [f, readFileSync(join(out, f))]));
    const changed = new Map([...ck.weights].map(([k, w]) => [k, w.map((x) => x + 1)]));
    let n = 0;
    expect(() =>
      saveCheckpoint(out, ck.config, changed, {
        maxShardBytes: 8192,
        onProgress: () => {
          if (++n === 5) throw new Error('disk full (simulated)');
        },
      }),
    ).toThrow(/disk full/);
    expect(readdirSync(parent)).toEqual(['model']);
    expect(new Map(readdirSync(out).map((f) => [f, readFileSync(join(out, f))]))).toEqual(before);
    const back = loadCheckpoint(out);
    for (const [k, w] of ck.weights) expect(Buffer.from(back.weights.get(k)!.buffer).equals(Buffer.from(w.buffer)), k).toBe(true);
    expect(existsSync(join(out, 'model.safetensors.index.json'))).toBe(true);
  });
});

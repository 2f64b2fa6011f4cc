/**
 * The critic for PPO: the policy's transformer with a linear value head (`score.weight`, [1, D],
 * as HF's token-classification head with one label, which verl's critic uses) reading each
 * position's final hidden state. Initialised from the policy's weights with a zero head, trained
 * with its own optimizer. Runs on ONNX Runtime in a worker like the policy.
 */
import { withGradients } from '../tensor/autodiff';
import { traceGraph, type InputSpec } from '../tensor/graph';
import type { HostTensor } from '../tensor/host';
import type { Ops } from '../tensor/ops';
import { OrtRunner, OrtWorker } from '../tensor/ort';
import { allocWeight, type Weights } from './checkpoint';
import type { ModelConfig } from './config';
import { weightShapes } from './config';
import { batchFeeds, scoreInputSpecs, type PackedBatch } from './graphs';
import { transformer } from './transformer';
import { readSafetensors, writeSafetensors } from './safetensors';

export const VALUE_HEAD = 'score.weight';

export type CriticLoss = <T>(o: Ops<T>, x: { values: T; mask: T } & Record<string, T>) => Record<string, T>;

function shapes(c: ModelConfig): Record<string, number[]> {
  return { ...weightShapes(c), [VALUE_HEAD]: [1, c.hiddenSize] };
}

function valuesOf<T>(o: Ops<T>, c: ModelConfig, x: Record<string, T>): T {
  const w: Record<string, T> = {};
  for (const name of Object.keys(weightShapes(c))) w[name] = x[name]!;
  const { hidden } = transformer(o, c, w, { inputIds: x.input_ids!, positionIds: x.position_ids!, attnBias: x.attn_bias! });
  return o.squeeze(o.matmul(hidden, o.transpose(x[VALUE_HEAD]!, [1, 0])), [2]); // [B, T]
}

export class CriticModel {
  private runners = new Map<string, Promise<OrtRunner>>();
  /** One worker for the critic's sessions (values, train), holding its weights once. */
  private ortWorker: OrtWorker | null = null;
  private sent = -1;
  private version = 0;

  constructor(
    readonly config: ModelConfig,
    readonly weights: Weights,
    readonly opts: { threads?: number; providers?: string[] } = {},
  ) {
    for (const [name, shape] of Object.entries(shapes(config))) {
      const w = weights.get(name);
      if (!w || w.length !== shape.reduce((a, b) => a * b, 1)) throw new Error(`CriticModel: weight '${name}' missing or not of shape [${shape}]`);
    }
  }

  /** A critic starting from the policy's weights (copied) and a zero value head. */
  static fromPolicy(config: ModelConfig, policyWeights: Weights, opts: { threads?: number; providers?: string[] } = {}): CriticModel {
    const w: Weights = new Map();
    for (const [k, v] of policyWeights) {
      const c = allocWeight(v.length);
      c.set(v);
      w.set(k, c);
    }
    w.set(VALUE_HEAD, allocWeight(config.hiddenSize));
    return new CriticModel(config, w, opts);
  }

  private specs(): InputSpec[] {
    const base = scoreInputSpecs(this.config).filter((s) => s.name !== 'targets');
    return [...base, { name: VALUE_HEAD, dtype: 'float32', shape: [1, this.config.hiddenSize] }];
  }

  private feedsOfWeights(): Record<string, HostTensor> {
    const f: Record<string, HostTensor> = {};
    for (const [name, shape] of Object.entries(shapes(this.config))) f[name] = { dtype: 'float32', shape, data: this.weights.get(name)! };
    return f;
  }

  private async run(key: string, build: () => ReturnType<typeof traceGraph>, feeds: Record<string, HostTensor>): Promise<Record<string, HostTensor>> {
    let r = this.runners.get(key);
    if (!r) {
      this.ortWorker ??= OrtWorker.create();
      r = OrtRunner.create(build(), { threads: this.opts.threads, providers: this.opts.providers, worker: this.ortWorker });
      this.runners.set(key, r);
    }
    const runner = await r;
    if (this.sent !== this.version) {
      // A staging buffer is kept for the updates after the first send (see OrtWorker.setPersistentFeeds).
      runner.setPersistentFeeds(this.feedsOfWeights(), this.sent < 0 ? { keepStaging: new Set() } : undefined);
      this.sent = this.version;
    }
    const { targets: _t, ...rest } = feeds;
    void _t;
    return runner.run(rest);
  }

  /** Per-position values [B, T] of a packed batch (position t has read tokens 0..t). */
  async values(batch: PackedBatch): Promise<Float32Array> {
    const out = await this.run('values', () => traceGraph(this.specs(), (o, x) => ({ values: valuesOf(o, this.config, x) })), batchFeeds(batch));
    return out.values!.data as Float32Array;
  }

  /** Loss, metrics and gradients of every critic weight for one micro-batch. */
  async trainStep(batch: PackedBatch, loss: { key: string; program: CriticLoss; inputs: string[] }, mask: Float32Array, feeds: Record<string, Float32Array>) {
    const names = Object.keys(shapes(this.config));
    const specs: InputSpec[] = [
      ...this.specs(),
      { name: 'value_mask', dtype: 'float32', shape: ['batch', 'seq'] },
      ...loss.inputs.map((n) => ({ name: n, dtype: 'float32' as const, shape: ['batch', 'seq'] })),
    ];
    const build = () =>
      withGradients(
        traceGraph(specs, (o, x) => {
          const extra: Record<string, (typeof x)[string]> = {};
          for (const n of loss.inputs) extra[n] = x[n]!;
          return loss.program(o, { ...extra, values: valuesOf(o, this.config, x), mask: x.value_mask! });
        }),
        'loss',
        names,
      );
    const shape = [batch.batch, batch.length];
    const all: Record<string, HostTensor> = { ...batchFeeds(batch), value_mask: { dtype: 'float32', shape, data: mask } };
    for (const [k, v] of Object.entries(feeds)) all[k] = { dtype: 'float32', shape, data: v };
    const out = await this.run(`train:${loss.key}`, build, all);
    const grads: Weights = new Map();
    const metrics: Record<string, number> = {};
    for (const [k, v] of Object.entries(out)) {
      if (k.startsWith('grad.')) grads.set(k.slice(5), v.data as Float32Array);
      else if (v.shape.length === 0) metrics[k] = Number(v.data[0]);
    }
    return { loss: metrics.loss!, metrics, grads };
  }

  /** Call after changing `weights` in place (an optimizer step). */
  markWeightsUpdated(): void {
    this.version++;
  }

  save(dir: string): void {
    writeSafetensors(`${dir}/critic.safetensors`, new Map([...this.weights].map(([k, v]) => [k, { shape: shapes(this.config)[k]!, data: v }])));
  }

  load(dir: string): void {
    const t = readSafetensors(`${dir}/critic.safetensors`);
    for (const [k, w] of this.weights) {
      const v = t.get(k);
      if (!v || v.data.length !== w.length) throw new Error(`${dir}/critic.safetensors: tensor '${k}' missing or of the wrong size`);
      w.set(v.data);
    }
    this.markWeightsUpdated();
  }

  async dispose(): Promise<void> {
    for (const r of this.runners.values()) await (await r).dispose();
    this.runners.clear();
    await this.ortWorker?.dispose();
    this.ortWorker = null;
  }
}

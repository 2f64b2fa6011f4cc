// One file to add a thing: each fixture in ./fixtures/plugins/ adds an advantage estimator, a policy
// loss, a tool-call format or a task kind in one file; a config's `plugins:` loads it (asked for like
// an MCP server), validation accepts its names and its own options (and refuses them, naming the
// key, where they do nothing), and a training run uses all four. README "Write your own …" shows
// the same files.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, validateConfig } from '../../../engine/config/experiment';
import { setConsentAsker, type ConsentRequest } from '../../../engine/env/consent';
import { formatByName } from '../../../engine/env/formats';
import { decoderFor, openTaskSession } from '../../../engine/run/open';
import { runExperiment } from '../../../engine/run/runner';
import { JsonlSink, readMetricsJsonl, teeSink } from '../../../engine/run/sinks';
import type { SinkPort } from '../../../engine/train/loop';
import { policyLoss } from '../../../engine/rl/policy-losses';
import { tokenSignals } from '../../../engine/rl/token-signals';
import { openConfigEnvironment } from '../../../engine/interop/environment';
import { verlMapping } from '../../../engine/interop/verl-export';
import { signalSettings } from '../../../engine/run/store-sink';
import { advantagePort } from '../../../engine/train/advantage';
import type { Episode } from '../../../engine/train/episode';

const fixtures = join(__dirname, 'fixtures', 'plugins');
const PLUGINS = ['median-estimator.ts', 'capped-loss.ts', 'call-format.ts', 'arith-task.ts'].map((f) => join(fixtures, f));
const work = mkdtempSync(join(tmpdir(), 'arbor-plugins-'));
const home = mkdtempSync(join(tmpdir(), 'arbor-plugins-home-'));
const savedHome = process.env.ARBOR_HOME;
const asked: ConsentRequest[] = [];

beforeAll(() => {
  process.env.ARBOR_HOME = home; // approvals.json of this test only
  setConsentAsker(async (req) => {
    asked.push(req);
    return true;
  });
});
afterAll(() => {
  setConsentAsker(null);
  if (savedHome === undefined) delete process.env.ARBOR_HOME;
  else process.env.ARBOR_HOME = savedHome;
});

let n = 0;
/** A config file in its own folder naming the plugins by path. */
function configFile(body: Record<string, unknown>, plugins = PLUGINS): string {
  const f = join(work, `c${n++}.json`);
  writeFileSync(f, JSON.stringify({ plugins, model: { init: 'tiny' }, ...body }));
  return f;
}
async function refusal(body: Record<string, unknown>): Promise<ConfigError['issues']> {
  try {
    await loadConfig(configFile(body));
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).issues;
  }
  throw new Error('config was accepted');
}

describe('plugins: one file adds an estimator, a policy loss, a format, a task kind', () => {
  it('loads the files named by plugins: after asking for them as plugins (each once per process)', async () => {
    const { cfg } = await loadConfig(configFile({ algorithm: { adv_estimator: 'median_baseline' } }));
    expect(cfg.plugins).toEqual(PLUGINS);
    expect(asked).toHaveLength(1);
    expect(asked[0]!.items.map((i) => [i.kind, i.label])).toEqual(PLUGINS.map((p) => ['plugin', p]));
    await loadConfig(configFile({}));
    expect(asked).toHaveLength(1); // already loaded: not asked again
  });

  it('refuses a missing plugin file and an unloaded one, naming plugins[i]', async () => {
    expect((await refusal({ plugins: ['nope.ts'] } as never)).map((i) => i.field)).toEqual(['plugins[0]']);
    const f = configFile({}, [join(work, 'absent.ts')]);
    await expect(loadConfig(f)).rejects.toThrow(/plugins\[0\]: file not found: .*absent\.ts/);
    const other = join(work, 'other-plugin.ts');
    writeFileSync(other, 'export {};\n');
    expect(() => validateConfig({ plugins: [other], model: { init: 'tiny' } })).toThrow(/plugins\[0\]: .*other-plugin\.ts is not loaded/);
  });

  it('a refused plugin is not imported', async () => {
    const f = join(work, 'refused-plugin.ts');
    writeFileSync(f, "throw new Error('imported');\n");
    setConsentAsker(async () => false);
    try {
      await expect(loadConfig(configFile({}, [f]))).rejects.toThrow(/not approved, nothing was started[\s\S]*plugin .*refused-plugin\.ts/);
    } finally {
      setConsentAsker(async () => true);
    }
    await expect(loadConfig(configFile({}, [f]))).rejects.toThrow(/plugins\[0\]: .*refused-plugin\.ts failed to load: imported/);
  });

  it('estimator: its options are algorithm.median_baseline, refused unless chosen; it computes the advantages', async () => {
    const { cfg } = await loadConfig(configFile({ algorithm: { adv_estimator: 'median_baseline', median_baseline: { scale: 2 } } }));
    expect(cfg.algorithm).toMatchObject({ adv_estimator: 'median_baseline', median_baseline: { scale: 2 } });
    expect(await refusal({ algorithm: { adv_estimator: 'median_baseline', median_baseline: { scale: 2, shift: 1 } } })).toEqual([
      { field: 'algorithm.median_baseline.shift', message: 'unknown field "shift"' },
    ]);
    expect((await refusal({ algorithm: { median_baseline: { scale: 2 } } }))[0]!.field).toBe('algorithm.median_baseline');
    expect((await refusal({ algorithm: { adv_estimator: 'mean_baseline' } }))[0]!.message).toMatch(/allowed values: .*"gigpo", "median_baseline"/);
    const mask = new Float32Array([0, 1, 1]);
    const eps = [0, 1, 1, 3].map((reward, i) => ({ reward, group: 0, sample: i, lossMask: mask, tokens: [1, 2, 3] }) as unknown as Episode);
    const r = advantagePort(cfg).compute({ episodes: eps, oldLogprobs: new Map() });
    expect(eps.map((e) => Array.from(r.advantages.get(e)!))).toEqual([
      [0, -2, -2],
      [0, 0, 0],
      [0, 0, 0],
      [0, 4, 4],
    ]);
  });

  it('policy loss: algorithm.capped_pg.max_ratio is in the loss (its key) and refused under another loss', async () => {
    const { cfg } = await loadConfig(configFile({ algorithm: { policy_loss: 'capped_pg', capped_pg: { max_ratio: 3 } } }));
    expect(policyLoss(cfg).key).toMatch(/^capped_pg:3:/);
    expect((await refusal({ algorithm: { capped_pg: { max_ratio: 3 } } }))[0]).toMatchObject({
      field: 'algorithm.capped_pg',
      message: expect.stringMatching(/has no effect/),
    });
    expect((await refusal({ algorithm: { policy_loss: 'capped_pg', capped_pg: { max_ratio: 1 } } }))[0]!.field).toBe('algorithm.capped_pg.max_ratio');
  });

  it('estimator and loss get what a built-in gets: the heat map marks the loss’s own clip, and each has its verl row', async () => {
    const { cfg } = await loadConfig(configFile({ algorithm: { adv_estimator: 'median_baseline', policy_loss: 'capped_pg', capped_pg: { max_ratio: 2 } } }));
    const ep = { mask: [1, 1, 1, 0], advantages: [1, -1, 1, 0], oldLogprobs: [0, 0, 0, 0], logprobs: [1, 1, 0.5, 3] };
    const [s] = tokenSignals([ep], cfg);
    // e^1 > 2: the cap cut the gradient, +1 where A > 0 and 2 where A < 0; e^0.5 < 2 not cut; off the mask nothing.
    expect(Array.from(s!.clipped)).toEqual([1, 2, 0, 0]);
    expect(Array.from(s!.ratio).map((r) => +r.toFixed(4))).toEqual([2.7183, 2.7183, 1.6487, 0]);
    expect(signalSettings(cfg)).toMatchObject({ policyLoss: 'capped_pg', clipLow: 1, clipHigh: 1, dualClip: 2 });
    const rows = verlMapping(cfg, { modelPath: '/m', promptTokens: 16, toolFormat: 'search-r1' }).mapping;
    expect(rows.find((r) => r.arbor === 'algorithm.adv_estimator')).toMatchObject({ verl: ['algorithm.adv_estimator=median_baseline'] });
    expect(rows.find((r) => r.arbor === 'algorithm.policy_loss')).toMatchObject({ verl: ['actor_rollout_ref.actor.policy_loss.loss_mode=capped_pg'] });
  });

  it('format: environment.format "call" parses calls and answers, writes what it parses', async () => {
    const { cfg } = await loadConfig(configFile({ environment: { format: 'call' } }));
    expect(cfg.environment.format).toBe('call');
    const f = formatByName('call', { tools: [{ name: 'calculator', description: '', parameters: {} }] });
    const text = f.writeCalls([{ name: 'calculator', args: { expression: '2 + 3' } }]);
    expect(f.parse(text)).toEqual({ calls: [{ name: 'calculator', args: { expression: '2 + 3' } }], errors: [] });
    expect(f.parse(f.writeAnswer('5'))).toEqual({ calls: [], answer: '5', errors: [] });
    expect(f.parse('<call>calculator {"expression": "1"')).toMatchObject({ errors: [expect.stringMatching(/missing closing tag <\/call>/)] });
  });

  it('task kind: task.kind "arith" with its own task.arith options, refused with another kind', async () => {
    const { cfg } = await loadConfig(configFile({ task: { kind: 'arith', arith: { count: 10 } }, environment: { format: 'call' } }));
    expect(cfg.task).toMatchObject({ kind: 'arith', arith: { count: 10, max: 20 } });
    expect((await refusal({ task: { arith: { count: 10 } } }))[0]).toMatchObject({
      field: 'task.arith',
      message: expect.stringMatching(/has no effect unless task\.kind is "arith"/),
    });
    expect((await refusal({ task: { kind: 'arith', arith: { count: 2 } } }))[0]!.field).toBe('task.arith.count');
  });

  it('task kind: its own tools are served outside a run, as a built-in kind’s (arbor mcp serve, verl)', async () => {
    const loaded = await loadConfig(configFile({ task: { kind: 'arith' }, environment: { format: 'call' } }));
    const env = await openConfigEnvironment(loaded);
    try {
      expect(env.tools.map((t) => t.name)).toEqual(['calculator']);
      expect(env.describe).toContain('the calculator');
      expect(env.format.name).toBe('call');
    } finally {
      await env.close();
    }
  });

  it('a training run uses all four: arith tasks in the call format, median_baseline advantages, the capped_pg loss', async () => {
    const loaded = await loadConfig(
      configFile({
        name: 'plugins',
        task: { kind: 'arith', arith: { count: 10, max: 9 } },
        environment: { format: 'call' },
        algorithm: { adv_estimator: 'median_baseline', policy_loss: 'capped_pg', capped_pg: { max_ratio: 2 } },
        model: { init: 'tiny', hidden_size: 32, layers: 1 },
        steps: 1,
        rollout: { prompts_per_step: 2, n: 2, max_turns: 2 }, // max_new_tokens and max_total_length sized from the task
        eval: { every: 0, n_questions: 2 },
        checkpoint: { every: 1, keep_best: false },
      }),
    );
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-plugins-run-'));
    const { cfg } = loaded;
    const session = await openTaskSession(loaded);
    const texts: string[] = [];
    const decode = decoderFor(cfg, () => session);
    const episodes: SinkPort = {
      metrics: () => undefined,
      truncateAfter: () => undefined,
      trajectories: (_step, eps) => void texts.push(...eps.map((e) => decode(Array.from(e.tokens)))),
    };
    try {
      const r = await runExperiment(cfg, { runDir, session, sink: teeSink(new JsonlSink(runDir), episodes) });
      expect(r.rl!.lastCheckpoint!.step).toBe(1);
    } finally {
      await session.close();
    }
    const row = readMetricsJsonl(join(runDir, 'metrics.jsonl')).find((m) => m.step === 1)!;
    expect(row.values).toHaveProperty('actor/capped_fraction'); // the plugin loss's own metric
    expect(texts).toHaveLength(4); // 2 prompts × 2 samples of the arith kit, in the call format's instruction
    for (const t of texts) expect(t).toMatch(/call a tool with <call>name \{"arg": value\}<\/call> \(calculator\)[\s\S]*what is \d plus \d \?/);
  }, 240_000);
});

describe('README "Write your own estimator, policy loss, tool-call format or task kind"', () => {
  const readme = readFileSync(join(__dirname, '..', '..', '..', 'README.md'), 'utf8');
  it.each(['median-estimator.ts', 'capped-loss.ts', 'call-format.ts', 'arith-task.ts'])('shows %s as it is', (f) => {
    expect(readme).toContain('```ts\n' + readFileSync(join(fixtures, f), 'utf8') + '```\n');
  });
});

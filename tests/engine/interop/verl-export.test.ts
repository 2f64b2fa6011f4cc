/**
 * `arbor export verl` on a finished multi-hop run: the parquet files read back by an independent
 * reader (hyparquet) with verl's agent-loop fields and types; the tool configs parse (YAML); the
 * launch script passes `bash -n`; the Python modules compile, the reward module returns the reward
 * Arbor recorded for stored trajectories, and the tool class reaches `arbor mcp serve` with the
 * sample's task.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { hermesFormat, searchR1Format } from '../../../engine/env/formats';
import { scoreSolution } from '../../../engine/interop/environment';
import { verlMapping } from '../../../engine/interop/verl-export';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';
import { validateConfig } from '../../../engine/config/experiment';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const BIN = join(ROOT, 'bin/arbor.mjs');
const hasPython = spawnSync('python3', ['--version']).status === 0;

let home: string;
let out: string;
let runId: string;
const arbor = (...args: string[]) =>
  spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 240_000 });

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), 'arbor-verl-home-'));
  const dir = mkdtempSync(join(tmpdir(), 'arbor-verl-'));
  out = join(dir, 'verl');
  writeFileSync(
    join(dir, 'c.yaml'),
    [
      'name: verl-src',
      'model: { init: tiny }',
      'steps: 1',
      'rollout: { prompts_per_step: 2, n: 2, max_turns: 3, max_new_tokens: 12 }',
      'algorithm: { kl_coef: 0.01, clip_ratio_high: 0.3 }',
      'eval: { every: 0, n_questions: 6 }',
      'checkpoint: { every: 1, keep: 1 }',
    ].join('\n'),
  );
  const t = arbor('train', join(dir, 'c.yaml'), '--json');
  expect(t.status, t.stderr).toBe(0);
  runId = (JSON.parse(t.stdout.trim().split('\n').pop()!) as { run: string }).run;
  const e = arbor('export', 'verl', runId, out, '--json');
  expect(e.status, e.stderr).toBe(0);
}, 240_000);

const pq = (f: string) => {
  const buf = readFileSync(join(out, f));
  return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
};

describe('arbor export verl', () => {
  it('writes verl agent-loop parquet read back by hyparquet with the fields and types verl expects', async () => {
    const file = pq('data/train.parquet');
    const schema = parquetMetadata(file).schema.map((s) => [s.name, s.type ?? null, s.converted_type ?? null, s.repetition_type ?? null]);
    // prompt: list<struct<content: string, role: string>>
    expect(schema).toEqual(
      expect.arrayContaining([
        ['data_source', 'BYTE_ARRAY', 'UTF8', 'REQUIRED'],
        ['agent_name', 'BYTE_ARRAY', 'UTF8', 'REQUIRED'],
        ['ability', 'BYTE_ARRAY', 'UTF8', 'REQUIRED'],
        ['prompt', null, 'LIST', 'OPTIONAL'],
        ['content', 'BYTE_ARRAY', 'UTF8', 'OPTIONAL'],
        ['role', 'BYTE_ARRAY', 'UTF8', 'OPTIONAL'],
        ['reward_model', null, null, 'OPTIONAL'],
        ['ground_truth', null, null, 'OPTIONAL'],
        ['target', null, 'LIST', 'OPTIONAL'],
        ['extra_info', null, null, 'OPTIONAL'],
        ['index', 'INT64', null, 'OPTIONAL'],
        ['need_tools_kwargs', 'BOOLEAN', null, 'OPTIONAL'],
        ['tools_kwargs', null, null, 'OPTIONAL'],
      ]),
    );
    const rows = (await parquetReadObjects({ file })) as Record<string, any>[];
    expect(rows.length).toBe(64 * 40);
    const r = rows[7]!;
    expect(r.data_source).toBe('arbor/multihop');
    expect(r.agent_name).toBe('tool_agent');
    expect(r.prompt).toEqual([{ role: 'user', content: expect.stringMatching(/\?$/) }]);
    expect(r.reward_model.style).toBe('rule');
    expect(r.reward_model.ground_truth.target.length).toBeGreaterThan(0);
    expect(r.extra_info).toMatchObject({ split: 'train', index: 7n, need_tools_kwargs: true, interaction_kwargs: { query: r.prompt[0].content } });
    expect(r.extra_info.tools_kwargs.search.create_kwargs.task).toBe(r.extra_info.task_id);
    expect(r.extra_info.task_id).toMatch(/^w\d+-q\d+$/);
    const val = (await parquetReadObjects({ file: pq('data/val.parquet') })) as Record<string, any>[];
    expect(val.length).toBe(6);
    expect(val.every((v) => v.extra_info.split === 'test' && /^w1001-q/.test(v.extra_info.task_id))).toBe(true);
  });

  it("tool configs parse as YAML/JSON in verl's layout; the launch script passes bash -n and carries the run's settings", () => {
    const tc = parseYaml(readFileSync(join(out, 'tool_config.yaml'), 'utf8')) as { tools: any[] };
    expect(tc.tools).toHaveLength(1);
    expect(tc.tools[0]).toMatchObject({
      class_name: 'arbor_tool.ArborMcpTool',
      config: { type: 'native' },
      tool_schema: { type: 'function', function: { name: 'search', parameters: { type: 'object', required: ['query'] } } },
    });
    const mc = parseYaml(readFileSync(join(out, 'tool_config.mcp.yaml'), 'utf8')) as { tools: any[] };
    expect(mc.tools[0]).toMatchObject({ config: { type: 'mcp' }, mcp: { mcp_servers_config_path: './mcp_servers.json', tool_selected_list: ['search'] } });
    const servers = JSON.parse(readFileSync(join(out, 'mcp_servers.json'), 'utf8'));
    expect(servers.mcpServers.arbor.args).toEqual(expect.arrayContaining(['mcp', 'serve', '--config', 'arbor-experiment.json']));
    const sh = readFileSync(join(out, 'run_verl.sh'), 'utf8');
    const bash = spawnSync('bash', ['-n', join(out, 'run_verl.sh')], { encoding: 'utf8' });
    expect(bash.status, bash.stderr).toBe(0);
    const store = new Store(openDatabase(join(home, 'arbor.db')));
    const ck = store.checkpoints(runId).at(-1)!.path;
    store.db.close();
    for (const o of [
      `actor_rollout_ref.model.path=${ck}`,
      'algorithm.adv_estimator=grpo',
      'actor_rollout_ref.rollout.n=2',
      'actor_rollout_ref.actor.clip_ratio_high=0.3',
      'actor_rollout_ref.actor.use_kl_loss=true',
      'actor_rollout_ref.actor.kl_loss_coef=0.01',
      'actor_rollout_ref.actor.kl_loss_type=low_var_kl',
      'actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3',
      'actor_rollout_ref.actor.optim.lr=0.001',
      'actor_rollout_ref.rollout.multi_turn.format=hermes',
      'custom_reward_function.name=compute_score',
      'data.return_raw_chat=True',
    ])
      expect(sh).toContain(`    ${/^[\w.=/-]+$/.test(o) ? o : `'${o}'`} \\`);
    // batch sizes are computed by the script from the GPUs on its command line
    expect(sh).toContain('"data.train_batch_size=$TRAIN_BS"');
    const readme = readFileSync(join(out, 'README.md'), 'utf8');
    expect(readme).toContain('| `algorithm.value_coef` |');
    expect(readme).toMatch(/\| `sft\.\*` \|.*SFT warm start already happened/);
  });

  it('maps every Arbor setting: estimators, KL placement, LoRA, and lists what has no verl equivalent', () => {
    const cfg = validateConfig(
      {
        model: { init: 'tiny' },
        algorithm: { adv_estimator: 'drgrpo', kl_coef: 0.05, kl_in: 'reward', kl_type: 'k1', dual_clip: 3, dynamic_sampling: { enabled: true } },
        optim: { schedule: 'cosine' },
        rollout: { max_turns: 5, max_new_tokens: 40, max_total_length: 256 },
      },
      { checkFiles: false },
    );
    const { overrides, mapping } = verlMapping(cfg, { modelPath: '/ck', promptTokens: 56, toolFormat: 'search-r1' });
    expect(overrides).toEqual(
      expect.arrayContaining([
        'algorithm.adv_estimator=grpo',
        'algorithm.norm_adv_by_std_in_grpo=false',
        'algorithm.use_kl_in_reward=true',
        'algorithm.kl_ctrl.kl_coef=0.05',
        'algorithm.kl_penalty=kl',
        'actor_rollout_ref.actor.use_kl_loss=false',
        'actor_rollout_ref.actor.clip_ratio_c=3',
        'actor_rollout_ref.actor.optim.warmup_style=cosine',
        'data.max_prompt_length=56',
        'data.max_response_length=200',
        'actor_rollout_ref.model.lora_rank=0',
      ]),
    );
    expect(mapping.find((m) => m.arbor.startsWith('algorithm.dynamic_sampling'))!.note).toMatch(/ENABLED in Arbor but not in verl\.trainer\.main_ppo/);
    const withLora = validateConfig({ model: { init: 'tiny' } }, { checkFiles: false }) as unknown as Record<string, any>;
    withLora.model.lora = { rank: 8, alpha: 16, dropout: 0, target_modules: ['q_proj', 'v_proj'] };
    const l = verlMapping(withLora as never, { modelPath: '/ck', promptTokens: 10, toolFormat: 'hermes' }).overrides;
    expect(l).toEqual(
      expect.arrayContaining([
        'actor_rollout_ref.model.lora_rank=8',
        'actor_rollout_ref.model.lora_alpha=16',
        'actor_rollout_ref.model.target_modules=[q_proj,v_proj]',
      ]),
    );
    // a key the exporter does not know is listed, not dropped
    const extra = { ...cfg, algorithm: { ...cfg.algorithm, brand_new_knob: 1 } };
    expect(
      verlMapping(extra as never, { modelPath: '/ck', promptTokens: 1, toolFormat: 'hermes' }).mapping.find((m) => m.arbor === 'algorithm.brand_new_knob')!
        .note,
    ).toBe('not mapped by this exporter');
  });

  it("scores a decoded response with the environment's reward (Search-R1 and Hermes observations split out)", async () => {
    const em = async () => ({ reward: 0, components: {} });
    const s = await scoreSolution(
      { format: searchR1Format(), reward: em },
      { solution: '<search> a </search> <information> a b </information> <answer> Paris </answer>', golds: ['paris'] },
    );
    expect(s.answer).toBe('Paris');
    const h = await scoreSolution(
      { format: hermesFormat(), reward: async (x) => ({ reward: x.toolCalls + x.retrieved.length, components: {} }) },
      { solution: '<tool_call>{"name":"f","arguments":{}}</tool_call> <tool_response> ok </tool_response> <answer> x </answer>', golds: ['x'] },
    );
    expect(h).toMatchObject({ answer: 'x', reward: 2 });
  });

  it.skipIf(!hasPython)(
    'the Python modules compile; reward.py returns the reward Arbor recorded for stored trajectories',
    () => {
      const c = spawnSync('python3', ['-m', 'py_compile', join(out, 'reward.py'), join(out, 'arbor_tool.py')], { encoding: 'utf8' });
      expect(c.status, c.stderr).toBe(0);
      // stored trajectories of the run, plus scripted-expert episodes (some with a wrong answer) written by `arbor rollout`
      const store = new Store(openDatabase(join(home, 'arbor.db')));
      const samples: { solution: string; golds: string[]; reward: number; task?: string }[] = [];
      for (const t of store.searchTrajectories({ runId, limit: 100 })) {
        const full = store.getTrajectory(t.id) as unknown as {
          task: string;
          reward: number;
          outcomeData: { golds: string[] };
          turnsData: { role: string; text: string }[];
        };
        if (!full.turnsData.length) continue;
        samples.push({
          solution: full.turnsData
            .filter((u) => u.role !== 'env')
            .map((u) => u.text)
            .join(' '),
          golds: full.outcomeData.golds,
          reward: full.reward,
          task: full.task,
        });
      }
      store.db.close();
      expect(samples.length).toBeGreaterThan(0);
      const jsonl = join(out, 'expert.jsonl');
      const ro = arbor(
        'rollout',
        '--task',
        'multihop',
        '--policy',
        'expert',
        '--mistake-rate',
        '0.6',
        '--n',
        '2',
        '--questions',
        '8',
        '--out',
        jsonl,
        '--json',
      );
      expect(ro.status, ro.stderr).toBe(0);
      for (const line of readFileSync(jsonl, 'utf8').trim().split('\n')) {
        const t = JSON.parse(line) as { turns: { text: string }[]; outcome: { reward: number }; meta: { answers: string[] } };
        samples.push({ solution: t.turns.map((u) => u.text).join(' '), golds: t.meta.answers, reward: t.outcome.reward });
      }
      // one correct answer turned wrong, so both rewards are checked (a row that is not one of the
      // experiment's tasks: scored from its ground truth)
      const right = samples.find((x) => x.reward === 1)!;
      expect(right).toBeDefined();
      samples.push({ ...right, task: undefined, golds: ['nobody at all'], reward: 0 });
      writeFileSync(join(out, 'samples.json'), JSON.stringify(samples));
      const script = `import json, sys\nsys.path.insert(0, ${JSON.stringify(out)})\nimport reward\nsamples = json.load(open(${JSON.stringify(join(out, 'samples.json'))}))\nprint(json.dumps([reward.compute_score("arbor/multihop", s["solution"], {"target": s["golds"]}, {"split": "train", **({"task_id": s["task"]} if s.get("task") else {})}) for s in samples]))\n`;
      const py = spawnSync('python3', ['-c', script], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 120_000 });
      expect(py.status, py.stderr).toBe(0);
      const scores = JSON.parse(py.stdout.trim().split('\n').pop()!) as { score: number; exact_match: number }[];
      expect(scores.map((s) => s.score)).toEqual(samples.map((s) => s.reward));
      expect(new Set(scores.map((s) => s.score))).toEqual(new Set([0, 1]));
    },
    180_000,
  );

  describe.skipIf(!hasPython)('the verl tool class against arbor mcp serve', () => {
    let proc: ChildProcess;
    let url: string;
    beforeAll(async () => {
      proc = spawn(process.execPath, [BIN, 'mcp', 'serve', '--config', join(out, 'arbor-experiment.json'), '--http', '--token', 'tok-123456'], {
        env: { ...process.env, ARBOR_HOME: home },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      url = await new Promise<string>((resolve, reject) => {
        let s = '';
        let err = '';
        proc.stderr!.on('data', (d) => (err += d));
        proc.stdout!.on('data', (d) => {
          s += d;
          const m = /http:\/\/127\.0\.0\.1:\d+\/mcp/.exec(s);
          if (m) resolve(m[0]);
        });
        proc.once('exit', (code) => reject(new Error(`exited ${code}: ${err}`)));
      });
    }, 60_000);
    afterAll(() => void proc?.kill('SIGTERM'));

    it("searches the world of the sample's task (create_kwargs → _meta) and reports errors as text", async () => {
      const rows = (await parquetReadObjects({ file: pq('data/val.parquet') })) as Record<string, any>[];
      const task = rows[0]!.extra_info.tools_kwargs.search.create_kwargs.task as string;
      const script = [
        'import asyncio, json, sys',
        `sys.path.insert(0, ${JSON.stringify(out)})`,
        'from arbor_tool import ArborMcpTool',
        `t = ArborMcpTool({"timeout": 30}, {"type": "function", "function": {"name": "search"}})`,
        'async def main():',
        `    iid = await t.create(create_kwargs={"task": ${JSON.stringify(task)}})`,
        '    ok = await t.execute(iid, {"query": "city"})',
        '    none = await t.create(create_kwargs={})',
        '    bad = await t.execute(none, {"query": "city"})',
        '    print(json.dumps([ok[0], ok[2], bad[0], bad[2]]))',
        'asyncio.run(main())',
      ].join('\n');
      const py = spawnSync('python3', ['-c', script], {
        encoding: 'utf8',
        env: { ...process.env, ARBOR_MCP_URL: url, ARBOR_MCP_TOKEN: 'tok-123456' },
        timeout: 60_000,
      });
      expect(py.status, py.stderr).toBe(0);
      const [ok, okm, bad, badm] = JSON.parse(py.stdout.trim()) as [string, { is_error: boolean }, string, { is_error: boolean }];
      expect(okm.is_error).toBe(false);
      expect(ok).toMatch(/is a city in/);
      expect(badm.is_error).toBe(true);
      expect(bad).toMatch(/needs the question it serves/);
    }, 60_000);
  });
});

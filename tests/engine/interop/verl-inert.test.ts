/**
 * The files `arbor export verl` writes are inert, and run_verl.sh sizes verl's batches for the GPUs
 * it is given.
 *
 *  - Hostile strings (quotes, $(…), backticks, ${…}, newlines) in the run name, the source, the
 *    model path and the arbor command: run_verl.sh passes `bash -n` and, run with a stub `python3`
 *    and a stub arbor first on PATH, creates none of the marker files the strings try to create
 *    and passes each value through as one literal word; reward.py and arbor_tool.py parse as
 *    Python and ARBOR_CMD_DEFAULT is the exact command; the tool configs parse as YAML; the README
 *    keeps the name on one line. The MCP token reaches arbor mcp serve through its environment,
 *    not its argv.
 *  - verl's batch-size checks, read from its source (volcengine/verl, Jan 2026), applied to the
 *    overrides the script passes for trainer.n_gpus_per_node ∈ {1,2,4,8} × trainer.nnodes ∈ {1,2}.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { validateConfig, type ExperimentConfig } from '../../../engine/config/experiment';
import { batchOverrides, exportVerl, hv, type BatchPlan } from '../../../engine/interop/verl-export';
import { peftAdapterConfig } from '../../../engine/model/peft';

const PY = '/usr/bin/python3';

/** A folder with a stub python3 (records its argv, NUL-separated) and a stub arbor (records argv and whether it got the token). */
function stubs(root: string) {
  const bin = join(root, 'bin');
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'python3'), `#!/bin/bash\nprintf '%s\\0' "$@" > "$STUB_OUT/python-argv"\n`);
  // a directory name that would run code if the script expanded it
  const arborDir = join(root, 'a $(touch pwned-dir) `touch pwned-dir2` b');
  mkdirSync(arborDir, { recursive: true });
  const arbor = join(arborDir, 'arbor');
  writeFileSync(
    arbor,
    [
      '#!/bin/bash',
      // the approval step run_verl.sh runs first on its terminal (when ARBOR_YES is not 1)
      `if [ "$1" = verl-reward ]; then printf '%s\\0' "$@" > "$STUB_OUT/arbor-check-argv"; exit "\${STUB_CHECK_EXIT:-0}"; fi`,
      `printf '%s\\0' "$@" > "$STUB_OUT/arbor-argv"`,
      `printf '%s|%s' "\${ARBOR_MCP_TOKEN:-}" "\${ARBOR_YES:-}" > "$STUB_OUT/arbor-token"`,
      'echo http://127.0.0.1:1/mcp',
      'exec sleep 30',
      '',
    ].join('\n'),
  );
  chmodSync(join(bin, 'python3'), 0o755);
  chmodSync(arbor, 0o755);
  return { bin, arbor };
}

/** Run an exported run_verl.sh with the stubs (from a fresh folder); resolves with its exit code, the argv python3 got and its stderr. */
function runScript(dir: string, bin: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number; argv: string[]; stderr: string }> {
  const out = mkdtempSync(join(tmpdir(), 'arbor-stub-out-'));
  return new Promise((resolve, reject) => {
    const p = spawn('bash', [join(dir, 'run_verl.sh'), ...args], {
      cwd: out,
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, STUB_OUT: out, ARBOR_MCP_PORT: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    p.stderr.on('data', (d) => (stderr += d));
    p.on('error', reject);
    p.on('close', (code) => {
      const f = join(out, 'python-argv');
      const argv = existsSync(f) ? readFileSync(f, 'utf8').split('\0').slice(0, -1) : [];
      resolve({ code: code ?? -1, argv, stderr });
    });
  });
}

const overridesOf = (argv: string[]) => new Map(argv.filter((a) => /^[\w.]+=/.test(a)).map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]));

function config(raw: Record<string, unknown>): ExperimentConfig {
  return validateConfig({ model: { init: 'tiny' }, ...raw }, { checkFiles: false });
}

describe('a LoRA run', () => {
  it('hands verl the base model and the adapter with its rank, alpha and target modules', async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-lora-'));
    const adapter = join(root, 'checkpoint-step-3');
    mkdirSync(adapter);
    writeFileSync(
      join(adapter, 'adapter_config.json'),
      JSON.stringify(peftAdapterConfig({ rank: 8, alpha: 16, dropout: 0, targets: ['q_proj', 'v_proj'] }, '/models/base')),
    );
    const dir = join(root, 'out');
    const r = await exportVerl(
      { cfg: config({ rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 12 } }), modelPath: adapter, source: 'run r' },
      dir,
      {
        arborCmd: ['arbor'],
      },
    );
    const o = overridesOf(r.overrides.map((x) => x.replace(/^'(.*)'$/, '$1')));
    expect(o.get('actor_rollout_ref.model.path')).toBe('/models/base');
    expect(o.get('actor_rollout_ref.model.lora_adapter_path')).toBe(adapter);
    expect(o.get('actor_rollout_ref.model.lora_rank')).toBe('8');
    expect(o.get('actor_rollout_ref.model.lora_alpha')).toBe('16');
    expect(o.get('actor_rollout_ref.model.target_modules')).toBe('[q_proj,v_proj]');
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toMatch(
      /PEFT LoRA adapter, `[^`]*checkpoint-step-3` \(rank 8, alpha 16, q_proj, v_proj\), on the base model `\/models\/base`/,
    );
    // an adapter without its base cannot be handed over: the error says what to do
    writeFileSync(join(adapter, 'adapter_config.json'), JSON.stringify(peftAdapterConfig({ rank: 8, alpha: 16, dropout: 0, targets: ['q_proj'] }, null)));
    await expect(exportVerl({ cfg: config({}), modelPath: adapter, source: 'run r' }, join(root, 'out2'))).rejects.toThrow(
      /no base_model_name_or_path; merge the adapter/,
    );
  }, 60_000);
});

describe('exported verl files are inert', () => {
  it('hostile names: bash -n, Python parse, YAML parse, and running the script creates no marker and passes each value as one word', async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-inert-'));
    const marks = join(root, 'marks');
    mkdirSync(marks);
    const m = (k: string) => join(marks, k);
    const hostile = `evil"; touch ${m('q')}; echo " $(touch ${m('sub')}) \`touch ${m('tick')}\` \${IFS}touch${'${IFS}'}${m('ifs')} 'quote'; touch ${m('sq')}; ' \\ end\ntouch ${m('nl')}\r\n# comment"""\nprint(open('${m('py')}','w'))`;
    const cfg = config({ name: hostile, rollout: { prompts_per_step: 4, n: 2, max_turns: 2, max_new_tokens: 12 }, eval: { every: 0, n_questions: 4 } });
    const { bin, arbor } = stubs(root);
    const dir = join(root, 'out');
    const modelPath = join(root, `model '$(touch ${m('model')})' "\`touch ${m('model2')}\`"`);
    await exportVerl({ cfg, modelPath, source: `run x (${hostile}, step 1)` }, dir, { arborCmd: [arbor, `--flag=$(touch ${m('cmd')})`] });

    const sh = readFileSync(join(dir, 'run_verl.sh'), 'utf8');
    const bashN = spawnSync('bash', ['-n', join(dir, 'run_verl.sh')], { encoding: 'utf8' });
    expect(bashN.status, bashN.stderr).toBe(0);
    // comment lines stay comments: no generated line starts with the injected command
    for (const f of ['run_verl.sh', 'reward.py', 'README.md', 'tool_config.yaml', 'tool_config.mcp.yaml'])
      expect(
        readFileSync(join(dir, f), 'utf8')
          .split('\n')
          .filter((l) => /^\s*(touch|print)\b/.test(l)),
        f,
      ).toEqual([]);
    expect(sh).not.toContain('--token');

    for (const f of ['reward.py', 'arbor_tool.py']) {
      const py = spawnSync(PY, ['-c', 'import ast,sys; ast.parse(open(sys.argv[1]).read())', join(dir, f)], { encoding: 'utf8' });
      expect(py.status, `${f}: ${py.stderr}`).toBe(0);
    }
    const cmd = spawnSync(
      PY,
      [
        '-c',
        'import ast,sys,json\nt=ast.parse(open(sys.argv[1]).read())\nprint(json.dumps([ast.literal_eval(n.value) for n in t.body if isinstance(n, ast.Assign) and n.targets[0].id=="ARBOR_CMD_DEFAULT"][0]))',
        join(dir, 'reward.py'),
      ],
      { encoding: 'utf8' },
    );
    expect(cmd.status, cmd.stderr).toBe(0);
    expect(JSON.parse(cmd.stdout)).toEqual([arbor, `--flag=$(touch ${m('cmd')})`]);
    for (const f of ['tool_config.yaml', 'tool_config.mcp.yaml']) expect(() => parseYaml(readFileSync(join(dir, f), 'utf8')), f).not.toThrow();
    expect(JSON.parse(readFileSync(join(dir, 'mcp_servers.json'), 'utf8')).mcpServers.arbor.command).toBe(arbor);
    const readme = readFileSync(join(dir, 'README.md'), 'utf8');
    expect(readme.split('\n')[0]).toMatch(/^# verl export of run x \(evil/);

    // run it: the default arbor command (a path with $(…) and backticks in it) and python3 are stubs
    const r = await runScript(dir, bin, ['trainer.n_gpus_per_node=2', 'trainer.nnodes=1']);
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(marks)).toEqual([]);
    expect(readdirSync(root).filter((f) => f.startsWith('pwned'))).toEqual([]);
    const o = overridesOf(r.argv);
    expect(o.get('trainer.experiment_name')).toBe(hv(hostile));
    expect(o.get('trainer.experiment_name')).toContain(`$(touch ${m('sub')})`);
    expect(o.get('actor_rollout_ref.model.path')).toBe(hv(modelPath));
    expect(o.get('data.train_files')).toBe(join(dir, 'data/train.parquet'));
    expect(o.get('trainer.rollout_data_dir')).toBe(join(dir, 'rollouts'));
    expect(r.argv.slice(0, 2)).toEqual(['-m', 'verl.trainer.main_ppo']);
    expect(r.argv.slice(-2)).toEqual(['trainer.n_gpus_per_node=2', 'trainer.nnodes=1']);
  }, 120_000);

  it('the MCP token reaches arbor mcp serve through the environment, not argv', async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-inert-tok-'));
    const { bin, arbor } = stubs(root);
    const dir = join(root, 'out');
    await exportVerl(
      { cfg: config({ rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 12 } }), modelPath: '/m', source: 'config c.yaml' },
      dir,
      {
        arborCmd: [arbor],
      },
    );
    const out = mkdtempSync(join(tmpdir(), 'arbor-stub-out-'));
    const r = spawnSync('bash', [join(dir, 'run_verl.sh'), 'trainer.n_gpus_per_node=1'], {
      cwd: out,
      encoding: 'utf8',
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, STUB_OUT: out, ARBOR_MCP_PORT: '1', ARBOR_MCP_TOKEN: 'sekrit-token-123' },
    });
    expect(r.status, r.stderr).toBe(0);
    const argv = readFileSync(join(out, 'arbor-argv'), 'utf8').split('\0').slice(0, -1);
    expect(argv).toEqual(['mcp', 'serve', '--config', join(dir, 'arbor-experiment.json'), '--http', '--port', '1']);
    expect(argv.join(' ')).not.toContain('sekrit');
    // ARBOR_YES=1 (the test runner's): no approval step; the server got the approval and the token
    expect(existsSync(join(out, 'arbor-check-argv'))).toBe(false);
    expect(readFileSync(join(out, 'arbor-token'), 'utf8')).toBe('sekrit-token-123|1');
  }, 60_000);

  it('asks for approval on its terminal first (arbor verl-reward --check) and stops when it is refused', async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-inert-yes-'));
    const { bin, arbor } = stubs(root);
    const dir = join(root, 'out');
    await exportVerl(
      { cfg: config({ rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 12 } }), modelPath: '/m', source: 'config c.yaml' },
      dir,
      {
        arborCmd: [arbor],
      },
    );
    const run = (extra: Record<string, string>) => {
      const out = mkdtempSync(join(tmpdir(), 'arbor-stub-out-'));
      const r = spawnSync('bash', [join(dir, 'run_verl.sh'), 'trainer.n_gpus_per_node=1'], {
        cwd: out,
        encoding: 'utf8',
        env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, STUB_OUT: out, ARBOR_MCP_PORT: '1', ARBOR_YES: '', ...extra },
      });
      return { r, out };
    };
    const ok = run({});
    expect(ok.r.status, ok.r.stderr).toBe(0);
    expect(readFileSync(join(ok.out, 'arbor-check-argv'), 'utf8').split('\0').slice(0, -1)).toEqual([
      'verl-reward',
      join(dir, 'arbor-experiment.json'),
      '--check',
    ]);
    expect(readFileSync(join(ok.out, 'arbor-token'), 'utf8')).toMatch(/\|1$/);
    const refused = run({ STUB_CHECK_EXIT: '1' });
    expect(refused.r.status).not.toBe(0);
    expect(existsSync(join(refused.out, 'arbor-argv'))).toBe(false);
    expect(existsSync(join(refused.out, 'python-argv'))).toBe(false);
  }, 60_000);
});

/** verl's own rules (FSDP, no dynamic batch size, no sequence parallelism), with where each is in verl's source. */
function verlBatchErrors(o: Map<string, string>, gpus: number, uses: { ref: boolean; critic: boolean }): string[] {
  const errors: string[] = [];
  const num = (k: string) => {
    const v = o.get(k);
    if (v === undefined || !/^\d+$/.test(v)) errors.push(`${k} missing or not an integer: ${v}`);
    return Number(v);
  };
  const train = num('data.train_batch_size');
  const n = num('actor_rollout_ref.rollout.n');
  // verl/utils/config.py validate_config: real_train_batch_size % minimal_bsz (= n_gpus for FSDP)
  if ((train * n) % gpus !== 0) errors.push(`real_train_batch_size (${train * n}) must be divisible by minimal possible batch size (${gpus})`);
  const role = (prefix: string, mini: number, micro: number) => {
    // verl/workers/config/actor.py ActorConfig.validate (critic.py CriticConfig.validate alike)
    if (train < mini) errors.push(`train_batch_size (${train}) must be >= ${prefix}.ppo_mini_batch_size (${mini})`);
    // verl/workers/fsdp_workers.py (ActorRolloutRefWorker.__init__ and CriticWorker.__init__): normalisation
    const norm = Math.floor((mini * n) / gpus);
    if (!(norm > 0)) errors.push(`${prefix}: ppo_mini_batch_size ${norm} should be larger than 0 after normalization`);
    if (norm % micro !== 0) errors.push(`${prefix}: normalized ppo_mini_batch_size ${norm} should be divisible by ppo_micro_batch_size_per_gpu ${micro}`);
    if (!(Math.floor(norm / micro) > 0))
      errors.push(`${prefix}: normalized ppo_mini_batch_size ${norm} should be larger than ppo_micro_batch_size_per_gpu ${micro}`);
  };
  role('actor', num('actor_rollout_ref.actor.ppo_mini_batch_size'), num('actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu'));
  // verl/utils/config.py check_mutually_exclusive: log-prob micro-batches must be set (rollout; ref when a reference policy is used)
  num('actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu');
  if (uses.ref) num('actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu');
  if (uses.critic) role('critic', num('critic.ppo_mini_batch_size'), num('critic.ppo_micro_batch_size_per_gpu'));
  return errors;
}

const GPUS = [1, 2, 4, 8];
const NODES = [1, 2];

describe("run_verl.sh batch sizes pass verl's checks for the GPUs on its command line", () => {
  const plans: { name: string; raw: Record<string, unknown>; uses: { ref: boolean; critic: boolean } }[] = [
    // the shipped two-tool demo's sizes
    { name: '8 prompts × 8', raw: { rollout: { prompts_per_step: 8, n: 8, max_turns: 2, max_new_tokens: 12 } }, uses: { ref: false, critic: false } },
    // awkward sizes: odd n, mini- and micro-batches, a critic and a reference policy
    {
      name: '6 prompts × 5, gae, KL, 2 mini × 3 micro',
      raw: {
        rollout: { prompts_per_step: 6, n: 5, max_turns: 2, max_new_tokens: 12 },
        algorithm: { adv_estimator: 'gae', kl_coef: 0.01, mini_batches: 2, micro_batches: 3 },
      },
      uses: { ref: true, critic: true },
    },
  ];
  for (const plan of plans)
    it(`${plan.name}: every trainer.n_gpus_per_node × trainer.nnodes`, async () => {
      const root = mkdtempSync(join(tmpdir(), 'arbor-batch-'));
      const { bin, arbor } = stubs(root);
      const dir = join(root, 'out');
      await exportVerl({ cfg: config(plan.raw), modelPath: '/m', source: 'config c.yaml' }, dir, { arborCmd: [arbor] });
      const runs = await Promise.all(
        GPUS.flatMap((g) =>
          NODES.map(async (nodes) => ({ g, nodes, r: await runScript(dir, bin, [`trainer.n_gpus_per_node=${g}`, `trainer.nnodes=${nodes}`]) })),
        ),
      );
      for (const { g, nodes, r } of runs) {
        expect(r.code, r.stderr).toBe(0);
        const o = overridesOf(r.argv);
        expect(verlBatchErrors(o, g * nodes, plan.uses), `${g} GPUs × ${nodes} nodes`).toEqual([]);
      }
      // the script's bash and batchOverrides agree (the README's table comes from the latter)
      const eight = overridesOf(runs.find((x) => x.g === 8 && x.nodes === 1)!.r.argv);
      const want = batchOverrides(planOf(plan.raw), 8);
      for (const [k, v] of Object.entries(want)) expect(eight.get(k), k).toBe(String(v));
      // a batch key given on the command line is the user's: the script does not pass its own too
      const mine = await runScript(dir, bin, ['trainer.n_gpus_per_node=8', 'data.train_batch_size=64']);
      expect(mine.argv.filter((a) => a.startsWith('data.train_batch_size='))).toEqual(['data.train_batch_size=64']);
    }, 120_000);

  it('the issue’s case (8 GPUs, 4 prompts × 4, micro-batch larger than the mini-batch before) and many others pass, by the same rules', () => {
    for (const prompts of [1, 2, 3, 4, 6, 8, 12, 16, 32])
      for (const n of [1, 2, 3, 4, 5, 8, 16])
        for (const miniBatches of [1, 2, 4])
          for (const microBatches of [1, 2, 4, 8])
            for (const g of GPUS)
              for (const nodes of NODES) {
                const b: BatchPlan = { prompts, n, miniBatches, microBatches, critic: true, ref: true };
                const o = new Map(Object.entries(batchOverrides(b, g * nodes)).map(([k, v]) => [k, String(v)]));
                o.set('actor_rollout_ref.rollout.n', String(n));
                expect(verlBatchErrors(o, g * nodes, { ref: true, critic: true }), JSON.stringify({ ...b, g, nodes })).toEqual([]);
              }
  });
});

function planOf(raw: Record<string, unknown>): BatchPlan {
  const c = config(raw);
  const a = c.algorithm as unknown as Record<string, unknown>;
  return {
    prompts: c.rollout.prompts_per_step,
    n: c.rollout.n,
    miniBatches: Number(a.mini_batches ?? 1),
    microBatches: Number(a.micro_batches ?? 1),
    critic: a.adv_estimator === 'gae',
    ref: Number(a.kl_coef ?? 0) !== 0,
  };
}

/**
 * `arbor export verl <run | config> <out-dir>`: an experiment as a verl run (engine/interop/verl-export.ts),
 * added under the existing `arbor export <run>`; and `arbor verl-reward <experiment.json>`, the
 * long-lived scorer the exported reward.py talks to (JSON lines: {solution_str, ground_truth,
 * extra_info} in, {reward, components, answer} or {error} out), scoring each sample with its task's
 * own episode environment (engine/interop/environment.ts openVerlScorer).
 */
import type { Command } from 'commander';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { arborHome, openDatabase } from '../../store/db';
import { Store } from '../../store/store';
import { parseConfigText, validateLoaded, type LoadedConfig } from '../../config/experiment';

/**
 * An experiment config for its environment only (`arbor mcp serve --config`, `arbor verl-reward`):
 * validated like any config, but the model folder is not checked (an exported config's model may
 * be a PEFT adapter folder, or live only on the cluster).
 */
export function loadEnvironmentConfig(file: string, opts: { warn?: (line: string) => void } = {}): LoadedConfig {
  const full = resolve(file);
  if (!existsSync(full)) throw new Error(`config file not found: ${full}`);
  return validateLoaded(parseConfigText(readFileSync(full, 'utf8'), full), {
    baseDir: dirname(full),
    file: full,
    checkFiles: false,
    job: 'environment',
    warn: opts.warn ?? (() => undefined),
  });
}

export function register(program: Command): void {
  program
    .command('verl-reward <experiment>')
    .description(
      "score verl samples with an experiment's reward: JSON lines on stdin ({solution_str, ground_truth, extra_info}) → {reward, components} on stdout (used by an exported reward.py)",
    )
    .option(
      '--check',
      "open the experiment's environment (asking to approve the programs it runs, as any command does), say what it serves, and exit: run_verl.sh does this on its terminal before it starts anything in the background",
    )
    .action(async (file: string, o: { check?: boolean }) => {
      const { openVerlScorer, toolSuccessFromRewards } = await import('../../interop/environment');
      const scorer = await openVerlScorer(loadEnvironmentConfig(file));
      if (o.check) {
        console.log(`arbor verl-reward: ${file}: the environment opens (${scorer.describe})`);
        return scorer.close();
      }
      try {
        const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
        let n = 0;
        for await (const line of rl) {
          n++;
          if (!line.trim()) continue;
          try {
            const req = JSON.parse(line) as {
              solution_str?: unknown;
              ground_truth?: unknown;
              extra_info?: { supporting?: unknown; task_id?: unknown; question?: unknown; tool_rewards?: unknown };
            };
            if (typeof req.solution_str !== 'string') throw new Error('field "solution_str" must be a string');
            const gt = req.ground_truth;
            const golds = typeof gt === 'string' ? [gt] : Array.isArray(gt) ? gt.map(String) : null;
            if (!golds) throw new Error('field "ground_truth" must be a string or a list of strings');
            const info = req.extra_info ?? {};
            const supporting = Array.isArray(info.supporting) ? info.supporting.map(String) : undefined;
            const r = await scorer.score({
              solution: req.solution_str,
              golds,
              supporting,
              taskId: typeof info.task_id === 'string' ? info.task_id : undefined,
              question: typeof info.question === 'string' ? info.question : undefined,
              toolSuccess: toolSuccessFromRewards(info.tool_rewards),
            });
            process.stdout.write(JSON.stringify(r) + '\n');
          } catch (e) {
            process.stdout.write(JSON.stringify({ error: `line ${n}: ${(e as Error).message}` }) + '\n');
          }
        }
      } finally {
        await scorer.close();
      }
    });
}

/** Run after every command is registered: `export verl` joins `arbor export <run>`. */
export function extend(program: Command): void {
  const exp = program.commands.find((c) => c.name() === 'export');
  const parent = exp ?? program.command('export').description('export runs');
  parent
    .command('verl <source> <out-dir>')
    .description('hand a run (its last checkpoint) or an experiment config to verl: agent-loop parquet, tool config, reward module, launch script, README')
    .option('--arbor-cmd <cmd>', 'how the cluster starts arbor (default: this node and arbor.mjs)')
    .option('--json', 'print the result as JSON')
    .action(async (source: string, outDir: string, o: { arborCmd?: string; json?: boolean }) => {
      const { exportVerl } = await import('../../interop/verl-export');
      let loaded: LoadedConfig;
      let modelPath: string | undefined;
      let what: string;
      if (existsSync(source) && statSync(source).isFile()) {
        const { loadConfig } = await import('../../config/experiment');
        loaded = await loadConfig(resolve(source));
        what = `config ${resolve(source)}`;
      } else {
        const db = join(arborHome(), 'arbor.db');
        if (!existsSync(db)) throw new Error(`"${source}" is neither a config file nor a run (no workspace database at ${db})`);
        const store = new Store(openDatabase(db));
        try {
          const run = store.getRun(source);
          loaded = validateLoaded(run.config, { checkFiles: false });
          const ck = store.checkpoints(source).at(-1);
          if (!ck) throw new Error(`run ${source} has no checkpoint to hand over (checkpoint.every saves them)`);
          if (!existsSync(ck.path)) throw new Error(`run ${source}: its last checkpoint ${ck.path} is gone`);
          modelPath = ck.path;
          what = `run ${source} (${run.name}, step ${ck.step})`;
        } finally {
          store.db.close();
        }
      }
      const out = resolve(outDir);
      const r = await exportVerl({ cfg: loaded.cfg, dir: loaded.dir, modelPath, source: what }, out, {
        arborCmd: o.arborCmd ? o.arborCmd.split(/\s+/).filter(Boolean) : undefined,
        onProgress: (s) => !o.json && process.stderr.write(`export verl: ${s}\n`),
      });
      if (o.json) return console.log(JSON.stringify({ dir: r.dir, files: r.files, train: r.train, val: r.val }));
      console.log(`${r.dir}: ${r.train} train and ${r.val} held-out tasks; ${r.files.join(', ')}`);
      console.log(`on the cluster: ${join(r.dir, 'run_verl.sh')} trainer.n_gpus_per_node=<gpus> trainer.nnodes=<nodes>`);
    });
}

/**
 * `arbor runs [--json]`, `arbor show <run>`, `arbor export <run>`, `arbor import-verl <dir>`.
 * They go through the engine protocol client, like the workbench: to a running `arbor serve`
 * with `--engine <url>` (or ARBOR_ENGINE), else to an engine in this process over the
 * workspace database (engine/cli/engine-client.ts).
 */
import { modelArg } from '../../hub/cache';
import type { Command } from 'commander';
import { resolve } from 'node:path';
import { withEngine } from '../engine-client';
import { progressBar, type Progress } from '../progress';
import type { EngineClient } from '../../server/client';
import type { Result } from '../../server/protocol';

const fmt = (v: number | undefined) => (v === undefined ? '' : Math.abs(v) >= 1000 || (Math.abs(v) < 0.01 && v !== 0) ? v.toExponential(2) : v.toFixed(3));
const when = (seconds: number) => new Date(seconds * 1000).toISOString().slice(0, 16).replace('T', ' ');
const ENGINE = ['--engine <url>', 'a running `arbor serve` (the URL it printed); default: this workspace ($ARBOR_HOME) in-process'] as const;

export function register(program: Command): void {
  registerList(program);
  registerShow(program);
  registerExport(program);
  registerImportVerl(program);
  registerNotesAndTags(program);
}

/** `arbor runs`: the workspace's runs as a table (or JSON). */
function registerList(program: Command): void {
  program
    .command('runs')
    .description('list runs in the workspace database')
    .option('--json', 'print JSON')
    .option('--status <status>')
    .option('--tag <tag>')
    .option('--search <text>', 'text in the run name')
    .option('--project <name>')
    .option('--sort <key>', 'created_at, name, status or a metric key')
    .option('--asc', 'ascending (default: descending)')
    .option(...ENGINE)
    .action((o: { json?: boolean; status?: string; tag?: string; search?: string; project?: string; sort?: string; asc?: boolean; engine?: string }) =>
      withEngine(o, async (c) => {
        const runs = await c.request('runs.list', { status: o.status, tag: o.tag, search: o.search, project: o.project, sort: o.sort, desc: !o.asc });
        if (o.json) return console.log(JSON.stringify(runs, null, 2));
        if (runs.length === 0) return console.log('no runs yet (start one with `arbor train <config>` or `npm run demo`)');
        const rows = runs.map((r) => [
          r.id,
          r.project ?? '',
          r.name,
          r.status,
          String(r.step),
          fmt(r.metrics['reward/mean']),
          r.tags.join(','),
          when(r.createdAt),
        ]);
        const head = ['id', 'project', 'name', 'status', 'step', 'reward/mean', 'tags', 'created'];
        const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
        console.log(head.map((h, i) => h.padEnd(w[i])).join('  '));
        for (const r of rows) console.log(r.map((cell, i) => cell.padEnd(w[i])).join('  '));
      }),
    );
}

/** `arbor show <run>`: everything the workspace knows about one run. */
function registerShow(program: Command): void {
  program
    .command('show <run>')
    .description('show a run: config, latest metrics, checkpoints, notes')
    .option('--json')
    .option(...ENGINE)
    .action((id: string, o: { json?: boolean; engine?: string }) =>
      withEngine(o, async (c) => {
        const r = await c.request('runs.get', { id });
        // "Why didn't it learn?" (engine/train/diagnostics.ts): flagged steps and warnings from the stored series.
        const learning = await c.request('runs.learning', { id });
        if (o.json) return console.log(JSON.stringify({ ...r, learning }, null, 2));
        await printRunAndFamily(c, r);
        if (r.notes) console.log(`notes: ${r.notes}`);
        console.log('config:', JSON.stringify(r.config, null, 2));
        console.log('latest metrics:');
        for (const [k, v] of Object.entries(r.metrics).sort()) console.log(`  ${k.padEnd(32)} ${fmt(v)}`);
        console.log(`checkpoints: ${r.checkpoints.map((ck) => `step ${ck.step}`).join(', ') || 'none'}; trajectory steps: ${r.trajectorySteps.length}`);
        if (r.trajectorySteps.length) await printDrift(c, r.id);
        await printReplays(c, r.id);
        printLearning(id, r, learning);
      }),
    );
}

/** An SFT warm start recorded as its own run (engine/run/store-sink.ts). */
const isSftRun = (x: { template?: string; tags: string[] }) => x.template === 'sft' && x.tags.includes('sft-warm-start');

/** The run's headline, then its parent (a fork's origin, or the run that recorded this run's SFT warm start) and its children. */
async function printRunAndFamily(c: EngineClient, r: Result<'runs.get'>): Promise<void> {
  const parent = r.parentId ? await c.request('runs.get', { id: r.parentId }).catch(() => undefined) : undefined;
  const children = (await c.request('runs.list', {})).filter((x) => x.parentId === r.id);
  console.log(
    `${r.project ? `${r.project}/` : ''}${r.name} (${r.id}) — ${r.status}, step ${r.step}${r.tags.length ? `, tags ${r.tags.join(', ')}` : ''}${r.error ? `\nerror: ${r.error}` : ''}`,
  );
  if (r.parentId)
    console.log(
      parent && isSftRun(parent)
        ? `parent: ${parent.name} (${parent.id}), its SFT warm start: ${parent.status}, ${parent.step} SFT step${parent.step === 1 ? '' : 's'}, sft/loss ${fmt(parent.metrics['sft/loss'])}`
        : `parent: ${parent ? `${parent.name} (${parent.id})` : r.parentId}`,
    );
  for (const ch of children)
    console.log(`child: ${ch.name} (${ch.id}), ${isSftRun(r) ? 'the RL run this SFT warm start began' : 'a run from this one'}: ${ch.status}, step ${ch.step}`);
}

/** Retokenisation drift: stored ids that differ from their text re-rendered by the task's tokenizer. */
async function printDrift(c: EngineClient, runId: string): Promise<void> {
  try {
    const d = (await c.request('replay.drift', { runId })).run!;
    console.log(
      `drift: ${d.drifted} of ${d.checked} stored trajectories have turns whose ids differ from their re-rendered text${d.drifted ? ` (${d.ids.slice(0, 10).join(', ')}${d.ids.length > 10 ? ', …' : ''})` : ''}`,
    );
  } catch (e) {
    console.log(`drift: not checked (${(e as Error).message})`);
  }
}

/** What-if replays (arbor replay): each continuation with its parent and fork. */
async function printReplays(c: EngineClient, runId: string): Promise<void> {
  const forks = await c.request('replay.forks', { runId });
  if (!forks.length) return;
  console.log(`replays: ${forks.length} continuation(s) of ${new Set(forks.map((f) => f.fork?.parent)).size} trajectory(ies)`);
  for (const t of forks) {
    const f = t.fork!;
    console.log(
      `  ${t.id} ← ${f.parent} at turn ${f.turn + 1}${f.token !== null ? ` token ${f.token}` : ''}${f.edit ? ` (${f.edit.kind} edited)` : ''}, checkpoint ${f.checkpoint.id}, T ${f.sampling.temperature}: reward ${fmt(t.reward)}${t.outcome !== undefined ? `, answer ${JSON.stringify(t.outcome)}` : ''}`,
    );
  }
}

/** The run's learning story: flagged steps, flat groups, held-out results, wall time by phase, degeneration. */
function printLearning(id: string, r: Result<'runs.get'>, learning: Result<'runs.learning'>): void {
  if (learning.steps) {
    console.log(`why didn't it learn: ${learning.flagged.length} of ${learning.steps} steps flagged`);
    for (const w of learning.warnings) console.log(`  warning: step ${w.step}: ${w.message}`);
    const shown = learning.flagged.slice(-15);
    if (learning.flagged.length > shown.length) console.log(`  (the last ${shown.length}; \`arbor show ${id} --json\` lists all)`);
    for (const f of shown) console.log(`  step ${String(f.step).padStart(5)}  ${f.reasons.join('; ')}`);
  }
  printFlatGroups(r.metrics);
  printHeldOut(learning.heldOut);
  const times = Object.entries(learning.phaseTimes);
  if (times.length) console.log(`wall time by phase: ${times.map(([k, v]) => `${k} ${v.toFixed(1)} s`).join(', ')}`);
  if (learning.degeneration.length) {
    console.log(`collapse / degeneration: ${learning.degeneration.length} detected`);
    for (const d of learning.degeneration) console.log(`  ${d.message}`);
  }
}

/** Flat groups before dynamic sampling (groups/flat_*: over every group sampled), split by the verdict. */
function printFlatGroups(metrics: Record<string, number>): void {
  const flat = metrics['groups/flat_fraction'];
  if (flat === undefined) return;
  const part = (k: string) => (metrics[k] === undefined ? '' : `${k.slice('groups/flat_'.length).replace('_', ' ')} ${fmt(metrics[k])}`);
  const parts = ['groups/flat_all_right', 'groups/flat_all_wrong', 'groups/flat_other'].map(part).filter(Boolean);
  const dropped = metrics['dynamic_sampling/dropped_groups'];
  console.log(
    `flat groups (before dynamic sampling, last step): ${fmt(flat)}${parts.length ? ` (${parts.join(', ')})` : ''}${dropped !== undefined ? `; dropped ${fmt(dropped)}` : ''}`,
  );
}

/** Held-out results before RL (SFT alone), at the best evaluation and at the end (engine/train/run-story.ts; the Run view's table). */
function printHeldOut(h: Result<'runs.learning'>['heldOut']): void {
  if (!h?.columns.length) return;
  console.log(`held-out (best by eval/${h.bestMetric}):`);
  const cols = h.columns.map((c) => `${c.label} (step ${c.step})`);
  const w = Math.max(...h.metrics.map((m) => m.length), 6);
  console.log(`  ${'metric'.padEnd(w)}  ${cols.map((c) => c.padStart(20)).join('')}`);
  for (const m of h.metrics)
    console.log(`  ${m.padEnd(w)}  ${h.columns.map((c) => (c.values[m] === undefined ? '—' : fmt(c.values[m])).padStart(20)).join('')}`);
}

/** `arbor export <run>`: metrics as CSV and trajectories as JSONL, with a progress bar. */
function registerExport(program: Command): void {
  program
    .command('export <run>')
    .description("export a run's metrics (CSV, every step) and trajectories (JSONL)")
    .option('--out <prefix>', 'output path prefix (default: ./<run>)')
    .option('--format <fmt>', 'csv, jsonl or both', 'both')
    .option(...ENGINE)
    .action((id: string, o: { out?: string; format: string; engine?: string }) =>
      withEngine(o, async (c) => {
        if (!['csv', 'jsonl', 'both'].includes(o.format)) throw new Error(`--format: "${o.format}" is not one of csv, jsonl, both`);
        let bar: Progress | undefined;
        const off = c.on('export', (p) => {
          if (p.runId !== id) return;
          bar ??= progressBar('export', p.total);
          bar.update(p.done);
        });
        const r = await c.request('runs.export', { id, prefix: resolve(o.out ?? id), format: o.format as 'csv' | 'jsonl' | 'both' }).finally(() => {
          off();
          bar?.stop();
        });
        for (const f of r.files) console.log(`${f.path}: ${f.count} ${f.kind === 'metrics' ? 'steps' : 'trajectories'}`);
      }),
    );
}

/** `arbor import-verl <dir>`: a verl / Agent-R1 dump as a run, with a progress bar over its files. */
function registerImportVerl(program: Command): void {
  program
    .command('import-verl <dir>')
    .description('import a verl / Agent-R1 rollout dump ({step}.jsonl files) or agent-loop outputs with token ids (a folder or one .jsonl) as a run')
    .option('--name <name>')
    .option('--tokenizer <folder>', 'the model folder whose tokenizer decodes agent-loop token ids (prompt_ids, response_ids)')
    .option(...ENGINE)
    .action((dir: string, o: { name?: string; tokenizer?: string; engine?: string }) =>
      withEngine(o, async (c) => {
        const full = resolve(dir);
        let bar: Progress | undefined;
        const off = c.on('import', (p) => {
          if (p.dir !== full || p.filesTotal === undefined) return;
          bar ??= progressBar('import', p.filesTotal, { fields: ['samples'] });
          bar.update(p.filesDone ?? 0, { samples: p.samples });
        });
        try {
          const r = await c.request('runs.importVerl', {
            dir: full,
            name: o.name,
            tokenizer: o.tokenizer ? resolve(modelArg(o.tokenizer, '--tokenizer')) : undefined,
          });
          bar?.stop();
          console.log(`run ${r.runId}: ${r.trajectories} trajectories over ${r.steps.length} steps`);
        } finally {
          off();
        }
      }),
    );
}

/** `arbor note <run> <text...>` and `arbor tag <run> <tags...>`. */
function registerNotesAndTags(program: Command): void {
  program
    .command('note <run> <text...>')
    .description("set a run's notes (shown by `arbor show` and in the workbench)")
    .option(...ENGINE)
    .action((id: string, text: string[], o: { engine?: string }) =>
      withEngine(o, async (c) => void (await c.request('runs.setNotes', { id, notes: text.join(' ') }))),
    );
  program
    .command('tag <run> <tags...>')
    .description("set a run's tags (replacing the old ones)")
    .option(...ENGINE)
    .action((id: string, tags: string[], o: { engine?: string }) => withEngine(o, async (c) => void (await c.request('runs.setTags', { id, tags }))));
}

/** `arbor runs [--json]`, `arbor show <run>`, `arbor export <run>`, `arbor import-verl <dir>`. */
import type { Command } from 'commander';
import { join } from 'node:path';
import { openDatabase } from '../../store/db';
import { Store } from '../../store/store';
import { exportMetricsCsv, exportTrajectoriesJsonl, importVerlDump } from '../../store/io';

function store(): Store {
  return new Store(openDatabase());
}

const fmt = (v: number | undefined) => (v === undefined ? '' : Math.abs(v) >= 1000 || (Math.abs(v) < 0.01 && v !== 0) ? v.toExponential(2) : v.toFixed(3));

export function register(program: Command): void {
  program.command('runs').description('list runs in the workspace database')
    .option('--json', 'print JSON').option('--status <status>').option('--tag <tag>').option('--sort <key>', 'created_at, name, status or a metric key')
    .action((o: { json?: boolean; status?: string; tag?: string; sort?: string }) => {
      const runs = store().listRuns({ status: o.status, tag: o.tag, sort: o.sort });
      if (o.json) return console.log(JSON.stringify(runs, null, 2));
      if (runs.length === 0) return console.log('no runs yet (start one with `arbor train <config>` or `npm run demo`)');
      const rows = runs.map((r) => [r.id, r.name, r.status, String(r.step), fmt(r.metrics['reward/mean']), new Date(r.createdAt * 1000).toISOString().slice(0, 16).replace('T', ' ')]);
      const head = ['id', 'name', 'status', 'step', 'reward/mean', 'created'];
      const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
      console.log(head.map((h, i) => h.padEnd(w[i])).join('  '));
      for (const r of rows) console.log(r.map((c, i) => c.padEnd(w[i])).join('  '));
    });
  program.command('show <run>').description('show a run: config, latest metrics, checkpoints').option('--json')
    .action((id: string, o: { json?: boolean }) => {
      const s = store();
      const r = s.getRun(id);
      const out = { ...r, checkpoints: s.checkpoints(id), trajectorySteps: s.trajectorySteps(id).length };
      if (o.json) return console.log(JSON.stringify(out, null, 2));
      console.log(`${r.name} (${r.id}) — ${r.status}, step ${r.step}${r.error ? `\nerror: ${r.error}` : ''}`);
      console.log('config:', JSON.stringify(r.config, null, 2));
      console.log('latest metrics:');
      for (const [k, v] of Object.entries(r.metrics).sort()) console.log(`  ${k.padEnd(32)} ${fmt(v)}`);
      console.log(`checkpoints: ${out.checkpoints.map((c) => `step ${c.step}`).join(', ') || 'none'}; trajectory steps: ${out.trajectorySteps}`);
    });
  program.command('export <run>').description("export a run's metrics (CSV) and trajectories (JSONL)")
    .option('--out <prefix>', 'output path prefix (default: ./<run>)').option('--format <fmt>', 'csv, jsonl or both', 'both')
    .action((id: string, o: { out?: string; format: string }) => {
      const s = store();
      const prefix = o.out ?? join(process.cwd(), id);
      if (o.format === 'csv' || o.format === 'both') console.log(`${prefix}.metrics.csv: ${exportMetricsCsv(s, id, `${prefix}.metrics.csv`)} steps`);
      if (o.format === 'jsonl' || o.format === 'both') console.log(`${prefix}.trajectories.jsonl: ${exportTrajectoriesJsonl(s, id, `${prefix}.trajectories.jsonl`)} trajectories`);
    });
  program.command('import-verl <dir>').description('import a verl / Agent-R1 rollout dump ({step}.jsonl files) as a run').option('--name <name>')
    .action(async (dir: string, o: { name?: string }) => {
      const r = await importVerlDump(store(), dir, { name: o.name, onProgress: (f, n) => process.stderr.write(`\rimported ${f} (${n} samples)`) });
      process.stderr.write('\n');
      console.log(`run ${r.runId}: ${r.trajectories} trajectories over ${r.steps.length} steps`);
    });
}

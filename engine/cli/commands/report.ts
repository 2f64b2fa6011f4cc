/**
 * `arbor report <group> [<other group>] [--json]`: a run group's statistics per configuration and
 * metric (mean, sd, min/max, bootstrap 95% interval of the mean over the completed runs), what is
 * missing when the group is partial, and with a second group the difference of means (other − first)
 * with its interval. `arbor report --list` lists the groups. Through the engine protocol, like `arbor runs`.
 */
import type { Command } from 'commander';
import { withEngine } from '../engine-client';
import { renderTable } from '../progress';
import type { RunGroupComparison, RunGroupReport } from '../../server/protocol';

const f = (v: number) => (Number.isFinite(v) ? (Math.abs(v) >= 1000 || (Math.abs(v) < 0.001 && v !== 0) ? v.toExponential(2) : v.toFixed(4)) : '-');

export function printRunGroupReport(r: RunGroupReport, out: (s: string) => void = console.log): void {
  const runs = r.cells.reduce((a, c) => a + c.runs.length, 0);
  out(`group ${r.group.id} (${r.group.name}, ${r.group.kind}, ${r.group.status}): ${runs} of ${r.group.planned} planned run(s)`);
  if (r.partial) out(`PARTIAL GROUP: ${r.notes.join('; ')}`);
  for (const c of r.cells) {
    const done = c.runs.filter((x) => x.status === 'completed');
    out(
      `\n${c.cell === 'base' ? 'configuration: as in the config file' : `configuration: ${c.cell}`} — ${done.length} completed run(s), seeds ${done.map((x) => x.seed).join(', ') || '-'}`,
    );
    const keys = Object.keys(c.metrics);
    if (!keys.length) {
      out('  no completed run with these metrics yet');
      continue;
    }
    out(
      renderTable(
        ['metric', 'n', 'mean', 'sd', 'min', 'max', '95% CI of the mean (bootstrap)'],
        keys.map((k) => {
          const m = c.metrics[k]!;
          return [k, String(m.n), f(m.mean), f(m.sd), f(m.min), f(m.max), `[${f(m.lo)}, ${f(m.hi)}]`];
        }),
      ),
    );
  }
}

export function printComparison(c: RunGroupComparison, out: (s: string) => void = console.log): void {
  if (!c.cells.length) {
    out(`no configuration of ${c.b} matches one of ${c.a} (cells are matched by label, or the only cell of each)`);
    return;
  }
  for (const cell of c.cells) {
    out(`\n${c.b} [${cell.cellB}] − ${c.a} [${cell.cellA}]`);
    out(
      renderTable(
        ['metric', `mean ${c.a}`, `mean ${c.b}`, 'difference', '95% CI (bootstrap)', 'n'],
        Object.entries(cell.metrics).map(([k, m]) => [k, f(m.meanA), f(m.meanB), f(m.diff), `[${f(m.lo)}, ${f(m.hi)}]`, `${m.na} / ${m.nb}`]),
      ),
    );
  }
}

export function register(program: Command): void {
  program
    .command('report')
    .description('statistics of a run group (a seed sweep or grid): mean, sd, min/max and a bootstrap 95% interval per metric; two groups: their difference')
    .argument('[group]', 'group id (or its name)')
    .argument('[other]', 'a second group: report the difference of means (other − group)')
    .option('--metrics <keys>', 'metric keys or prefixes, comma-separated (default: eval/, sft/eval/ and lift/)')
    .option('--list', 'list the groups')
    .option('--json', 'print JSON')
    .option('--engine <url>', 'a running `arbor serve` (the URL it printed); default: this workspace ($ARBOR_HOME) in-process')
    .action((group: string | undefined, other: string | undefined, o: { metrics?: string; list?: boolean; json?: boolean; engine?: string }) =>
      withEngine(o, async (c) => {
        if (o.list || !group) {
          const gs = await c.request('groups.list');
          if (o.json) return console.log(JSON.stringify(gs, null, 2));
          if (!gs.length) return console.log('no groups yet (`arbor train <config> --seeds 0,1,2,3` or `arbor sweep` makes one)');
          return console.log(
            renderTable(
              ['id', 'name', 'kind', 'status', 'runs', 'created'],
              gs.map((g) => [
                g.id,
                g.name,
                g.kind,
                g.status,
                `${g.runs}/${g.planned}`,
                new Date(g.createdAt * 1000).toISOString().slice(0, 16).replace('T', ' '),
              ]),
            ),
          );
        }
        const metrics = o.metrics
          ?.split(',')
          .map((s) => s.trim())
          .filter(Boolean);
        const a = await c.request('groups.report', { id: group, metrics });
        if (!other) {
          if (o.json) return console.log(JSON.stringify(a));
          return printRunGroupReport(a);
        }
        const b = await c.request('groups.report', { id: other, metrics });
        const cmp = await c.request('groups.compare', { a: group, b: other, metrics });
        if (o.json) return console.log(JSON.stringify({ a, b, compare: cmp }));
        printRunGroupReport(a);
        console.log('');
        printRunGroupReport(b);
        printComparison(cmp);
      }),
    );
}

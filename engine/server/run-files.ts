/**
 * A run's data to and from files (engine/store/io.ts): runs.export writes its metrics (CSV) and
 * trajectories (JSONL), pushing `export` progress events; runs.importVerl reads a verl / Agent-R1
 * dump as a new run, pushing `import` progress events.
 */
import { mkdirSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { exportMetricsCsv, exportTrajectoriesJsonl, importVerlDump } from '../store/io';
import type { EngineHost } from './host';
import type { Result } from './protocol';

export function registerRunFiles(engine: EngineHost): void {
  const S = () => engine.store!;
  const R = () => engine.runs!;
  engine.on('runs.export', (p) => {
    R().writer.flush();
    S().getRun(p.id);
    if (p.prefix && !isAbsolute(p.prefix))
      throw new Error(`runs.export: prefix must be an absolute path (the engine's working directory is not the caller's), got "${p.prefix}"`);
    const prefix = p.prefix ?? join(engine.opts.home, 'exports', p.id);
    mkdirSync(dirname(prefix), { recursive: true });
    const format = p.format ?? 'both';
    const files: Result<'runs.export'>['files'] = [];
    if (format !== 'jsonl') files.push({ kind: 'metrics', path: `${prefix}.metrics.csv`, count: exportMetricsCsv(S(), p.id, `${prefix}.metrics.csv`) });
    if (format !== 'csv')
      files.push({
        kind: 'trajectories',
        path: `${prefix}.trajectories.jsonl`,
        count: exportTrajectoriesJsonl(S(), p.id, `${prefix}.trajectories.jsonl`, (done, total) =>
          engine.broadcast({ event: 'export', data: { runId: p.id, done, total } }),
        ),
      });
    return { files };
  });
  engine.on('runs.importVerl', async (p) => {
    let decode: ((ids: number[]) => string) | undefined;
    if (p.tokenizer) {
      const { HfTokenizer } = await import('../model/tokenizer');
      const tok = HfTokenizer.load(p.tokenizer);
      decode = (ids) => tok.decode(ids);
    }
    const r = await importVerlDump(S(), p.dir, {
      name: p.name,
      decode,
      onProgress: (file, samples, filesDone, filesTotal) => engine.broadcast({ event: 'import', data: { dir: p.dir, file, samples, filesDone, filesTotal } }),
    });
    R().announce(r.runId);
    return r;
  });
}

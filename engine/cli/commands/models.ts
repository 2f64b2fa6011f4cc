/**
 * `arbor models [--json] [--engine <url>]`: the models Arbor can use, from the Hugging Face cache
 * (what `arbor pull`, transformers and huggingface-cli downloaded) and each run's latest
 * checkpoint: name (what model.path takes), revision, size on disk, architecture, parameters, and
 * whether Arbor loads it or what it refuses (engine/hub/models.ts). Through the engine protocol,
 * like the workbench's picker: `--engine` lists a remote `arbor serve`'s models.
 */
import type { Command } from 'commander';
import { withEngine } from '../engine-client';
import { renderTable } from '../progress';
import { hubCacheDir } from '../../hub/cache';
import { formatBytes } from './pull';

const params = (n: number | undefined) =>
  n === undefined ? '-' : n >= 1e9 ? `${(n / 1e9).toFixed(2)}B` : n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}K` : String(n);

export function register(program: Command): void {
  program
    .command('models')
    .description("list the models of the Hugging Face cache and the runs' latest checkpoints: size, architecture, parameters, and whether Arbor can load each")
    .option('--json', 'print JSON')
    .option('--engine <url>', 'a running `arbor serve` (the URL it printed); default: this machine')
    .action((o: { json?: boolean; engine?: string }) =>
      withEngine(o, async (c) => {
        const models = await c.request('models.list', {});
        if (o.json) return console.log(JSON.stringify(models, null, 2));
        if (!models.length)
          return console.log(
            `no models: the Hugging Face cache (${hubCacheDir()}) is empty and no run has a checkpoint; \`arbor pull org/name\` downloads one`,
          );
        console.log(
          renderTable(
            ['name', 'revision', 'size', 'architecture', 'parameters', 'Arbor'],
            models.map((m) => [
              m.source === 'hub' ? m.name : m.label,
              m.source === 'hub' ? `${m.revision}${m.commit && m.revision !== m.commit ? ` (${m.commit.slice(0, 8)})` : ''}` : m.revision,
              formatBytes(m.sizeBytes),
              m.architecture ?? '-',
              params(m.parameters),
              m.loadable ? 'loads' : `refuses: ${m.refusal}`,
            ]),
          ),
        );
        const runs = models.filter((m) => m.source === 'run');
        if (runs.length) console.log(`\nrun checkpoints are used by their folder (arbor models --json has each path)`);
      }),
    );
}

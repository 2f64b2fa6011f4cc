/**
 * `arbor serve-model <model folder | checkpoint | run> [--port N] [--api-key KEY | --no-key] [--device D]`:
 * an OpenAI-compatible endpoint on 127.0.0.1 (engine/openai/): any OpenAI client (Python, the
 * `openai` npm package, LangGraph, smolagents, curl) can chat with the model; every completion's
 * token ids are remembered so a conversation sent back is continued token for token. Without a key
 * (`--api-key`, `$ARBOR_API_KEY`) one is generated and printed, as `arbor serve` does with its
 * token: another local user or a web page's request cannot use the model; `--no-key` opts out.
 */
import { randomBytes } from 'node:crypto';
import { modelArg } from '../../hub/cache';
import type { Command } from 'commander';
import { DEVICES } from '../../config/experiment';
import { serveModel } from '../../openai/serve-model';

const int = (name: string, min: number) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer ≥ ${min} (got "${v}")`);
  return n;
};

export function register(program: Command): void {
  program
    .command('serve-model')
    .description('serve a model as an OpenAI-compatible API on 127.0.0.1 (prints the base URL)')
    .argument('<model>', 'HF model folder, checkpoint (also a LoRA adapter folder, served on its base) or run (id or folder: its latest checkpoint)')
    .option('--port <n>', 'port (0 = any free port)', int('port', 0), 0)
    .option('--api-key <key>', 'require this key (Authorization: Bearer <key>); default: $ARBOR_API_KEY, else a generated one (printed)')
    .option('--no-key', 'accept requests without a key (any local program can use the model)')
    .option('--device <device>', `ONNX Runtime device (${DEVICES.join(', ')})`, 'auto')
    .option('--threads <n>', 'intra-op threads', int('threads', 1))
    .option('--max-batch <n>', 'most requests decoded together', int('max-batch', 1), 64)
    .option('--name <id>', "the model's name in the API (default: the folder's name)")
    .option('--record <file>', 'write the conversations as token-exact trajectories (JSONL, usable as sft.demos_path) when the server stops')
    .option('--quiet', 'do not log requests')
    .action(
      async (
        arg: string,
        o: {
          port: number;
          apiKey?: string;
          key: boolean;
          device: string;
          threads?: number;
          maxBatch: number;
          name?: string;
          record?: string;
          quiet?: boolean;
        },
      ) => {
        if (!(DEVICES as readonly string[]).includes(o.device)) throw new Error(`--device must be one of ${DEVICES.join(', ')} (got "${o.device}")`);
        if (!o.key && o.apiKey !== undefined) throw new Error('--no-key and --api-key contradict each other: give one');
        const given = o.apiKey ?? (process.env.ARBOR_API_KEY || undefined);
        const generated = o.key && given === undefined ? `arbor-${randomBytes(24).toString('base64url')}` : undefined;
        const apiKey = o.key ? (given ?? generated) : undefined;
        const s = await serveModel(modelArg(arg, '<model>'), {
          port: o.port,
          apiKey,
          device: o.device,
          threads: o.threads,
          maxBatch: o.maxBatch,
          name: o.name,
          record: o.record,
          log: o.quiet ? undefined : (line) => process.stderr.write(`${line}\n`),
        });
        process.stderr.write(
          `serving ${s.folder} as "${s.server.o.modelId}"${apiKey ? ' (API key required)' : ' with no API key (--no-key): any local program can use it'}\n`,
        );
        if (generated) process.stderr.write(`API key (generated; give --api-key or $ARBOR_API_KEY to choose one, --no-key for none): ${generated}\n`);
        console.log(s.url);
        const stop = async () => {
          await s.close();
          if (o.record) process.stderr.write(`conversations written to ${o.record}\n`);
          process.exit(0);
        };
        process.on('SIGINT', stop);
        process.on('SIGTERM', stop);
      },
    );
}

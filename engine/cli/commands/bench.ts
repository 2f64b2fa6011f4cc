/**
 * `arbor bench gpu|decode|train [options]`: the benchmarks a person runs on their own hardware,
 * as CLI commands (so the offline bundle carries them): the same code as `npm run bench:gpu`,
 * `bench:decode-graph` and `bench:train` (scripts/bench/*.ts), given the options that follow the
 * name. `decode` also takes `--shape tiny|25M` for its `--model`. `arbor bench <name> --help`
 * lists a benchmark's options (in its file's header).
 */
import type { Command } from 'commander';

/** Name → the script (a URL next to this file, so a bundle maps it to its built copy). */
const BENCHES: Record<string, { url: () => URL; what: string; npm: string }> = {
  gpu: {
    url: () => new URL('../../../scripts/bench/gpu.ts', import.meta.url),
    what: 'the same model on the CPU and on the GPU (WebGPU/CUDA): decode tokens/s, a training step, bytes crossing host ↔ device',
    npm: 'bench:gpu',
  },
  decode: {
    url: () => new URL('../../../scripts/bench/decode-graph.ts', import.meta.url),
    what: "ONNX Runtime's time for one steady decode step of the rollout's decode graph, per variant and thread count",
    npm: 'bench:decode-graph',
  },
  train: {
    url: () => new URL('../../../scripts/bench/train.ts', import.meta.url),
    what: 'one full training step (forward, backward, AdamW) on ORT and tfjs, next to a PyTorch peer when one is installed',
    npm: 'bench:train',
  },
};

/** The argv a benchmark script reads, from what followed `arbor bench <name>`. */
export function benchArgs(name: string, args: string[]): string[] {
  if (name !== 'decode') return args;
  // decode-graph.ts names its model size --model; the CLI also takes --shape (as bench:gpu does).
  return args.map((a) => (a === '--shape' ? '--model' : a.startsWith('--shape=') ? `--model=${a.slice('--shape='.length)}` : a));
}

export function register(program: Command): void {
  program
    .command('bench')
    .description(
      `hardware benchmarks (the npm bench scripts): ${Object.entries(BENCHES)
        .map(([k, b]) => `${k}: ${b.what}`)
        .join('; ')}`,
    )
    .argument('<name>', Object.keys(BENCHES).join(', '))
    .argument('[options...]', "the benchmark's own options (see `npm run bench:<name>` in docs/BENCHMARKS.md)")
    .helpOption(false)
    .allowUnknownOption()
    .passThroughOptions()
    .action(async (name: string, rest: string[]) => {
      const b = BENCHES[name];
      if (!b) throw new Error(`<name>: unknown benchmark "${name}" (available: ${Object.keys(BENCHES).join(', ')})`);
      // The scripts read process.argv as `node <script> [options]` does.
      process.argv = [process.argv[0]!, b.url().pathname, ...benchArgs(name, rest)];
      await import(b.url().href);
    });
}

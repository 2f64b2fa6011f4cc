// `arbor bench <name>` runs the npm bench script's own code (the offline bundle carries it this way).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { benchArgs } from '../../../engine/cli/commands/bench';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');

describe('arbor bench', () => {
  it('decode runs scripts/bench/decode-graph.ts with --shape as its --model; an unknown name is refused naming it', () => {
    expect(benchArgs('decode', ['--shape', 'tiny', '--runs', '2'])).toEqual(['--model', 'tiny', '--runs', '2']);
    expect(benchArgs('gpu', ['--shape', 'tiny'])).toEqual(['--shape', 'tiny']);
    const r = spawnSync(process.execPath, [bin, 'bench', 'decode', '--shape', 'tiny', '--runs', '2', '--threads', '1'], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Decode step of the tiny model, batch 64, past 40/);
    const bad = spawnSync(process.execPath, [bin, 'bench', 'nope'], { encoding: 'utf8', timeout: 60_000 });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/<name>: unknown benchmark "nope" \(available: gpu, decode, train\)/);
  });
});

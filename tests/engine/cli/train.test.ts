import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
const arbor = (...args: string[]) =>
  spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: mkdtempSync(join(tmpdir(), 'arbor-home-')) } });

describe('arbor train (CLI)', () => {
  it('prints the resolved config with every default filled', () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-cli-'));
    writeFileSync(join(dir, 'c.yaml'), 'model: { init: tiny }\nseed: 3\n');
    const r = arbor('train', join(dir, 'c.yaml'), '--print-config');
    expect(r.status).toBe(0);
    const cfg = JSON.parse(r.stdout);
    expect(cfg.seed).toBe(3);
    expect(cfg.algorithm.clip_ratio_high).toBe(0.28);
  });

  it('fails with the named field for an invalid config, and with the file for a missing one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-cli-'));
    writeFileSync(join(dir, 'bad.yaml'), 'model: { init: tiny }\nrollout: { n: -1, nn: 2 }\n');
    const r = arbor('train', join(dir, 'bad.yaml'));
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('rollout.n: must be positive, got -1');
    expect(r.stderr).toContain('rollout.nn: unknown field "nn"');
    const m = arbor('train', join(dir, 'missing.yaml'));
    expect(m.status).toBe(1);
    expect(m.stderr).toContain(`config file not found: ${join(dir, 'missing.yaml')}`);
  });
});

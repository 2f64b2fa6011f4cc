// bin/arbor.mjs refuses an unsupported Node before it loads anything: one line naming the
// supported versions, exit code 1, nothing written (ARBOR_NODE_VERSION fakes the version).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { nodeVersionProblem } from '../../../bin/node-check.mjs';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');

describe('Node version check', () => {
  it('accepts 22.12+ and 24, refuses the rest naming the supported versions', () => {
    for (const v of ['v22.12.0', 'v22.23.3', 'v24.0.0', 'v24.11.1']) expect(nodeVersionProblem(v)).toBeNull();
    for (const v of ['v20.20.2', 'v22.11.0', 'v23.1.0', 'v25.0.0', 'v18.0.0', 'garbage'])
      expect(nodeVersionProblem(v)).toMatch(/^arbor: Node .* is not supported; install Node 22 \(22\.12 or later\) or Node 24/);
  });

  it.each(['demo', 'train', 'serve', 'doctor'])('arbor %s on Node 20: one line, exit 1, no folder', (command) => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-node-check-'));
    const r = spawnSync(process.execPath, [bin, command], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home, ARBOR_NODE_VERSION: 'v20.20.2' } });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toEqual([nodeVersionProblem('v20.20.2')]);
    expect(readdirSync(home)).toEqual([]);
  });
});

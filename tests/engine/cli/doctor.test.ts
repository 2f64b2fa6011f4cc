import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
const require = createRequire(import.meta.url);
const doctor = (home: string, ...args: string[]) =>
  spawnSync(process.execPath, [bin, 'doctor', ...args], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home } });

const resolvable = (name: string) => {
  try {
    require.resolve(`${name}/package.json`);
    return true;
  } catch {
    return false;
  }
};

// Independent facts about this machine, to check the report against.
const hasNvidia = existsSync('/dev/nvidiactl') || existsSync('/dev/nvidia0');
// (Not `require('electron')`: since Electron 45 that downloads the binary on first use.)
const electronBinary = (() => {
  try {
    const dir = dirname(require.resolve('electron/package.json'));
    return existsSync(join(dir, 'dist', readFileSync(join(dir, 'path.txt'), 'utf8').trim()));
  } catch {
    return false;
  }
})();

describe('arbor doctor (real CLI)', () => {
  it('--json reports this machine: providers that load, tfjs backends, Electron, threads, database path', () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-doctor-'));
    const r = doctor(home, '--json');
    expect(r.status, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout);

    expect(rep.node.version).toBe(process.versions.node);
    // Supported: the LTS lines CI runs on (README): 22 from 22.12, and 24.
    const [major, minor] = process.versions.node.split('.').map(Number);
    const supported = (major === 22 && minor! >= 12) || major === 24;
    expect(rep.node.supported).toBe(supported);
    if (!supported) expect(rep.missing.map((m: { name: string }) => m.name)).toContain('Node.js');
    expect(rep.ort.version).toBe((require('onnxruntime-node/package.json') as { version: string }).version);

    const cpu = rep.ort.providers.find((p: { name: string }) => p.name === 'cpu');
    expect(cpu).toEqual({ name: 'cpu', loads: true });
    if (process.platform === 'linux') {
      const cuda = rep.ort.providers.find((p: { name: string }) => p.name === 'cuda');
      expect(cuda).toBeDefined();
      if (!hasNvidia) expect(cuda.loads).toBe(false);
      if (!cuda.loads) {
        expect(cuda.fix).toBe('npm run setup:gpu');
        expect(cuda.error).toBeTruthy();
        expect(rep.missing).toContainEqual({ name: 'ORT provider cuda', fix: 'npm run setup:gpu' });
      }
    }

    const names = rep.tfjs.backends.map((b: { name: string }) => b.name);
    expect(names).toEqual(['tensorflow-gpu', 'tensorflow', 'wasm', 'cpu']);
    const byName = Object.fromEntries(rep.tfjs.backends.map((b: { name: string }) => [b.name, b]));
    expect(byName.cpu.available).toBe(true);
    for (const [name, pkg] of [
      ['tensorflow-gpu', '@tensorflow/tfjs-node-gpu'],
      ['tensorflow', '@tensorflow/tfjs-node'],
    ]) {
      if (!resolvable(pkg)) {
        expect(byName[name].available).toBe(false);
        expect(byName[name].fix).toBe(`npm install ${pkg}`);
      }
    }
    // The chosen backend is the first one that initialises, in preference order.
    const firstAvailable = rep.tfjs.backends.find((b: { available: boolean }) => b.available).name;
    expect(rep.tfjs.chosen).toBe(firstAvailable);
    if (!resolvable('@tensorflow/tfjs-node') && !resolvable('@tensorflow/tfjs-node-gpu')) expect(['wasm', 'cpu']).toContain(rep.tfjs.chosen);

    expect(rep.electron.installed).toBe(electronBinary);
    if (!electronBinary) {
      // The package without its binary (Electron 45 downloads it on first use) or no package at all.
      const fix = resolvable('electron') ? 'npx install-electron --no' : 'npm install electron';
      expect(rep.electron.fix).toBe(fix);
      expect(rep.missing).toContainEqual({ name: 'Electron', fix });
    }

    expect(rep.threads.available).toBe(availableParallelism());
    expect(rep.threads.ortIntraOp).toBe(Math.min(8, availableParallelism()));

    expect(rep.database).toEqual({ home, path: join(home, 'arbor.db'), exists: false, fromEnv: true });
    // doctor only looks: it must not create the workspace.
    expect(existsSync(join(home, 'arbor.db'))).toBe(false);
  });

  it('prints a readable table with each missing part and the command that adds it; sees an existing database', () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-doctor-'));
    writeFileSync(join(home, 'arbor.db'), Buffer.alloc(4096));
    const r = doctor(home);
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines.find((l) => l.includes('ORT provider cpu'))).toMatch(/^ok\s/);
    expect(lines.find((l) => l.startsWith('ok') && l.includes('Database'))).toContain(join(home, 'arbor.db'));
    expect(r.stdout).toContain('0.0 MiB');
    const json = JSON.parse(doctor(home, '--json').stdout);
    expect(json.database.exists).toBe(true);
    expect(json.database.bytes).toBe(4096);
    if (json.missing.length) {
      expect(r.stdout).toContain('Optional parts missing, and the command that adds each:');
      for (const m of json.missing as { name: string; fix: string }[]) {
        const line = lines.find((l) => l.trim().startsWith(m.name) && l.includes(m.fix));
        expect(line, `${m.name} → ${m.fix}`).toBeDefined();
      }
    }
  });
});

/**
 * WebGPU tests run their device half in a child process on Chromium's SwiftShader Vulkan driver
 * (a CPU emulation: correctness and residency, never speed). The child gets the environment the
 * dynamic loader needs at process start (VK_ICD_FILENAMES, and Chromium's own libvulkan.so.1 when
 * the system has none: engine/tensor/webgpu.ts swiftshaderEnv), and a native abort there cannot
 * take the test runner down. Without the SwiftShader file the tests are skipped, saying what to install.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SWIFTSHADER_ICD, swiftshaderEnv } from '../../../engine/tensor/webgpu';

export const gpuEnv = swiftshaderEnv();
export const SKIP_REASON = `WebGPU tests skipped: ${SWIFTSHADER_ICD} is missing (Debian/Ubuntu: apt-get install chromium; it ships Chromium's SwiftShader Vulkan driver)`;
if (!gpuEnv) console.warn(SKIP_REASON);

const ROOT = join(__dirname, '..', '..', '..');

/** Run `node <script> ...args` (TypeScript through tsx) on SwiftShader; returns the last JSON line of its stdout. */
export function runCase<T>(script: string, args: string[] = [], timeoutMs = 600_000): T {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(__dirname, 'cases', script), ...args], {
    cwd: ROOT,
    env: { ...gpuEnv!, ARBOR_HOME: mkdtempSync(join(tmpdir(), 'arbor-gpu-case-')) },
    encoding: 'utf8',
    timeout: timeoutMs,
    maxBuffer: 64 * 2 ** 20,
  });
  const line = r.stdout
    ?.split('\n')
    .reverse()
    .find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line)
    throw new Error(`${script} failed (status ${r.status}, signal ${r.signal}):\n${r.stderr?.slice(-4000)}\n${r.stdout?.slice(-2000)}`);
  return JSON.parse(line) as T;
}

/** Largest |a - b| / max |b| (0 when b is all zeros and a = b). */
export function relToMax(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0,
    d = 0;
  for (let i = 0; i < b.length; i++) {
    m = Math.max(m, Math.abs(b[i]!));
    d = Math.max(d, Math.abs(a[i]! - b[i]!));
  }
  return m === 0 ? d : d / m;
}

/**
 * `device: webgpu` where there is no adapter (the Vulkan loader pointed at a driver file that does
 * not exist): the probe says why and what to install, and `arbor train` fails before the run is
 * created, naming the fix. `device: auto` never picks a software adapter. (Linux: Vulkan.)
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { adapterVendor, hardwareVulkanPossible, isSoftwareAdapter, probeWebgpu, SWIFTSHADER_ICD } from '../../../engine/tensor/webgpu';

const ROOT = join(__dirname, '..', '..', '..');
const noDriver = { ...process.env, VK_ICD_FILENAMES: '/nonexistent/arbor_no_icd.json' };

describe('WebGPU device resolution', () => {
  it('classifies adapters: SwiftShader and llvmpipe are software, vendors from names', () => {
    expect(isSoftwareAdapter('SwiftShader Device (Subzero)')).toBe(true);
    expect(isSoftwareAdapter('llvmpipe (LLVM 15.0.6, 256 bits)')).toBe(true);
    expect(isSoftwareAdapter('NVIDIA GeForce RTX 4090')).toBe(false);
    expect(adapterVendor('NVIDIA GeForce RTX 4090')).toBe('NVIDIA');
    expect(adapterVendor('AMD Radeon RX 7900 XTX (RADV NAVI31)')).toBe('AMD');
    expect(adapterVendor('Intel(R) Arc(tm) A770 Graphics (DG2)')).toBe('Intel');
    // auto skips the probe where only software drivers are installed.
    expect(hardwareVulkanPossible({ VK_ICD_FILENAMES: SWIFTSHADER_ICD })).toBe(false);
  });

  it.skipIf(process.platform !== 'linux' || process.arch !== 'x64')('no adapter: the probe says why and what to install', async () => {
    const w = await probeWebgpu(noDriver);
    expect(w.bundled).toBe(true);
    expect(w.available).toBe(false);
    expect(w.error).toMatch(/adapter/i);
    expect(w.fix).toMatch(/libvulkan1|Vulkan/);
    expect(w.fix).toContain(SWIFTSHADER_ICD);
  });

  it.skipIf(process.platform !== 'linux' || process.arch !== 'x64')(
    'arbor train with device: webgpu and no adapter fails before the run exists, naming the fix',
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'arbor-nogpu-'));
      const cfg = join(dir, 'c.yaml');
      writeFileSync(cfg, ['name: nogpu', 'device: webgpu', 'model: { init: tiny }', 'steps: 1'].join('\n'));
      const runDir = join(dir, 'run');
      const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'arbor.mjs'), 'train', cfg, '--run-dir', runDir, '--no-store'], {
        encoding: 'utf8',
        env: { ...noDriver, ARBOR_HOME: join(dir, 'home') },
        timeout: 120_000,
      });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/device: "webgpu": no WebGPU adapter here/);
      expect(r.stderr).toMatch(/To get one: .*Vulkan/);
      expect(existsSync(runDir)).toBe(false);
    },
  );
});

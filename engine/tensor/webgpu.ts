/**
 * The WebGPU execution provider of onnxruntime-node: is there an adapter here, which one, and is
 * it hardware or a software emulation (SwiftShader, llvmpipe)?
 *
 * onnxruntime-node 1.30 bundles the WebGPU EP (Dawn) on Linux x64 (over Vulkan), Windows x64 and
 * arm64 (D3D12) and macOS arm64 (Metal). The binding does not report the adapter it picked, so
 * the probe creates and runs a one-node session in a child process (a missing driver makes Dawn
 * print to stderr, and a failing native call could take the process down) with the Vulkan
 * loader's driver log on (`VK_LOADER_DEBUG=driver`), whose `Using "<device>" with driver` line
 * names the device Dawn opened. Probed once per process.
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);

/** Chromium's SwiftShader Vulkan driver (Debian/Ubuntu `apt-get install chromium`): a CPU emulation, for correctness tests only. */
export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
/** Chromium ships its own Vulkan loader next to SwiftShader; used when the system has none (libvulkan1). */
const CHROMIUM_LIB_DIR = '/usr/lib/chromium';

export interface WebgpuAdapter {
  /** The device's name as its driver reports it, e.g. "NVIDIA GeForce RTX 4090", "SwiftShader Device (Subzero)". */
  name: string;
  vendor: string;
  /** Graphics API under Dawn: vulkan (Linux), d3d12 (Windows), metal (macOS). */
  backend: 'vulkan' | 'd3d12' | 'metal';
  /** A CPU emulation (SwiftShader, llvmpipe/lavapipe, WARP): correct but slow; `device: auto` never picks it. */
  software: boolean;
  /** The Vulkan driver library (Linux). */
  driver?: string;
}

export interface WebgpuInfo {
  /** The WebGPU EP is in this platform's onnxruntime-node binary. */
  bundled: boolean;
  /** A WebGPU session was created and ran. */
  available: boolean;
  adapter?: WebgpuAdapter;
  /** Why there is no adapter. */
  error?: string;
  /** What to install or set to get one. */
  fix?: string;
  /** Vulkan driver manifests the loader would read (Linux). */
  icds?: string[];
}

/** Platforms whose onnxruntime-node 1.30 binary bundles the WebGPU EP (listSupportedBackends). */
export function webgpuBundled(): boolean {
  try {
    const O = require('onnxruntime-node') as { listSupportedBackends?: () => { name: string }[] };
    return !!O.listSupportedBackends?.().some((b) => b.name === 'webgpu');
  } catch {
    return false;
  }
}

const SOFTWARE = /swiftshader|llvmpipe|lavapipe|\blvp\b|software|microsoft basic render|warp|mock/i;

/** Vendor from a device name. */
export function adapterVendor(name: string): string {
  if (/swiftshader/i.test(name)) return 'Google (SwiftShader, software)';
  if (/llvmpipe|lavapipe/i.test(name)) return 'Mesa (llvmpipe, software)';
  if (/nvidia|geforce|quadro|tesla|rtx|gtx/i.test(name)) return 'NVIDIA';
  if (/amd|radeon|radv/i.test(name)) return 'AMD';
  if (/intel|arc|iris|uhd/i.test(name)) return 'Intel';
  if (/apple|m\d/i.test(name)) return 'Apple';
  return 'unknown';
}

export function isSoftwareAdapter(nameOrDriver: string): boolean {
  return SOFTWARE.test(nameOrDriver);
}

/** Vulkan ICD manifests the loader reads (VK_ICD_FILENAMES / VK_DRIVER_FILES, else the standard folders). */
export function vulkanIcds(env: NodeJS.ProcessEnv = process.env): string[] {
  const explicit = env.VK_DRIVER_FILES ?? env.VK_ICD_FILENAMES;
  if (explicit) return explicit.split(':').filter(Boolean);
  const dirs = ['/etc/vulkan/icd.d', '/usr/share/vulkan/icd.d', '/usr/local/share/vulkan/icd.d', join(homedir(), '.local/share/vulkan/icd.d')];
  const out: string[] = [];
  for (const d of dirs) {
    try {
      for (const f of readdirSync(d)) if (f.endsWith('.json')) out.push(join(d, f));
    } catch {
      /* absent folder */
    }
  }
  return out;
}

/** The driver library a Vulkan ICD manifest names. */
function icdLibrary(file: string): string {
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as { ICD?: { library_path?: string } }).ICD?.library_path ?? file;
  } catch {
    return file;
  }
}

/** Whether any Vulkan driver here could be a hardware one (no manifest names only software drivers). */
export function hardwareVulkanPossible(env: NodeJS.ProcessEnv = process.env): boolean {
  return vulkanIcds(env).some((f) => !isSoftwareAdapter(`${f} ${icdLibrary(f)}`));
}

/** A system Vulkan loader (libvulkan.so.1) is installed. */
function systemVulkanLoader(): boolean {
  const dirs = ['/usr/lib/x86_64-linux-gnu', '/usr/lib64', '/usr/lib', '/lib/x86_64-linux-gnu', '/usr/local/lib'];
  const ld = (process.env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean);
  return [...ld, ...dirs].some((d) => existsSync(join(d, 'libvulkan.so.1')));
}

/**
 * Environment for a child process that should run WebGPU on SwiftShader (tests, CI), or null when
 * Chromium's SwiftShader is not installed. Adds Chromium's own Vulkan loader to LD_LIBRARY_PATH
 * when the system has none (the dynamic loader reads it at process start, so only children get it).
 */
export function swiftshaderEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv | null {
  if (process.platform !== 'linux' || !existsSync(SWIFTSHADER_ICD)) return null;
  const env: NodeJS.ProcessEnv = { ...base, VK_ICD_FILENAMES: SWIFTSHADER_ICD };
  delete env.VK_DRIVER_FILES;
  if (!systemVulkanLoader() && existsSync(join(CHROMIUM_LIB_DIR, 'libvulkan.so.1')))
    env.LD_LIBRARY_PATH = [base.LD_LIBRARY_PATH, CHROMIUM_LIB_DIR].filter(Boolean).join(':');
  return env;
}

/** What to install for a WebGPU adapter on this platform. */
export function webgpuFix(): string {
  if (process.platform === 'win32') return 'update the GPU driver (WebGPU runs on Direct3D 12)';
  if (process.platform === 'darwin') return 'WebGPU runs on Metal (macOS 13+ on Apple silicon)';
  if (process.platform === 'linux' && process.arch === 'x64')
    return (
      'install the Vulkan loader and your GPU vendor’s Vulkan driver (Debian/Ubuntu: `apt-get install libvulkan1 mesa-vulkan-drivers` for AMD/Intel; ' +
      'NVIDIA’s proprietary driver ships nvidia_icd.json); for a CPU-only correctness check, Chromium’s SwiftShader: ' +
      `\`apt-get install chromium\`, then VK_ICD_FILENAMES=${SWIFTSHADER_ICD}` +
      (systemVulkanLoader() ? '' : ` and LD_LIBRARY_PATH=${CHROMIUM_LIB_DIR}`)
    );
  return `onnxruntime-node has no WebGPU provider for ${process.platform}/${process.arch}`;
}

const PROBE_SCRIPT = `
const O = require(process.argv[1]);
const model = Buffer.from(process.argv[2], 'base64');
(async () => {
  try {
    const s = await O.InferenceSession.create(model, { executionProviders: ['webgpu'], logSeverityLevel: 3 });
    const r = await s.run({ x: new O.Tensor('float32', Float32Array.of(1, 2), [2]) });
    process.stdout.write(JSON.stringify({ ok: true, y: Array.from(r.y.data) }) + '\\n');
    await s.release();
  } catch (e) {
    process.stdout.write(JSON.stringify({ ok: false, error: String(e && e.message || e) }) + '\\n');
  }
})();
`;

let cache: Promise<WebgpuInfo> | undefined;

/** The WebGPU adapter here, probed once per process (a child process, ~1 s; see the module comment). */
export function webgpuInfo(): Promise<WebgpuInfo> {
  cache ??= probeWebgpu();
  return cache;
}

/** Probe with this environment (tests: swiftshaderEnv()). */
export async function probeWebgpu(env: NodeJS.ProcessEnv = process.env): Promise<WebgpuInfo> {
  const bundled = webgpuBundled();
  const icds = process.platform === 'linux' ? vulkanIcds(env) : undefined;
  if (!bundled)
    return { bundled, available: false, error: `onnxruntime-node has no WebGPU provider for ${process.platform}/${process.arch}`, fix: webgpuFix() };
  const { traceGraph } = await import('./graph');
  const { toOnnx } = await import('./onnx');
  const g = traceGraph([{ name: 'x', dtype: 'float32', shape: [2] }], (o, x) => ({ y: o.add(x.x, x.x) }));
  const model = Buffer.from(toOnnx(g)).toString('base64');
  const ortPath = require.resolve('onnxruntime-node');
  const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ['-e', PROBE_SCRIPT, ortPath, model], {
      env: { ...env, VK_LOADER_DEBUG: 'driver' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '',
      err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('close', () => {
      clearTimeout(timer);
      resolve({ stdout: out, stderr: err });
    });
  });
  const line = stdout.split('\n').find((l) => l.startsWith('{'));
  const res = line
    ? (JSON.parse(line) as { ok: boolean; y?: number[]; error?: string })
    : { ok: false, error: `probe process failed: ${stderr.trim().split('\n').slice(-3).join(' ')}` };
  const backend = process.platform === 'win32' ? 'd3d12' : process.platform === 'darwin' ? 'metal' : 'vulkan';
  if (!res.ok || res.y?.[0] !== 2 || res.y?.[1] !== 4) {
    const noLoader = /libvulkan\.so\.1/.test(stderr) ? ' (libvulkan.so.1, the Vulkan loader, is not installed)' : '';
    const why = (res.error ?? `wrong result ${JSON.stringify(res.y)}`)
      .replace(/^.*?(Failed to get a WebGPU adapter)/s, '$1')
      .split('\n')[0]!
      .trim();
    return { bundled, available: false, error: `${why}${noLoader}`, fix: webgpuFix(), ...(icds ? { icds } : {}) };
  }
  const used = /Using "([^"]+)" with driver: "([^"]+)"/.exec(stderr);
  const name =
    used?.[1] ??
    (backend === 'metal' ? 'Apple GPU (Metal)' : backend === 'd3d12' ? 'Direct3D 12 adapter (name not reported)' : 'Vulkan device (name not reported)');
  const adapter: WebgpuAdapter = {
    name,
    vendor: adapterVendor(name),
    backend,
    software: isSoftwareAdapter(`${name} ${used?.[2] ?? ''}`),
    ...(used ? { driver: used[2] } : {}),
  };
  return { bundled, available: true, adapter, ...(icds ? { icds } : {}) };
}

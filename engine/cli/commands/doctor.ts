/**
 * `arbor doctor [--json]`: what this machine gives Arbor. Node version; ONNX Runtime's version
 * and the execution providers that actually create and run a session here (a tiny graph per
 * provider via ortInfo(), not a list of what the package claims; a provider whose shared
 * library is absent is reported without trying); the WebGPU adapter (name, vendor, graphics API,
 * hardware or software, from a probe session in a child process) or why there is none; the tfjs backends that initialise and the
 * one chosen; whether Electron is installed; thread counts; the workspace database path.
 * Every missing optional part is reported with the command that adds it.
 */
import type { Command } from 'commander';
import { createRequire } from 'node:module';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { availableParallelism, cpus, totalmem } from 'node:os';
import semver from 'semver';
import { arborHome, defaultDbPath } from '../../store/db';
import type { WebgpuInfo } from '../../tensor/webgpu';

const require = createRequire(import.meta.url);
/** The Node versions Arbor supports: package.json's `engines.node`. */
const NODE_ENGINES = (require('../../../package.json') as { engines: { node: string } }).engines.node;

export interface DoctorPart {
  /** What was checked, e.g. "ORT execution provider cuda". */
  name: string;
  ok: boolean;
  /** Version, chosen value, or why it is missing. */
  detail: string;
  /** Optional parts only: the command that adds a missing one. */
  fix?: string;
}

export interface DoctorReport {
  /** `supported`: the version satisfies package.json's `engines.node` (the lines CI runs on). */
  node: { version: string; platform: string; arch: string; abi: string; supported: boolean; engines: string };
  cpu: { model: string; cores: number; memoryGiB: number };
  ort: { version: string; providers: { name: string; loads: boolean; error?: string; fix?: string }[] };
  /** The WebGPU execution provider's adapter (engine/tensor/webgpu.ts): which device, hardware or software, or why there is none. */
  webgpu: WebgpuInfo;
  tfjs: { backends: { name: string; package: string; available: boolean; error?: string; fix?: string }[]; chosen: string };
  electron: { installed: boolean; version?: string; fix?: string };
  threads: { available: number; ortIntraOp: number; ortInterOp: number; tfjsWasm: number; uvThreadpool: number };
  database: { home: string; path: string; exists: boolean; bytes?: number; fromEnv: boolean };
  /** Every checked part, in display order; `missing` lists the optional ones that are absent. */
  parts: DoctorPart[];
  missing: { name: string; fix: string }[];
}

const TFJS_PACKAGES: Record<string, string> = {
  'tensorflow-gpu': '@tensorflow/tfjs-node-gpu',
  tensorflow: '@tensorflow/tfjs-node',
  wasm: '@tensorflow/tfjs-backend-wasm',
  cpu: '@tensorflow/tfjs (built in)',
};

const ORT_FIX: Record<string, string> = {
  cuda: 'npm run setup:gpu',
  dml: 'npm install onnxruntime-node (DirectML ships with it on Windows)',
  coreml: 'npm install onnxruntime-node (CoreML ships with it on macOS)',
};

function packageVersion(name: string): string | undefined {
  try {
    return (require(`${name}/package.json`) as { version: string }).version;
  } catch {
    return undefined;
  }
}

/**
 * The Electron binary, if it has been downloaded: the package records its path under dist/ in
 * path.txt once the download finished. Never triggers a download (unlike `require('electron')`).
 */
export function electronBinary(): string | null {
  try {
    const dir = dirname(require.resolve('electron/package.json'));
    const rel = readFileSync(join(dir, 'path.txt'), 'utf8').trim();
    const bin = join(dir, 'dist', rel);
    return rel && existsSync(bin) ? bin : null;
  } catch {
    return null;
  }
}

/** Collect the report. Loads ONNX Runtime and tfjs (a few seconds on first use). */
export async function doctorReport(): Promise<DoctorReport> {
  const { ortInfo, defaultThreads } = await import('../../tensor/ort');
  const { webgpuInfo } = await import('../../tensor/webgpu');
  const webgpu = await webgpuInfo();
  const { tfjsInfo } = await import('../../tensor/tfjs');
  const ortI = await ortInfo();
  const tfI = await tfjsInfo();
  const electronVersion = packageVersion('electron');
  // Since Electron 45 the package has no install script: `require('electron')` downloads the
  // binary on first use (and throws offline). doctor only looks, so it checks the files.
  const electronInstalled = electronVersion !== null && electronBinary() !== null;
  const dbPath = defaultDbPath();
  const dbExists = existsSync(dbPath);

  const report: DoctorReport = {
    node: {
      version: process.versions.node,
      platform: process.platform,
      arch: process.arch,
      abi: process.versions.modules,
      supported: semver.satisfies(process.versions.node, NODE_ENGINES),
      engines: NODE_ENGINES,
    },
    cpu: { model: cpus()[0]?.model?.trim() ?? 'unknown', cores: availableParallelism(), memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10 },
    ort: {
      version: ortI.version,
      providers: ortI.providers.map((p) => ({ ...p, ...(p.loads || !ORT_FIX[p.name] ? {} : { fix: ORT_FIX[p.name] }) })),
    },
    webgpu,
    tfjs: {
      backends: tfI.backends.map((b) => ({
        name: b.name,
        package: TFJS_PACKAGES[b.name] ?? b.name,
        available: b.available,
        ...(b.error ? { error: b.error } : {}),
        ...(b.available ? {} : { fix: b.name === 'tensorflow-gpu' || b.name === 'tensorflow' ? `npm install ${TFJS_PACKAGES[b.name]}` : 'npm install' }),
      })),
      chosen: tfI.chosen,
    },
    electron: electronInstalled
      ? { installed: true, version: electronVersion }
      : electronVersion
        ? // Electron 45+: the package installs without its binary, which downloads on first use.
          { installed: false, version: electronVersion, fix: 'npx install-electron --no' }
        : { installed: false, fix: 'npm install electron' },
    threads: {
      available: availableParallelism(),
      ortIntraOp: defaultThreads(),
      ortInterOp: 1,
      // tfjs-backend-wasm runs single-threaded in Node (no SharedArrayBuffer worker pool there).
      tfjsWasm: 1,
      uvThreadpool: Number(process.env.UV_THREADPOOL_SIZE ?? 4),
    },
    database: {
      home: arborHome(),
      path: dbPath,
      exists: dbExists,
      ...(dbExists ? { bytes: statSync(dbPath).size } : {}),
      fromEnv: process.env.ARBOR_HOME !== undefined,
    },
    parts: [],
    missing: [],
  };

  const parts: DoctorPart[] = [
    {
      name: 'Node.js',
      ok: report.node.supported,
      detail: `${report.node.version} (${report.node.platform}/${report.node.arch}, ABI ${report.node.abi})${report.node.supported ? '' : `: not a supported version (package.json engines: ${report.node.engines})`}`,
      ...(report.node.supported ? {} : { fix: 'install Node 22 (22.12 or later) or Node 24, e.g. `npx -y -p node@22 node bin/arbor.mjs doctor` to try it' }),
    },
    { name: 'CPU', ok: true, detail: `${report.cpu.model}, ${report.cpu.cores} cores, ${report.cpu.memoryGiB} GiB` },
    { name: 'ONNX Runtime', ok: true, detail: `onnxruntime-node ${report.ort.version}` },
    ...report.ort.providers.map((p) => ({
      name: `  ORT provider ${p.name}`,
      ok: p.loads,
      detail: p.loads ? 'session created and ran' : `does not load: ${p.error ?? 'unknown error'}`,
      fix: p.fix,
    })),
    {
      name: '  ORT provider webgpu',
      ok: webgpu.available,
      detail: webgpu.adapter
        ? `${webgpu.adapter.name} (${webgpu.adapter.vendor}; ${webgpu.adapter.backend}; ${webgpu.adapter.software ? 'software emulation: correctness only, device: auto will not pick it' : 'hardware'})`
        : `no adapter: ${webgpu.error ?? 'unknown'}`,
      ...(webgpu.available ? {} : { fix: webgpu.fix }),
    },
    { name: 'tfjs', ok: true, detail: `@tensorflow/tfjs ${packageVersion('@tensorflow/tfjs') ?? '?'}, chosen backend: ${report.tfjs.chosen}` },
    ...report.tfjs.backends.map((b) => ({
      name: `  tfjs backend ${b.name}`,
      ok: b.available,
      detail: b.available ? `${b.package} initialised` : `${b.package}: ${b.error ?? 'not available'}`,
      fix: b.fix,
    })),
    {
      name: 'Electron',
      ok: report.electron.installed,
      detail: report.electron.installed
        ? `electron ${report.electron.version}`
        : report.electron.version
          ? `package ${report.electron.version} present but its binary is missing`
          : 'not installed (the CLI and `arbor serve` work without it; installing downloads its binary, so it needs network)',
      fix: report.electron.fix,
    },
    {
      name: 'Threads',
      ok: true,
      detail: `${report.threads.available} available; ORT intra-op ${report.threads.ortIntraOp}, inter-op ${report.threads.ortInterOp}; tfjs wasm ${report.threads.tfjsWasm}; libuv pool ${report.threads.uvThreadpool}`,
    },
    {
      name: 'Database',
      ok: true,
      detail: `${report.database.path} (${report.database.exists ? `${((report.database.bytes ?? 0) / 2 ** 20).toFixed(1)} MiB` : 'not created yet'}${report.database.fromEnv ? ', from ARBOR_HOME' : ', set ARBOR_HOME to move it'})`,
    },
  ];
  report.parts = parts;
  report.missing = parts.filter((p) => !p.ok && p.fix).map((p) => ({ name: p.name.trim(), fix: p.fix! }));
  return report;
}

export function formatDoctor(r: DoctorReport): string {
  const rows = r.parts.map((p) => [p.ok ? 'ok' : '--', p.name, p.detail]);
  const w0 = Math.max(...rows.map((x) => x[1].length));
  const lines = rows.map(([mark, name, detail]) => `${mark.padEnd(2)}  ${name.padEnd(w0)}  ${detail}`);
  if (r.missing.length) {
    lines.push('', 'Optional parts missing, and the command that adds each:');
    const w = Math.max(...r.missing.map((m) => m.name.length));
    for (const m of r.missing) lines.push(`  ${m.name.padEnd(w)}  ${m.fix}`);
  }
  return lines.join('\n');
}

export function register(program: Command): void {
  program
    .command('doctor')
    .description('report Node, ONNX Runtime providers, tfjs backends, Electron, threads and the database path')
    .option('--json', 'print one JSON object')
    .action(async (o: { json?: boolean }) => {
      const r = await doctorReport();
      console.log(o.json ? JSON.stringify(r, null, 2) : formatDoctor(r));
    });
}

#!/usr/bin/env node
// `npm run bundle`: the engine as one offline archive, dist/arbor-<version>-<platform>-<arch>.tar.xz
// (this machine's platform; at most 60 MiB), for machines with no Node, no npm and no network:
//
//   arbor                    launcher (sh): node/bin/node bin/arbor.mjs "$@"
//   node/bin/node            the Node runtime this script runs on (a supported line; no npm, headers or docs)
//   bin/arbor.mjs            → engine/arbor.mjs, the CLI bundled with esbuild (no tsx, no TypeScript)
//   engine/**.mjs            files the engine opens by URL next to its sources, built at the same
//                            places: the ORT worker and its handler modules, the sandbox's child
//                            entry, and the benchmark scripts of `arbor bench`
//   node_modules/            only what cannot be bundled: native addons for this platform alone
//                            (onnxruntime-node's library without GPU providers, better-sqlite3),
//                            esbuild (the sandbox compiles user TypeScript), wasm files
//   renderer/dist, resources/, package.json (version, engines)
//
// import.meta.url: every module sees the URL its source file would have in the archive (with .mjs),
// so the paths the engine computes from it (../../resources, ./ort-worker.ts → .mjs) hold.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const PLATFORM = `${process.platform}-${process.arch}`;
const NAME = `arbor-${pkg.version}-${PLATFORM}`;
const DIST = join(ROOT, 'dist');
const STAGE = join(DIST, NAME);
const ARCHIVE = join(DIST, `${NAME}.tar.xz`);
const LIMIT = 60 * 2 ** 20;
const log = (s) => process.stderr.write(`bundle: ${s}\n`);
const t0 = Date.now();

// ---- what the engine opens by URL: `new URL('./x.ts', import.meta.url)` and modules that pass their own URL
const BENCH_ENTRIES = ['scripts/bench/gpu.ts', 'scripts/bench/decode-graph.ts', 'scripts/bench/train.ts'];
// (a .d.ts named this way is a file read as text, not a module)
const URL_REF = /new URL\((['"])(\.{1,2}\/[^'"]+?)(?<!\.d)\.ts\1,\s*import\.meta\.url\)/g;
function tsFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [join(dir, e.name)] : [],
  );
}
function urlEntries() {
  const found = new Set();
  const queue = [...tsFiles(join(ROOT, 'engine')), ...BENCH_ENTRIES.map((f) => join(ROOT, f))];
  const seen = new Set();
  while (queue.length) {
    const f = queue.pop();
    if (seen.has(f)) continue;
    seen.add(f);
    const text = readFileSync(f, 'utf8');
    if (/new URL\(import\.meta\.url\)/.test(text)) found.add(f);
    for (const m of text.matchAll(URL_REF)) {
      const target = resolve(dirname(f), `${m[2]}.ts`);
      if (existsSync(target)) {
        found.add(target);
        queue.push(target);
      }
    }
  }
  for (const b of BENCH_ENTRIES) found.add(join(ROOT, b));
  return [...found];
}

const mirrored = (file) => join(STAGE, relative(ROOT, file)).replace(/\.ts$/, '.mjs');

/** import.meta.url → the module's own place in the archive; `new URL('./x.ts', …)` → './x.mjs'. */
function urlPlugin(outfile) {
  return {
    name: 'arbor-urls',
    setup(b) {
      b.onLoad({ filter: /\.(ts|mjs)$/ }, (args) => {
        if (args.path.includes(`${sep}node_modules${sep}`) || !args.path.startsWith(ROOT)) return undefined;
        let text = readFileSync(args.path, 'utf8');
        if (!text.includes('import.meta')) return undefined;
        text = text.replace(URL_REF, (_m, q, p) => `new URL(${q}${p}.mjs${q}, import.meta.url)`);
        // `const require = createRequire(import.meta.url)` hides require() calls from esbuild: let it bundle
        // them (require.resolve then goes to the banner's require, which finds the archive's node_modules).
        text = text.replace(/^const require = createRequire\(import\.meta\.url\);$/m, '');
        let rel = relative(dirname(outfile), mirrored(args.path)).split(sep).join('/');
        if (!rel.startsWith('.')) rel = `./${rel}`;
        text = text.replace(/import\.meta\.url/g, `new URL(${JSON.stringify(rel)}, import.meta.url).href`);
        return { contents: text, loader: args.path.endsWith('.ts') ? 'ts' : 'js' };
      });
    },
  };
}

const EXTERNAL = [
  'onnxruntime-node',
  'better-sqlite3',
  'esbuild',
  '@tensorflow/tfjs-node',
  '@tensorflow/tfjs-node-gpu',
  'electron',
  'bufferutil',
  'utf-8-validate',
  'tsx',
  'tsx/*',
  'vite',
];
// Bundled CommonJS code calls require() and reads __dirname: give the ESM output both.
const BANNER = [
  "import { createRequire as __arborRequire } from 'node:module';",
  "import { fileURLToPath as __arborPath } from 'node:url';",
  "import { dirname as __arborDir } from 'node:path';",
  'const require = __arborRequire(import.meta.url);',
  'const __filename = __arborPath(import.meta.url);',
  'const __dirname = __arborDir(__filename);',
].join('\n');

async function bundleOne(entry, outfile) {
  await build({
    ...entry,
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    // Whitespace and syntax only: the sandbox sends helpers into QuickJS as their source text
    // (Function.prototype.toString), so identifiers must keep their names.
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames: true,
    legalComments: 'none',
    external: EXTERNAL,
    banner: { js: BANNER },
    plugins: [urlPlugin(outfile)],
    logLevel: 'error',
  });
}

function copyFiltered(from, to, keep = () => true) {
  if (!existsSync(from)) throw new Error(`${relative(ROOT, from)} is missing: run npm install`);
  cpSync(from, to, { recursive: true, dereference: true, filter: (src) => statSync(src).isDirectory() || keep(relative(from, src).split(sep).join('/')) });
}

// ---- 0. the Node runtime this runs on
const [major] = process.versions.node.split('.').map(Number);
if (major !== 22 && major !== 24) throw new Error(`bundle: run it on Node 22 or 24 (the archive carries this Node; got ${process.version})`);
const nodeHome = resolve(dirname(process.execPath), '..');

rmSync(STAGE, { recursive: true, force: true });
rmSync(ARCHIVE, { force: true });
mkdirSync(STAGE, { recursive: true });

// ---- 1. the renderer (built by Vite when missing or stale), for `arbor serve`
{
  const { register } = await import('tsx/esm/api');
  const unregister = register();
  const rb = await import(pathToFileURL(join(ROOT, 'engine/cli/renderer-build.ts')).href);
  const r = await rb.ensureRendererBuild(rb.rendererDistDir({}), (t) => process.stderr.write(t));
  log(`renderer ${r}`);
  await unregister();
  cpSync(join(ROOT, 'renderer', 'dist'), join(STAGE, 'renderer', 'dist'), { recursive: true });
}

// ---- 2. the engine
const commands = readdirSync(join(ROOT, 'engine/cli/commands'))
  .filter((f) => f.endsWith('.ts'))
  .sort();
const mainEntry = [
  ...commands.map((f, i) => `import * as c${i} from './commands/${f.replace(/\.ts$/, '')}';`),
  "import { main } from './main';",
  `await main(process.argv.slice(2), { ${commands.map((f, i) => `${JSON.stringify(f)}: c${i}`).join(', ')} });`,
].join('\n');
await bundleOne(
  { stdin: { contents: mainEntry, resolveDir: join(ROOT, 'engine/cli'), sourcefile: 'engine/cli/bundle-main.ts', loader: 'ts' } },
  join(STAGE, 'engine', 'arbor.mjs'),
);
const extra = urlEntries();
for (const f of extra) await bundleOne({ entryPoints: [f] }, mirrored(f));
log(`engine bundled (${commands.length} commands; ${extra.map((f) => relative(ROOT, f)).join(', ')})`);
// Worker threads start here and import their module (an .mjs of the archive): no TypeScript loader.
writeFileSync(
  join(STAGE, 'engine', 'worker-bootstrap.mjs'),
  "import { workerData } from 'node:worker_threads';\nimport { pathToFileURL } from 'node:url';\nconst t = workerData && workerData.__module;\nif (!t) throw new Error('worker-bootstrap: workerData.__module is required');\nawait import(t.startsWith('file:') ? t : pathToFileURL(t).href);\n",
);
mkdirSync(join(STAGE, 'bin'));
writeFileSync(join(STAGE, 'bin', 'arbor.mjs'), "#!/usr/bin/env node\nimport '../engine/arbor.mjs';\n");
// Files the engine reads next to its modules.
for (const f of [
  'engine/interop/verl/reward.py',
  ...readdirSync(join(ROOT, 'scripts/bench'))
    .filter((f) => f.endsWith('.py'))
    .map((f) => `scripts/bench/${f}`),
]) {
  mkdirSync(dirname(join(STAGE, f)), { recursive: true });
  copyFileSync(join(ROOT, f), join(STAGE, f));
}
cpSync(join(ROOT, 'resources'), join(STAGE, 'resources'), { recursive: true });
writeFileSync(
  join(STAGE, 'package.json'),
  `${JSON.stringify({ name: 'arbor', version: pkg.version, private: true, type: 'module', license: pkg.license, engines: pkg.engines }, null, 2)}\n`,
);

// ---- 3. what stays outside the bundle: this platform's native parts
const NM = join(ROOT, 'node_modules');
const SNM = join(STAGE, 'node_modules');
const js = (p) => /\.(c?js|json)$/.test(p) && !p.endsWith('.map');
const ortBin = `bin/napi-v6/${process.platform}/${process.arch}/`;
copyFiltered(
  join(NM, 'onnxruntime-node'),
  join(SNM, 'onnxruntime-node'),
  (p) =>
    p === 'package.json' ||
    (p.startsWith('dist/') && js(p)) ||
    (p.startsWith(ortBin) && !/providers_(cuda|tensorrt|rocm|migraphx|openvino)|libcudart|libcublas|libcudnn/.test(p)),
);
copyFiltered(join(NM, 'onnxruntime-common'), join(SNM, 'onnxruntime-common'), (p) => p === 'package.json' || (p.startsWith('dist/cjs/') && js(p)));
const sqlitePrebuild = `prebuilds/${process.platform}${process.platform === 'linux' && spawnSync('ldd', ['--version'], { encoding: 'utf8' }).stdout?.includes('musl') ? 'musl' : ''}-${process.arch}.node`;
copyFiltered(join(NM, 'better-sqlite3'), join(SNM, 'better-sqlite3'), (p) => p === 'package.json' || p.startsWith('lib/') || p === sqlitePrebuild);
copyFiltered(join(NM, 'esbuild'), join(SNM, 'esbuild'), (p) => p === 'package.json' || p === 'lib/main.js');
const esbuildPlatform = `@esbuild/${PLATFORM}`;
copyFiltered(join(NM, esbuildPlatform), join(SNM, esbuildPlatform), () => true);
copyFiltered(
  join(NM, '@jitl/quickjs-wasmfile-release-sync'),
  join(SNM, '@jitl/quickjs-wasmfile-release-sync'),
  (p) => !p.endsWith('.map') && !p.endsWith('.d.ts'),
);
copyFiltered(
  join(NM, '@tensorflow/tfjs-backend-wasm'),
  join(SNM, '@tensorflow/tfjs-backend-wasm'),
  (p) => p === 'package.json' || /^dist\/[^/]+\.wasm$/.test(p),
);

// ---- 4. the runtime and the launcher
mkdirSync(join(STAGE, 'node', 'bin'), { recursive: true });
copyFileSync(process.execPath, join(STAGE, 'node', 'bin', 'node'));
chmodSync(join(STAGE, 'node', 'bin', 'node'), 0o755);
if (existsSync(join(nodeHome, 'LICENSE'))) copyFileSync(join(nodeHome, 'LICENSE'), join(STAGE, 'node', 'LICENSE'));
writeFileSync(
  join(STAGE, 'arbor'),
  [
    '#!/bin/sh',
    '# Arbor (offline bundle): its own Node runtime and engine; nothing is installed or downloaded.',
    'HERE=$(dirname "$(readlink -f "$0")")',
    'exec "$HERE/node/bin/node" "$HERE/bin/arbor.mjs" "$@"',
    '',
  ].join('\n'),
);
chmodSync(join(STAGE, 'arbor'), 0o755);

// ---- 5. the archive (ARBOR_BUNDLE_STAGE_ONLY=1: stop at the folder, for a quick check)
if (process.env.ARBOR_BUNDLE_STAGE_ONLY === '1') {
  console.log(STAGE);
  process.exit(0);
}
log('compressing (xz)…');
execFileSync('sh', ['-c', `tar -C "${DIST}" -cf - "${NAME}" | xz -T0 -6 > "${ARCHIVE}"`], { stdio: 'inherit' });
const size = statSync(ARCHIVE).size;
const mib = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;
log(`${relative(ROOT, ARCHIVE)}: ${mib(size)} (limit ${mib(LIMIT)}), in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
if (size > LIMIT) {
  console.error(`bundle: ${relative(ROOT, ARCHIVE)} is ${mib(size)}, over the ${mib(LIMIT)} limit`);
  process.exit(1);
}
console.log(ARCHIVE);

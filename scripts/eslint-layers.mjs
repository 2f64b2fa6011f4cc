// The engine's layering as ESLint rules (loaded by eslint.config.js, so `npm test` and
// `npm run lint` check it). docs/ARCHITECTURE.md §2 draws the layers; LAYERS below is that
// drawing, bottom to top, and the two rules keep the code to it:
//   arbor/layers    a file in engine/<layer>/ imports only its own layer and those below it
//                   (static imports, re-exports, `import type`, dynamic `import('…')`);
//   arbor/no-cycle  no import circle between files (type-only imports count: a circle of types
//                   is still two files that cannot be read one after the other).
// The import graph for no-cycle is read with TypeScript's preProcessFile (no type checking),
// once per file per ESLint process.
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** Bottom to top. env/mcp belongs to env. A layer may import any layer listed before it. */
export const LAYERS = [
  'base',
  'store',
  'tensor',
  'model',
  'hub',
  'env',
  'rl',
  'rollout',
  'config',
  'train',
  'tasks',
  'openai',
  'experiment',
  'replay',
  'interop',
  'server',
  'cli',
];

/**
 * Edges allowed against the order, each with its reason (engine-relative paths, no extension):
 * `{ from: 'tensor/ort-worker', to: 'rollout/worker-kv' }` was one until the ORT worker learned to
 * load its handler modules by URL. None today.
 */
export const ALLOWED_UPWARD = [];

const EXTS = ['.ts', '.tsx', '.mts', '.mjs', '.js', '.cjs'];

function resolveRelative(fromFile, spec) {
  if (!spec.startsWith('.')) return null;
  const base = path.resolve(path.dirname(fromFile), spec);
  const noJs = base.replace(/\.(m|c)?js$/, '');
  const candidates = [base, ...EXTS.map((e) => noJs + e), ...EXTS.map((e) => path.join(base, 'index' + e))];
  for (const c of candidates) {
    try {
      if (fs.statSync(c).isFile()) return c;
    } catch {}
  }
  return null;
}

/** engine/<layer>/… → { layer, rel } (rel: engine-relative path without extension), or null. */
function engineLayer(file) {
  const parts = file.split(path.sep);
  const i = parts.lastIndexOf('engine');
  if (i < 0 || i + 2 >= parts.length) return null;
  const layer = parts[i + 1];
  if (!LAYERS.includes(layer)) return null;
  const rel = parts
    .slice(i + 1)
    .join('/')
    .replace(/\.[cm]?[jt]sx?$/, '');
  return { layer, rel };
}

function isAllowed(fromFile, toFile) {
  const a = engineLayer(fromFile);
  const b = engineLayer(toFile);
  return !!a && !!b && ALLOWED_UPWARD.some((e) => e.from === a.rel && e.to === b.rel);
}

/** The import specifiers a node brings in, with the node to report on. */
function importVisitors(report) {
  const check = (node, source) => {
    if (source && source.type === 'Literal' && typeof source.value === 'string') report(node, source.value);
  };
  return {
    ImportDeclaration: (n) => check(n, n.source),
    ExportNamedDeclaration: (n) => n.source && check(n, n.source),
    ExportAllDeclaration: (n) => check(n, n.source),
    ImportExpression: (n) => check(n, n.source),
    TSImportType: (n) => {
      const arg = n.argument?.literal ?? n.argument;
      check(n, arg);
    },
  };
}

const layers = {
  meta: {
    type: 'problem',
    docs: { description: 'engine/<layer>/ imports only its own layer and the layers below it (docs/ARCHITECTURE.md §2)' },
    schema: [],
  },
  create(context) {
    const file = context.filename ?? context.getFilename();
    const from = engineLayer(file);
    if (!from) return {};
    const rank = LAYERS.indexOf(from.layer);
    return importVisitors((node, spec) => {
      const target = resolveRelative(file, spec);
      if (!target) return;
      const to = engineLayer(target);
      if (!to || LAYERS.indexOf(to.layer) <= rank) return;
      if (isAllowed(file, target)) return;
      context.report({
        node,
        message: `engine/${from.layer}/ must not import engine/${to.layer}/ ('${spec}'): ${to.layer} is above ${from.layer} in docs/ARCHITECTURE.md §2 (bottom to top: ${LAYERS.join(' < ')})`,
      });
    });
  },
};

// ---- no-cycle: a cached file → imported files graph ----
const graphCache = new Map(); // file → { mtimeMs, deps: string[] }

function depsOf(file) {
  let st;
  try {
    st = fs.statSync(file);
  } catch {
    return [];
  }
  const hit = graphCache.get(file);
  if (hit && hit.mtimeMs === st.mtimeMs) return hit.deps;
  const info = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
  const deps = [];
  for (const imp of info.importedFiles) {
    const t = resolveRelative(file, imp.fileName);
    if (t && !/node_modules/.test(t) && !isAllowed(file, t)) deps.push(t);
  }
  graphCache.set(file, { mtimeMs: st.mtimeMs, deps });
  return deps;
}

/** A path target → … → file, or null (breadth-first, so the shortest circle is named). */
function pathBack(target, file) {
  const prev = new Map([[target, null]]);
  const queue = [target];
  while (queue.length) {
    const cur = queue.shift();
    for (const d of depsOf(cur)) {
      if (prev.has(d)) continue;
      prev.set(d, cur);
      if (d === file) {
        const chain = [];
        for (let x = d; x !== null; x = prev.get(x)) chain.unshift(x);
        return chain;
      }
      queue.push(d);
    }
  }
  return null;
}

const noCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'no import circle between files (type-only imports included)' },
    schema: [],
  },
  create(context) {
    const file = context.filename ?? context.getFilename();
    const root = context.cwd ?? process.cwd();
    return importVisitors((node, spec) => {
      const target = resolveRelative(file, spec);
      if (!target || /node_modules/.test(target) || isAllowed(file, target)) return;
      const chain = pathBack(target, file);
      if (!chain) return;
      const names = [file, ...chain].map((f) => path.relative(root, f));
      context.report({ node, message: `import circle: ${names.join(' → ')}` });
    });
  },
};

export default { meta: { name: 'arbor-layers' }, rules: { layers, 'no-cycle': noCycle } };

// The engine's tiers as ESLint rules (loaded by eslint.config.js, so `npm test` and `npm run lint`
// check them). docs/ARCHITECTURE.md §2 draws the tiers; TIERS below is that drawing, bottom to top,
// and the two rules keep the code to it:
//   arbor/layers    a file in engine/<folder>/ imports only folders of its own tier and the tiers
//                   below it; in a tier of siblings (the features) a folder imports none of the
//                   others (static imports, re-exports, `import type`, dynamic `import('…')`);
//   arbor/no-cycle  no import circle between files (type-only imports count: a circle of types
//                   is still two files that cannot be read one after the other).
// The import graph for no-cycle is read with TypeScript's preProcessFile (no type checking),
// once per file per ESLint process.
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * Bottom to top. A folder may import its own tier (any folder of it, unless `siblings`) and every
 * tier listed before it. env/mcp belongs to env.
 */
export const TIERS = [
  { name: 'core', folders: ['base', 'store', 'tensor', 'model', 'hub'] },
  { name: 'agent', folders: ['env', 'rollout'] },
  { name: 'learn', folders: ['rl', 'config', 'train'] },
  { name: 'tasks', folders: ['tasks', 'openai', 'run'] },
  { name: 'features', folders: ['recipes', 'stats', 'replay', 'playground', 'interop'], siblings: true },
  { name: 'hosts', folders: ['server', 'cli'] },
];

/** Every engine folder, bottom tier first. */
export const LAYERS = TIERS.flatMap((t) => t.folders);

const tierOf = (folder) => TIERS.findIndex((t) => t.folders.includes(folder));

/**
 * Edges allowed against the tiers, each with its reason (engine-relative paths, no extension):
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

/** engine/<folder>/… → { layer: folder, rel } (rel: engine-relative path without extension), or null. */
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
      const arg = n.source ?? n.argument?.literal ?? n.argument;
      check(n, arg);
    },
  };
}

const layers = {
  meta: {
    type: 'problem',
    docs: { description: 'engine/<folder>/ imports only its own tier and the tiers below it, and no sibling feature (docs/ARCHITECTURE.md §2)' },
    schema: [],
  },
  create(context) {
    const file = context.filename ?? context.getFilename();
    const from = engineLayer(file);
    if (!from) return {};
    const rank = tierOf(from.layer);
    const tier = TIERS[rank];
    const order = TIERS.map((t) => `${t.name} (${t.folders.join(', ')})`).join(' < ');
    return importVisitors((node, spec) => {
      const target = resolveRelative(file, spec);
      if (!target) return;
      const to = engineLayer(target);
      if (!to || to.layer === from.layer) return;
      const toRank = tierOf(to.layer);
      const upward = toRank > rank;
      const sibling = toRank === rank && tier.siblings;
      if ((!upward && !sibling) || isAllowed(file, target)) return;
      const why = upward
        ? `${to.layer}/ is in the ${TIERS[toRank].name} tier, above ${from.layer}/'s ${tier.name} tier`
        : `${from.layer}/ and ${to.layer}/ are sibling ${tier.name}, which import none of each other`;
      context.report({
        node,
        message: `engine/${from.layer}/ must not import engine/${to.layer}/ ('${spec}'): ${why} (docs/ARCHITECTURE.md §2, bottom to top: ${order})`,
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

// The Node versions Arbor runs on (package.json "engines"): better-sqlite3 and onnxruntime-node
// ship native addons for these; on another Node they crash (Node 20: "Segmentation fault") instead
// of failing with a message. bin/arbor.mjs checks before anything loads a native addon.
export const SUPPORTED_NODE = '^22.12.0 || ^24.0.0';

/** null when `version` (e.g. "v22.12.0") is supported, else the one line to print. */
export function nodeVersionProblem(version) {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(String(version));
  const [major, minor] = m ? [Number(m[1]), Number(m[2])] : [NaN, NaN];
  if ((major === 22 && minor >= 12) || major === 24) return null;
  return `arbor: Node ${version} is not supported; install Node 22 (22.12 or later) or Node 24 (package.json engines: ${SUPPORTED_NODE})`;
}

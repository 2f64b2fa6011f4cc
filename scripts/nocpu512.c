// scripts/nocpu512.c, built and preloaded by scripts/avx2-native.sh (issue #38): a Node process
// that sees a CPU without AVX-512, AMX or AVX-VNNI, running natively. Linux's CPUID faulting
// (arch_prctl ARCH_SET_CPUID 0; /proc/cpuinfo flag cpuid_fault) makes every CPUID instruction
// raise SIGSEGV; the handler runs the real CPUID, clears those feature bits (leaf 7 and 7.1, and
// the AVX-512/AMX state components of leaf 0xD) and steps over it. ONNX Runtime's MLAS reads
// CPUID once to pick its kernels, so it takes the AVX2/FMA3 ones an AVX2-only CPU gets, executed
// by this CPU at native speed. The setting survives fork and threads; a child's execve resets it,
// and the preload (LD_PRELOAD is inherited) sets it again in every Node child.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <asm/prctl.h>

static struct sigaction next_segv; // the handler the program installed (we stay in front of it)
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static volatile unsigned long trapped;
static int enabled;

static long set_cpuid(int on) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, on); }

static void mask(uint32_t leaf, uint32_t sub, uint32_t *a, uint32_t *b, uint32_t *c, uint32_t *d) {
  (void)a;
  if (leaf == 7 && sub == 0) {
    // EBX: AVX512F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31
    *b &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31));
    // ECX: VBMI 1, VBMI2 6, VNNI 11, BITALG 12, VPOPCNTDQ 14
    *c &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
    // EDX: 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, AMX-BF16 22, AVX512-FP16 23, AMX-TILE 24, AMX-INT8 25
    *d &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
  } else if (leaf == 7 && sub == 1) {
    // EAX: AVX-VNNI 4, AVX512-BF16 5, AMX-FP16 21
    *a &= ~((1u << 4) | (1u << 5) | (1u << 21));
  } else if (leaf == 0xd && sub == 0) {
    // XCR0 components the CPU supports: opmask 5, ZMM_Hi256 6, Hi16_ZMM 7, XTILECFG 17, XTILEDATA 18
    *a &= ~((1u << 5) | (1u << 6) | (1u << 7) | (1u << 17) | (1u << 18));
  }
}

static void on_segv(int sig, siginfo_t *si, void *uc_) {
  ucontext_t *uc = uc_;
  const unsigned char *ip = (const unsigned char *)uc->uc_mcontext.gregs[REG_RIP];
  if (ip && ip[0] == 0x0f && ip[1] == 0xa2) {
    uint32_t leaf = (uint32_t)uc->uc_mcontext.gregs[REG_RAX], sub = (uint32_t)uc->uc_mcontext.gregs[REG_RCX];
    uint32_t a, b, c, d;
    int saved = errno;
    set_cpuid(1);
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(leaf), "c"(sub));
    set_cpuid(0);
    errno = saved;
    mask(leaf, sub, &a, &b, &c, &d);
    uc->uc_mcontext.gregs[REG_RAX] = a;
    uc->uc_mcontext.gregs[REG_RBX] = b;
    uc->uc_mcontext.gregs[REG_RCX] = c;
    uc->uc_mcontext.gregs[REG_RDX] = d;
    uc->uc_mcontext.gregs[REG_RIP] += 2;
    trapped++;
    return;
  }
  // Not a CPUID: the program's own handler, else the default action (the fault repeats and kills).
  if (next_segv.sa_flags & SA_SIGINFO) {
    if (next_segv.sa_sigaction) { next_segv.sa_sigaction(sig, si, uc_); return; }
  } else if (next_segv.sa_handler != SIG_DFL && next_segv.sa_handler != SIG_IGN) {
    next_segv.sa_handler(sig);
    return;
  }
  struct sigaction dfl = {0};
  dfl.sa_handler = SIG_DFL;
  real_sigaction(SIGSEGV, &dfl, NULL);
}

// Programs that install a SIGSEGV handler (V8's WebAssembly trap handler, Node's) get it called
// behind ours: we stay first, so a CPUID is emulated whoever installed what.
int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  if (!real_sigaction) real_sigaction = dlsym(RTLD_NEXT, "sigaction");
  if (sig != SIGSEGV || !enabled) return real_sigaction(sig, act, old);
  if (old) *old = next_segv;
  if (act) next_segv = *act;
  return 0;
}

__attribute__((constructor)) static void init(void) {
  real_sigaction = dlsym(RTLD_NEXT, "sigaction");
  // Only Node processes (the tests' children included): Chromium and the rest run as they are.
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = 0;
  const char *base = strrchr(exe, '/');
  if (strcmp(base ? base + 1 : exe, "node") != 0) return;
  struct sigaction sa = {0};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (real_sigaction(SIGSEGV, &sa, NULL) != 0) return;
  if (set_cpuid(0) != 0) {
    fprintf(stderr, "nocpu512: arch_prctl(ARCH_SET_CPUID, 0) failed: %s (no CPUID faulting here)\n", strerror(errno));
    exit(97);
  }
  enabled = 1;
  if (getenv("NOCPU512_VERBOSE")) fprintf(stderr, "nocpu512: CPUID faulting on in %d (%s)\n", (int)getpid(), exe);
  // NOCPU512_LOG=<file>: one line per masked process (the script counts them).
  const char *log = getenv("NOCPU512_LOG");
  if (log) {
    FILE *f = fopen(log, "a");
    if (f) {
      fprintf(f, "%d\n", (int)getpid());
      fclose(f);
    }
  }
}

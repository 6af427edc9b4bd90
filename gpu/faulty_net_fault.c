// The faults of libnccl-net-faulty.so, and its logging: what is armed, since
// when, and whether it holds a given send connection back now.
//
// The problem: the job arms a fault at a step it chooses, from its own thread
// (ctypes, ncclwatch_net_fault_arm), or the environment arms one some seconds
// after init; NCCL's proxy thread must see it at its next test() without a
// lock or a sleep. So the state is a handful of atomics: the mode, the
// per-message delay for "slow", the connection that "link" picked, and the
// time the timed fault arms at. gpu/faulty_net.c asks FaultyNetFaultHolds for
// each message at the head of a send queue and tells FaultyNetFaultOnIsend of
// each send; both are lock-free and allocate nothing.
//
// Modes (gpu/faulty_net.c's opening says what each stands for):
//   stop  every send connection of the process is held;
//   link  the first send connection that isend is called on after arming is;
//   slow  each message waits NET_FAULT_SLOW_MS (read when armed) before its
//         first byte goes;
//   off   none: what was held goes on (the tests use it to see that held
//         bytes were kept, not lost).
// Arming is logged once (with the connection for "link", when it is picked).
// Thread safety: every function, from any thread.
//
// Covered by gpu/faulty_net_test.c (//gpu:faulty_net_test).

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "faulty_net_core.h"

// ---- Logging and configuration --------------------------------------------

static ncclDebugLogger_t g_log;  // NCCL's, set by init; stderr before that

void FaultyNetSetLogger(ncclDebugLogger_t log) {
  __atomic_store_n(&g_log, log, __ATOMIC_RELEASE);
}

void FaultyNetLog(ncclDebugLogLevel level, const char* file, int line,
                  const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  ncclDebugLogger_t log = __atomic_load_n(&g_log, __ATOMIC_ACQUIRE);
  if (log != NULL) {
    log(level, NCCL_NET | NCCL_INIT, file, line, "NET/faulty: %s", msg);
  } else {
    fprintf(stderr, "NET/faulty: %s\n", msg);
  }
}

int64_t FaultyNetNowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// A whole non-negative decimal from the environment, or `fallback` (with a
// warning naming the variable) when it is set to anything else.
static long EnvLong(const char* name, long fallback) {
  const char* s = getenv(name);
  if (s == NULL || *s == '\0') return fallback;
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > 1000000000L) {
    FAULTY_NET_LOG(NCCL_LOG_WARN,
                   "%s='%s' is not a whole number from 0 to 1e9; using %ld",
                   name, s, fallback);
    return fallback;
  }
  return v;
}

// ---- Fault state ------------------------------------------------------------

enum { kOff = 0, kStop = 1, kLink = 2, kSlow = 3 };
static const char* const kModeNames[] = {"off", "stop", "link", "slow"};

static atomic_int g_mode = kOff;
static atomic_llong g_slow_ns = 20 * 1000000LL;
// "link": the id of the send comm it stopped; 0 until isend picks one.
static atomic_ullong g_link_comm;
// NET_FAULT_ARM_AFTER_SEC: when to arm g_arm_after_mode (0: never).
static atomic_llong g_arm_at_ns;
static atomic_int g_arm_after_mode = kOff;

static int ModeFromName(const char* mode) {
  if (mode == NULL) return -1;
  for (int m = kOff; m <= kSlow; ++m) {
    if (strcmp(mode, kModeNames[m]) == 0) return m;
  }
  return -1;
}

static void Arm(int mode, const char* how) {
  atomic_store(&g_slow_ns, EnvLong("NET_FAULT_SLOW_MS", 20) * 1000000LL);
  atomic_store(&g_link_comm, 0);
  atomic_store(&g_mode, mode);
  if (mode == kSlow) {
    FAULTY_NET_LOG(
        NCCL_LOG_INFO, "fault 'slow' armed (%s) in pid %d: %lld ms per message",
        how, (int)getpid(), (long long)(atomic_load(&g_slow_ns) / 1000000));
  } else if (mode == kOff) {
    FAULTY_NET_LOG(NCCL_LOG_INFO, "faults off (%s) in pid %d", how,
                   (int)getpid());
  } else {
    FAULTY_NET_LOG(NCCL_LOG_INFO, "fault '%s' armed (%s) in pid %d%s",
                   kModeNames[mode], how, (int)getpid(),
                   mode == kLink ? ": the next send connection stops" : "");
  }
}

// Arms the timed fault once its time has come. Reads the clock only when
// NET_FAULT_ARM_AFTER_SEC was given.
static void MaybeArmTimed(void) {
  long long at = atomic_load_explicit(&g_arm_at_ns, memory_order_relaxed);
  if (at == 0 || FaultyNetNowNs() < at) return;
  if (atomic_compare_exchange_strong(&g_arm_at_ns, &at, 0)) {
    Arm(atomic_load(&g_arm_after_mode), "NET_FAULT_ARM_AFTER_SEC");
  }
}

__attribute__((visibility("default"))) int ncclwatch_net_fault_arm(
    const char* mode) {
  int m = ModeFromName(mode);
  if (m < 0) {
    FAULTY_NET_LOG(NCCL_LOG_WARN,
                   "ncclwatch_net_fault_arm('%s'): unknown mode; want stop, "
                   "link, slow or off",
                   mode == NULL ? "(null)" : mode);
    return -1;
  }
  Arm(m, "ncclwatch_net_fault_arm");
  return 0;
}

void FaultyNetFaultInit(void) {
  long after = EnvLong("NET_FAULT_ARM_AFTER_SEC", -1);
  if (after < 0 || atomic_load(&g_arm_at_ns) != 0) return;
  const char* name = getenv("NET_FAULT_MODE");
  int mode = ModeFromName(name);
  if (mode < 0) {
    FAULTY_NET_LOG(NCCL_LOG_WARN,
                   "NET_FAULT_ARM_AFTER_SEC=%ld but NET_FAULT_MODE='%s' is "
                   "not stop, link or slow; arming nothing",
                   after, name == NULL ? "" : name);
    return;
  }
  atomic_store(&g_arm_after_mode, mode);
  atomic_store(&g_arm_at_ns, FaultyNetNowNs() + after * 1000000000LL + 1);
  FAULTY_NET_LOG(NCCL_LOG_INFO, "fault '%s' arms %ld s from now in pid %d",
                 kModeNames[mode], after, (int)getpid());
}

void FaultyNetFaultOnIsend(uint64_t comm_id, const char* desc) {
  MaybeArmTimed();
  if (atomic_load_explicit(&g_mode, memory_order_relaxed) != kLink) return;
  unsigned long long none = 0;
  if (atomic_compare_exchange_strong(&g_link_comm, &none, comm_id)) {
    FAULTY_NET_LOG(NCCL_LOG_INFO,
                   "fault 'link' stops send connection %s in pid %d", desc,
                   (int)getpid());
  }
}

int FaultyNetFaultHolds(uint64_t comm_id, int started, int64_t* not_before) {
  MaybeArmTimed();
  switch (atomic_load_explicit(&g_mode, memory_order_relaxed)) {
    case kStop:
      return 1;
    case kLink:
      return atomic_load(&g_link_comm) == comm_id;
    case kSlow: {
      if (started) return 0;  // a message under way goes on at full speed
      int64_t now = FaultyNetNowNs();
      if (*not_before == 0) *not_before = now + atomic_load(&g_slow_ns);
      return now < *not_before;
    }
    default:
      return 0;
  }
}

// What the GPU programs of gpu/ share: a monotonic clock, a logger that
// prefixes each line with the rank and writes it with one write(2) (lines of
// several ranks do not interleave), byte counts for people, the CUDA error
// check, NVLS forced off, and how a forked rank starts. Each program defines Fatal() (what a failed call does there)
// and its own NCCL check (they treat ncclInProgress differently).

#ifndef TOOLS_GPU_GPU_COMMON_H_
#define TOOLS_GPU_GPU_COMMON_H_

#include <cuda_runtime.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>

inline int g_rank = -1;  // -1 in the parent

inline int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline double SecSince(int64_t t0) { return double(NowNs() - t0) / 1e9; }

inline void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void Log(const char* fmt, ...) {
  char buf[2048];
  int n = g_rank >= 0 ? snprintf(buf, sizeof(buf), "[rank %d] ", g_rank) : snprintf(buf, sizeof(buf), "[parent] ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
  va_end(ap);
  n += std::min(m, int(sizeof(buf)) - n - 2);
  buf[n++] = '\n';
  ssize_t unused = write(2, buf, n);
  (void)unused;
}

inline std::string HumanBytes(size_t b) {
  char buf[32];
  if (b >= (size_t(1) << 30) && b % (size_t(1) << 30) == 0) snprintf(buf, sizeof(buf), "%zu GiB", b >> 30);
  else if (b >= (1u << 20) && b % (1u << 20) == 0) snprintf(buf, sizeof(buf), "%zu MiB", b >> 20);
  else if (b >= 1024 && b % 1024 == 0) snprintf(buf, sizeof(buf), "%zu KiB", b >> 10);
  else snprintf(buf, sizeof(buf), "%zu B", b);
  return buf;
}

// NVLink multicast (NVLS) must stay off on the shared GPU hosts: forced to 0
// for this process and the ranks it forks, said when the caller asked otherwise.
inline void ForceNvlsOff() {
  const char* nvls = getenv("NCCL_NVLS_ENABLE");
  if (nvls != nullptr && std::string(nvls) != "0") Log("NCCL_NVLS_ENABLE=%s overridden to 0", nvls);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
}

// First thing in a forked rank r: its log prefix, and death with the parent
// (e.g. killed by timeout(1)), so no rank outlives the run. False when the
// parent is already gone: the rank must exit.
inline bool EnterRank(int r, pid_t parent) {
  g_rank = r;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  return getppid() == parent;
}

// The parent, when forking rank n failed: kills ranks 0..n-1 (anything with a `pid`).
template <typename Kids>
void KillForked(const Kids& kids, int n) {
  for (int k = 0; k < n; ++k) kill(kids[k].pid, SIGKILL);
}

// CUDA_CHECK calls the program's own Fatal(file, line, call, what), found at
// the point of use.
#define CUDA_CHECK(call)                                                        \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess)                                                      \
      Fatal(__FILE__, __LINE__, #call,                                          \
            std::string(cudaGetErrorName(e_)) + ": " + cudaGetErrorString(e_)); \
  } while (0)

#endif  // TOOLS_GPU_GPU_COMMON_H_

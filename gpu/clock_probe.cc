// clock_probe: what the clocks cost on this machine and whether its TSC can
// be trusted across cores. The plugin stamps every event on NCCL's threads,
// so a clock_gettime that falls back to a system call (a VM whose kvm-clock
// is not vDSO-capable) is paid several times per operation.
//
//   g++ -std=c++17 -O2 -pthread gpu/clock_probe.cc -o out/clock_probe
//   out/clock_probe [CPU ...]     (cores to check the TSC against core 0;
//                                  default: 1, the middle and the last)
//
// Prints: the kernel's current and available clocksources, the CPU's TSC
// flags (/proc/cpuinfo, CPUID invariant-TSC bit), the median cost of
// clock_gettime (MONOTONIC, MONOTONIC_COARSE, REALTIME) and rdtsc, and for
// each core pair the smallest observed TSC step from one core to the other
// in both directions (a message passed through shared memory: the receiver's
// TSC must not read earlier than the sender's; both minima >= 0 means the two
// TSCs agree to within their sum).

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <cpuid.h>
#include <x86intrin.h>

namespace {

std::string ReadFile(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "(unreadable)" : s;
}

std::string TscFlags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w, out;
    while (words >> w)
      if (w.find("tsc") != std::string::npos || w == "hypervisor") out += w + " ";
    return out;
  }
  return "(no flags line)";
}

template <typename F>
double MedianNs(F f) {
  std::vector<double> per;
  for (int rep = 0; rep < 9; ++rep) {
    constexpr int kN = 200000;
    timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < kN; ++i) f();
    clock_gettime(CLOCK_MONOTONIC, &b);
    per.push_back(((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / kN);
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

volatile uint64_t g_sink;

void Pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

// Ping-pong between core a (this thread) and core b: each side stamps its TSC
// and hands it over; the other side's next read minus it is a one-way step.
struct PingPong {
  std::atomic<uint64_t> a_to_b{0};
  std::atomic<uint64_t> b_to_a{0};
  std::atomic<int> turn{0};
  int64_t min_ab = INT64_MAX;  // b's tsc - a's tsc
  int64_t min_ba = INT64_MAX;
  int rounds = 100000;
  int cpu_b = 0;
};

void* Side(void* arg) {
  auto* p = static_cast<PingPong*>(arg);
  Pin(p->cpu_b);
  for (int i = 0; i < p->rounds; ++i) {
    while (p->turn.load(std::memory_order_acquire) != 1) {
    }
    uint64_t now = __rdtsc();
    int64_t d = static_cast<int64_t>(now - p->a_to_b.load(std::memory_order_relaxed));
    p->min_ab = std::min(p->min_ab, d);
    p->b_to_a.store(__rdtsc(), std::memory_order_relaxed);
    p->turn.store(2, std::memory_order_release);
  }
  return nullptr;
}

void CheckPair(int cpu_b, double ns_per_tick) {
  PingPong p;
  p.cpu_b = cpu_b;
  Pin(0);
  pthread_t t;
  pthread_create(&t, nullptr, Side, &p);
  for (int i = 0; i < p.rounds; ++i) {
    p.a_to_b.store(__rdtsc(), std::memory_order_relaxed);
    p.turn.store(1, std::memory_order_release);
    while (p.turn.load(std::memory_order_acquire) != 2) {
    }
    uint64_t now = __rdtsc();
    int64_t d = static_cast<int64_t>(now - p.b_to_a.load(std::memory_order_relaxed));
    p.min_ba = std::min(p.min_ba, d);
    p.turn.store(0, std::memory_order_relaxed);
  }
  pthread_join(t, nullptr);
  printf("tsc core 0 -> %d: min step %lld ticks (%.0f ns); %d -> 0: %lld ticks (%.0f ns) %s\n", cpu_b,
         static_cast<long long>(p.min_ab), p.min_ab * ns_per_tick, cpu_b, static_cast<long long>(p.min_ba),
         p.min_ba * ns_per_tick,
         (p.min_ab >= 0 && p.min_ba >= 0) ? "(consistent)" : "(INCONSISTENT: a step went back in time)");
}

}  // namespace

int main(int argc, char** argv) {
  printf("clocksource current: %s\n", ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource").c_str());
  printf("clocksource available: %s\n",
         ReadFile("/sys/devices/system/clocksource/clocksource0/available_clocksource").c_str());
  printf("cpuinfo tsc flags: %s\n", TscFlags().c_str());
  unsigned a = 0, b = 0, c = 0, d = 0;
  bool inv = __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
  printf("cpuid invariant tsc: %s\n", inv ? "yes" : "no");
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  printf("cpus online: %ld\n", ncpu);

  timespec ts;
  double mono = MedianNs([&] { clock_gettime(CLOCK_MONOTONIC, &ts); g_sink = ts.tv_nsec; });
  double coarse = MedianNs([&] { clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); g_sink = ts.tv_nsec; });
  double real = MedianNs([&] { clock_gettime(CLOCK_REALTIME, &ts); g_sink = ts.tv_nsec; });
  double tsc = MedianNs([&] { g_sink = __rdtsc(); });
  printf("ns per call (median of 9 x 200k): clock_gettime MONOTONIC %.1f, MONOTONIC_COARSE %.1f, REALTIME %.1f; rdtsc %.1f\n",
         mono, coarse, real, tsc);

  // TSC frequency over 50 ms.
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t t0 = __rdtsc();
  double n0 = ts.tv_sec * 1e9 + ts.tv_nsec;
  usleep(50000);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t t1 = __rdtsc();
  double n1 = ts.tv_sec * 1e9 + ts.tv_nsec;
  double ns_per_tick = (n1 - n0) / static_cast<double>(t1 - t0);
  printf("tsc frequency: %.3f GHz\n", 1.0 / ns_per_tick);

  std::vector<int> cpus;
  for (int i = 1; i < argc; ++i) cpus.push_back(atoi(argv[i]));
  if (cpus.empty()) {
    if (ncpu > 1) cpus.push_back(1);
    if (ncpu > 4) cpus.push_back(static_cast<int>(ncpu / 2));
    if (ncpu > 2) cpus.push_back(static_cast<int>(ncpu - 1));
  }
  for (int cpu : cpus)
    if (cpu > 0 && cpu < ncpu) CheckPair(cpu, ns_per_tick);
  return 0;
}

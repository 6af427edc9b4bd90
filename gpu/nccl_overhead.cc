// nccl_overhead: times NCCL collectives the way nccl-tests' all_reduce_perf
// does, to measure what a profiler plugin costs (gpu/overhead.sh runs it
// once per configuration: no plugin, the do-nothing plugin, ncclwatch; see
// gpu/README.md and BENCHMARKS.md).
//
//   nccl_overhead --nranks N [--op allreduce|allgather|sendrecv|all[,..]]
//                 [--sizes 8,1K,64K,1M,16M,256M] [--mode pipelined|synced|both]
//                 [--iters I] [--warmup W] [--target-ms T] [--out FILE.csv]
//                 [--label L] [--round R] [--timeout-sec S] [--batches B]
//                 [--cpus-per-rank K]
//
// Process layout (as nccl_scenarios): the parent forces NCCL_NVLS_ENABLE=0,
// creates the ncclUniqueId (no CUDA in the parent), forks N children and
// collects their results through one pipe each; child r uses device r and
// one communicator. NCCL picks the profiler plugin at communicator init from
// the environment (NCCL_PROFILER_PLUGIN), so a process measures one plugin
// configuration; --label (default $OVERHEAD_LABEL) names it in the CSV. The
// child also reports which profiler library NCCL actually loaded (the
// `plugin` column: the file name of a loaded libnccl-profiler*.so, or "-").
//
// Operations (bytes = the --sizes value):
//   allreduce  float32 sum, count = bytes / 4 (at least 1: 8 B is 2 floats)
//   allgather  int8, `bytes` from every rank (receive buffer N * bytes)
//   sendrecv   a ring: in one group, send `bytes` to (r+1)%N and receive
//              `bytes` from (r-1+N)%N
// Buffers are allocated once, for the largest size, and zeroed.
//
// Modes, per (op, size); every measurement starts after a warm-up and a
// barrier (a 1-float all_reduce and a stream synchronisation):
//   pipelined  enqueue `iters` operations back to back on one stream, then
//              cudaStreamSynchronize. CUDA events around the whole batch
//              (us_per_op_cuda) and the wall clock from before the first
//              enqueue to after the synchronisation (us_per_op_wall), each
//              divided by `iters`. --batches B (default 5) such batches, each
//              after a barrier; the median batch of each is reported (one
//              batch hit by the machine's noise no longer decides the row).
// --cpus-per-rank K pins rank r to CPUs [r*K, r*K+K) before CUDA starts:
// the host threads (the rank's, CUDA's, NCCL's proxy, a plugin's) then land on
// the same few cores in every process. Without it, runs on a 64-vCPU VM were
// bimodal (8 B all-reduce on 2 GPUs at ~7.3 or ~11.5 us per operation, per
// process, in every configuration).
//   synced     `iters` times: enqueue one operation, cudaStreamSynchronize.
//              The wall clock of each (enqueue + synchronise) and CUDA events
//              around each operation; the median of each.
// Iterations (--iters 0, the default): from a rough cost model, so that one
// measurement takes about --target-ms (default 20 ms), between 10 and 4000;
// warm-up (--warmup 0): iters / 10, at least 3. The counts depend only on
// (op, size, mode, N, target), so every configuration does the same work.
//
// Output: one CSV row per (op, size, mode), appended to --out (a header is
// written when the file is new or empty), or to stdout:
//   config,round,nranks,op,mode,bytes,iters,us_per_op_cuda,us_per_op_wall,
//   us_cuda_rank0,us_wall_rank0,plugin,nccl_version
// us_per_op_* are the maximum over ranks, *_rank0 rank 0's own.
//
// Exit status: 0 ok; 1 a CUDA/NCCL error in a rank (printed with file:line)
// or a rank killed after --timeout-sec (default 120); 2 usage error.

#include <cuda_runtime.h>
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_common.h"

namespace {

// ---------------------------------------------------------------- basics

enum ExitCode : int { kExitOk = 0, kExitError = 1, kExitUsage = 2 };

constexpr int kMinIters = 10;
constexpr int kMaxIters = 4000;
constexpr int kParentGraceSec = 5;  // once a rank has failed, the others get this long

// A failed CUDA/NCCL call in a rank: the other ranks would hang in their next
// collective, so just leave; the parent kills them after kParentGraceSec.
[[noreturn]] void Fatal(const char* file, int line, const char* call, const std::string& what) {
  Log("%s:%d: %s failed: %s", file, line, call, what.c_str());
  _exit(kExitError);
}

#define NCCL_CHECK(call)                                                                   \
  do {                                                                                     \
    ncclResult_t r_ = (call);                                                              \
    if (r_ != ncclSuccess)                                                                 \
      Fatal(__FILE__, __LINE__, #call,                                                     \
            std::string(ncclGetErrorString(r_)) + " (" + ncclGetLastError(nullptr) + ")"); \
  } while (0)

// ---------------------------------------------------------------- options

enum class OpKind { kAllReduce, kAllGather, kSendRecv };
enum class Mode { kPipelined, kSynced };

const char* OpName(OpKind k) {
  switch (k) {
    case OpKind::kAllReduce: return "allreduce";
    case OpKind::kAllGather: return "allgather";
    case OpKind::kSendRecv: return "sendrecv";
  }
  return "?";
}
const char* ModeName(Mode m) { return m == Mode::kPipelined ? "pipelined" : "synced"; }

struct Options {
  int nranks = 0;
  std::vector<OpKind> ops = {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kSendRecv};
  std::vector<size_t> sizes = {8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
  std::vector<Mode> modes = {Mode::kPipelined, Mode::kSynced};
  int iters = 0;   // 0: from the cost model
  int warmup = 0;  // 0: iters / 10, at least 3
  double target_ms = 20;
  std::string out;
  std::string label;
  int round = 0;
  double timeout_sec = 120;
  int batches = 5;  // pipelined: batches per measurement, median reported
  int cpus_per_rank = 0;  // > 0: rank r runs on CPUs [r*K, r*K+K) (its threads and NCCL's)
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t e = s.find(sep, pos);
    if (e == std::string::npos) e = s.size();
    if (e > pos) out.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  return out;
}

// "8", "1K", "64k", "1M", "256M", "1G" (binary multiples).
bool ParseSize(const std::string& s, size_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str()) return false;
  std::string suf(end);
  size_t mul = 1;
  if (suf == "" || suf == "B" || suf == "b") mul = 1;
  else if (suf == "K" || suf == "k") mul = size_t(1) << 10;
  else if (suf == "M" || suf == "m") mul = size_t(1) << 20;
  else if (suf == "G" || suf == "g") mul = size_t(1) << 30;
  else return false;
  if (v == 0) return false;
  *out = size_t(v) * mul;
  return true;
}

void Usage() {
  fprintf(stderr,
          "usage: nccl_overhead --nranks N [--op allreduce|allgather|sendrecv|all[,..]]\n"
          "                     [--sizes 8,1K,64K,1M,16M,256M] [--mode pipelined|synced|both]\n"
          "                     [--iters I] [--warmup W] [--target-ms T] [--out FILE.csv]\n"
          "                     [--label L] [--round R] [--timeout-sec S] [--batches B]\n"
          "                     [--cpus-per-rank K]\n"
          "  --label defaults to $OVERHEAD_LABEL, --round to $OVERHEAD_ROUND.\n");
}

bool ParseArgs(int argc, char** argv, Options* o) {
  if (const char* v = getenv("OVERHEAD_LABEL")) o->label = v;
  if (const char* v = getenv("OVERHEAD_ROUND")) o->round = atoi(v);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char** out) {
      if (i + 1 >= argc) {
        fprintf(stderr, "nccl_overhead: %s needs a value\n", a.c_str());
        return false;
      }
      *out = argv[++i];
      return true;
    };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") {
      Usage();
      exit(kExitOk);
    } else if (a == "--nranks") {
      if (!val(&v)) return false;
      o->nranks = atoi(v);
    } else if (a == "--op") {
      if (!val(&v)) return false;
      o->ops.clear();
      for (const std::string& t : Split(v, ',')) {
        if (t == "all") {
          o->ops = {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kSendRecv};
        } else if (t == "allreduce" || t == "all_reduce") {
          o->ops.push_back(OpKind::kAllReduce);
        } else if (t == "allgather" || t == "all_gather") {
          o->ops.push_back(OpKind::kAllGather);
        } else if (t == "sendrecv" || t == "send_recv") {
          o->ops.push_back(OpKind::kSendRecv);
        } else {
          fprintf(stderr, "nccl_overhead: unknown --op '%s'\n", t.c_str());
          return false;
        }
      }
    } else if (a == "--sizes") {
      if (!val(&v)) return false;
      o->sizes.clear();
      for (const std::string& t : Split(v, ',')) {
        size_t b = 0;
        if (!ParseSize(t, &b)) {
          fprintf(stderr, "nccl_overhead: bad size '%s' in --sizes\n", t.c_str());
          return false;
        }
        o->sizes.push_back(b);
      }
    } else if (a == "--mode") {
      if (!val(&v)) return false;
      std::string m = v;
      if (m == "pipelined") o->modes = {Mode::kPipelined};
      else if (m == "synced") o->modes = {Mode::kSynced};
      else if (m == "both") o->modes = {Mode::kPipelined, Mode::kSynced};
      else {
        fprintf(stderr, "nccl_overhead: --mode must be pipelined, synced or both\n");
        return false;
      }
    } else if (a == "--iters") {
      if (!val(&v)) return false;
      o->iters = atoi(v);
    } else if (a == "--warmup") {
      if (!val(&v)) return false;
      o->warmup = atoi(v);
    } else if (a == "--target-ms") {
      if (!val(&v)) return false;
      o->target_ms = atof(v);
    } else if (a == "--out") {
      if (!val(&v)) return false;
      o->out = v;
    } else if (a == "--label") {
      if (!val(&v)) return false;
      o->label = v;
    } else if (a == "--round") {
      if (!val(&v)) return false;
      o->round = atoi(v);
    } else if (a == "--cpus-per-rank") {
      if (!val(&v)) return false;
      o->cpus_per_rank = atoi(v);
    } else if (a == "--batches") {
      if (!val(&v)) return false;
      o->batches = atoi(v);
    } else if (a == "--timeout-sec") {
      if (!val(&v)) return false;
      o->timeout_sec = atof(v);
    } else {
      fprintf(stderr, "nccl_overhead: unknown argument '%s'\n", a.c_str());
      return false;
    }
  }
  if (o->nranks < 1) {
    fprintf(stderr, "nccl_overhead: --nranks N (N >= 1) is required\n");
    return false;
  }
  if (o->ops.empty() || o->sizes.empty()) {
    fprintf(stderr, "nccl_overhead: no ops or no sizes\n");
    return false;
  }
  if (o->iters < 0 || o->warmup < 0 || !(o->target_ms > 0) || !(o->timeout_sec > 0) || o->batches < 1 || o->cpus_per_rank < 0) {
    fprintf(stderr, "nccl_overhead: --iters/--warmup must be >= 0, --target-ms and --timeout-sec > 0, --batches >= 1\n");
    return false;
  }
  if (o->label.empty()) o->label = "unlabeled";
  for (char& c : o->label)
    if (c == ',' || c == '\n' || c == '"') c = '_';
  return true;
}

// Iterations for one measurement: a rough cost model (launch latency plus
// bytes moved per rank at a modest bandwidth), so a measurement takes about
// target_ms on NVLink-class hardware. Deterministic: the same for every
// configuration.
int ItersFor(const Options& o, OpKind op, Mode mode, size_t bytes) {
  if (o.iters > 0) return o.iters;
  const double n = o.nranks;
  double moved = 0;
  switch (op) {
    case OpKind::kAllReduce: moved = 2.0 * double(bytes) * (n - 1) / n; break;
    case OpKind::kAllGather: moved = double(bytes) * (n - 1); break;
    case OpKind::kSendRecv: moved = double(bytes); break;
  }
  double est_us = 20.0 + moved / 150e3;  // 150 GB/s = 150e3 bytes per us
  if (mode == Mode::kSynced) est_us += 10.0;
  double it = o.target_ms * 1e3 / est_us;
  return int(std::max<double>(kMinIters, std::min<double>(kMaxIters, it)));
}

int WarmupFor(const Options& o, int iters) {
  if (o.warmup > 0) return o.warmup;
  return std::max(3, iters / 10);
}

// ---------------------------------------------------------------- child

struct Result {
  int iters;
  double us_cuda;
  double us_wall;
};

// The file name of a loaded NCCL profiler plugin ("-" if none): NCCL dlopens
// it during communicator init and dlcloses it again if its init fails.
int FindProfiler(struct dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (name == nullptr || name[0] == '\0') return 0;
  const char* base = strrchr(name, '/');
  base = base != nullptr ? base + 1 : name;
  if (strstr(base, "nccl-profiler") != nullptr || strstr(base, "nccl_profiler") != nullptr) {
    *static_cast<std::string*>(data) = base;
    return 1;
  }
  return 0;
}

std::string LoadedProfiler() {
  std::string found = "-";
  dl_iterate_phdr(FindProfiler, &found);
  return found;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct Child {
  const Options& opt;
  int rank;
  int nranks;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  float* barrier_buf = nullptr;
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;

  Child(const Options& o, int r) : opt(o), rank(r), nranks(o.nranks) {}

  void Issue(OpKind op, size_t bytes) {
    switch (op) {
      case OpKind::kAllReduce: {
        size_t count = std::max<size_t>(1, bytes / sizeof(float));
        NCCL_CHECK(ncclAllReduce(sendbuf, recvbuf, count, ncclFloat, ncclSum, comm, stream));
        break;
      }
      case OpKind::kAllGather:
        NCCL_CHECK(ncclAllGather(sendbuf, recvbuf, bytes, ncclInt8, comm, stream));
        break;
      case OpKind::kSendRecv: {
        int next = (rank + 1) % nranks, prev = (rank - 1 + nranks) % nranks;
        NCCL_CHECK(ncclGroupStart());
        NCCL_CHECK(ncclSend(sendbuf, bytes, ncclInt8, next, comm, stream));
        NCCL_CHECK(ncclRecv(recvbuf, bytes, ncclInt8, prev, comm, stream));
        NCCL_CHECK(ncclGroupEnd());
        break;
      }
    }
  }

  // All ranks leave at about the same time (within the synchronisation latency).
  void Barrier() {
    NCCL_CHECK(ncclAllReduce(barrier_buf, barrier_buf, 1, ncclFloat, ncclSum, comm, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  Result Measure(OpKind op, Mode mode, size_t bytes) {
    const int iters = ItersFor(opt, op, mode, bytes);
    const int warmup = WarmupFor(opt, iters);
    for (int i = 0; i < warmup; ++i) Issue(op, bytes);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    Barrier();
    Result r{iters, 0, 0};
    if (mode == Mode::kPipelined) {
      std::vector<double> cuda_us, wall_us;
      for (int b = 0; b < opt.batches; ++b) {
        if (b > 0) Barrier();
        int64_t t0 = NowNs();
        CUDA_CHECK(cudaEventRecord(ev0, stream));
        for (int i = 0; i < iters; ++i) Issue(op, bytes);
        CUDA_CHECK(cudaEventRecord(ev1, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        int64_t t1 = NowNs();
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev0, ev1));
        cuda_us.push_back(double(ms) * 1e3 / iters);
        wall_us.push_back(double(t1 - t0) / 1e3 / iters);
      }
      r.us_cuda = Median(cuda_us);
      r.us_wall = Median(wall_us);
    } else {
      std::vector<double> wall(iters), gpu(iters);
      for (int i = 0; i < iters; ++i) {
        CUDA_CHECK(cudaEventRecord(ev0, stream));
        int64_t t0 = NowNs();
        Issue(op, bytes);
        CUDA_CHECK(cudaEventRecord(ev1, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        int64_t t1 = NowNs();
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev0, ev1));
        wall[i] = double(t1 - t0) / 1e3;
        gpu[i] = double(ms) * 1e3;
      }
      r.us_cuda = Median(gpu);
      r.us_wall = Median(wall);
    }
    return r;
  }

  int Main(const ncclUniqueId& id, int out_fd) {
    int64_t t0 = NowNs();
    if (opt.cpus_per_rank > 0) {
      // Before CUDA and NCCL start their threads, which inherit it (NCCL
      // intersects its own choice with it): each rank on its own cores, so
      // where the threads land is the same in every process.
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c = rank * opt.cpus_per_rank; c < (rank + 1) * opt.cpus_per_rank; ++c) CPU_SET(c, &set);
      if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        fprintf(stderr, "nccl_overhead: rank %d: sched_setaffinity: %s\n", rank, strerror(errno));
        return kExitError;
      }
    }
    CUDA_CHECK(cudaSetDevice(rank));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.commName = "overhead";
    NCCL_CHECK(ncclCommInitRankConfig(&comm, nranks, id, rank, &config));
    const double init_sec = SecSince(t0);
    const std::string plugin = LoadedProfiler();

    size_t max_bytes = *std::max_element(opt.sizes.begin(), opt.sizes.end());
    max_bytes = std::max<size_t>(max_bytes, 2 * sizeof(float));
    bool gather = std::find(opt.ops.begin(), opt.ops.end(), OpKind::kAllGather) != opt.ops.end();
    size_t recv_bytes = gather ? max_bytes * size_t(nranks) : max_bytes;
    CUDA_CHECK(cudaMalloc(&sendbuf, max_bytes));
    CUDA_CHECK(cudaMalloc(&recvbuf, recv_bytes));
    CUDA_CHECK(cudaMalloc(&barrier_buf, sizeof(float)));
    CUDA_CHECK(cudaMemset(sendbuf, 0, max_bytes));
    CUDA_CHECK(cudaMemset(recvbuf, 0, recv_bytes));
    CUDA_CHECK(cudaMemset(barrier_buf, 0, sizeof(float)));
    CUDA_CHECK(cudaEventCreate(&ev0));
    CUDA_CHECK(cudaEventCreate(&ev1));
    CUDA_CHECK(cudaDeviceSynchronize());
    if (rank == 0)
      Log("device %d, comm init %.2f s, profiler plugin loaded: %s, buffers %s + %s", rank, init_sec,
          plugin.c_str(), HumanBytes(max_bytes).c_str(), HumanBytes(recv_bytes).c_str());

    // One text line per result on the pipe to the parent (written at the end:
    // a few KiB, far below the pipe's capacity).
    std::string out = "P " + plugin + "\n";
    int64_t tm = NowNs();
    for (OpKind op : opt.ops) {
      for (size_t bytes : opt.sizes) {
        for (Mode mode : opt.modes) {
          int64_t ts = NowNs();
          Result r = Measure(op, mode, bytes);
          if (rank == 0)
            Log("%-9s %-9s %8s x%-5d cuda %10.2f us  wall %10.2f us  (%.0f ms)", OpName(op),
                ModeName(mode), HumanBytes(bytes).c_str(), r.iters, r.us_cuda, r.us_wall,
                SecSince(ts) * 1e3);
          char line[256];
          snprintf(line, sizeof(line), "R %d %d %zu %d %.4f %.4f\n", int(op), int(mode), bytes, r.iters,
                   r.us_cuda, r.us_wall);
          out += line;
        }
      }
    }
    const double measure_sec = SecSince(tm);
    int64_t td = NowNs();
    NCCL_CHECK(ncclCommFinalize(comm));
    NCCL_CHECK(ncclCommDestroy(comm));
    if (rank == 0)
      Log("measured %.2f s, teardown %.2f s, total %.2f s", measure_sec, SecSince(td), SecSince(t0));
    const char* p = out.data();
    size_t left = out.size();
    while (left > 0) {
      ssize_t w = write(out_fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        Log("write to parent: %s", strerror(errno));
        return kExitError;
      }
      p += w;
      left -= size_t(w);
    }
    close(out_fd);
    return kExitOk;
  }
};

// ---------------------------------------------------------------- parent

struct Kid {
  pid_t pid = -1;
  int fd = -1;  // read end of its pipe
  std::string data;
  bool running = true;
  int status = 0;
};

std::string DescribeStatus(int st) {
  char buf[96];
  if (WIFEXITED(st)) snprintf(buf, sizeof(buf), "exit %d", WEXITSTATUS(st));
  else if (WIFSIGNALED(st)) snprintf(buf, sizeof(buf), "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else snprintf(buf, sizeof(buf), "status 0x%x", st);
  return buf;
}

void DrainPipe(Kid* k) {
  if (k->fd < 0) return;
  char buf[4096];
  for (;;) {
    ssize_t n = read(k->fd, buf, sizeof(buf));
    if (n > 0) {
      k->data.append(buf, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close(k->fd);  // EOF or a real error
    k->fd = -1;
    return;
  }
}

struct Agg {
  int iters = 0;
  double cuda_max = 0, wall_max = 0, cuda_r0 = 0, wall_r0 = 0;
  int ranks = 0;
};

int ParentMain(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    Usage();
    return kExitUsage;
  }

  ForceNvlsOff();

  int version = 0;
  NCCL_CHECK(ncclGetVersion(&version));
  const char* plugin_env = getenv("NCCL_PROFILER_PLUGIN");
  Log("config %s, round %d, nranks %d, NCCL %d (headers %d.%d.%d), NCCL_PROFILER_PLUGIN=%s", o.label.c_str(),
      o.round, o.nranks, version, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, plugin_env ? plugin_env : "(unset)");

  FILE* csv = stdout;
  if (!o.out.empty()) {
    csv = fopen(o.out.c_str(), "a");
    if (csv == nullptr) {
      fprintf(stderr, "nccl_overhead: cannot open %s: %s\n", o.out.c_str(), strerror(errno));
      return kExitUsage;
    }
  }

  // No CUDA in the parent: the id is a plain struct copied into each child by fork.
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));

  int64_t t0 = NowNs();
  std::vector<Kid> kids(o.nranks);
  const pid_t parent_pid = getpid();
  fflush(nullptr);
  for (int r = 0; r < o.nranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) {
      Log("pipe: %s", strerror(errno));
      KillForked(kids, r);
      return kExitError;
    }
    pid_t pid = fork();
    if (pid < 0) {
      Log("fork: %s", strerror(errno));
      KillForked(kids, r);
      return kExitError;
    }
    if (pid == 0) {
      if (!EnterRank(r, parent_pid)) _exit(kExitError);
      close(fds[0]);
      for (int k = 0; k < r; ++k) close(kids[k].fd);
      Child* child = new Child(o, r);  // never freed: the process ends here
      int code = child->Main(id, fds[1]);
      fflush(nullptr);
      exit(code);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    kids[r].pid = pid;
    kids[r].fd = fds[0];
  }

  // Reap; the whole run is bounded by --timeout-sec, and once a rank has
  // failed the others get kParentGraceSec (they would hang in NCCL).
  const int64_t deadline = t0 + int64_t(o.timeout_sec * 1e9);
  int64_t kill_at = 0;
  int running = o.nranks;
  bool killed = false;
  while (running > 0) {
    for (Kid& k : kids) DrainPipe(&k);
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno != EINTR) {
      Log("waitpid: %s", strerror(errno));
      break;
    }
    if (pid > 0) {
      for (int r = 0; r < o.nranks; ++r) {
        Kid& k = kids[r];
        if (k.pid != pid || !k.running) continue;
        k.running = false;
        k.status = st;
        --running;
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok) {
          Log("rank %d (pid %d) %s after %.1f s", r, int(pid), DescribeStatus(st).c_str(), SecSince(t0));
          if (kill_at == 0) kill_at = NowNs() + int64_t(kParentGraceSec) * 1000000000;
        }
      }
      continue;
    }
    int64_t now = NowNs();
    if (!killed && (now > deadline || (kill_at != 0 && now > kill_at))) {
      Log("%s; killing the remaining ranks",
          now > deadline ? "--timeout-sec passed" : "a rank failed and the others did not exit");
      for (Kid& k : kids)
        if (k.running) kill(k.pid, SIGKILL);
      killed = true;
    }
    usleep(20 * 1000);
  }
  for (Kid& k : kids) {
    if (k.fd >= 0) fcntl(k.fd, F_SETFL, fcntl(k.fd, F_GETFL) & ~O_NONBLOCK);
    DrainPipe(&k);
  }

  bool all_ok = true;
  for (const Kid& k : kids)
    if (k.running || !WIFEXITED(k.status) || WEXITSTATUS(k.status) != 0) all_ok = false;
  if (!all_ok) {
    for (int r = 0; r < o.nranks; ++r) Log("  rank %d: %s", r, DescribeStatus(kids[r].status).c_str());
    Log("failed after %.1f s; no rows written", SecSince(t0));
    return kExitError;
  }

  // Combine the ranks: max over ranks, and rank 0's own.
  std::string plugin = "-";
  std::map<std::tuple<int, int, size_t>, Agg> agg;
  std::vector<std::tuple<int, int, size_t>> order;
  for (int r = 0; r < o.nranks; ++r) {
    for (const std::string& line : Split(kids[r].data, '\n')) {
      if (line.rfind("P ", 0) == 0) {
        if (r == 0) plugin = line.substr(2);
        continue;
      }
      int op = 0, mode = 0, iters = 0;
      size_t bytes = 0;
      double cuda = 0, wall = 0;
      if (sscanf(line.c_str(), "R %d %d %zu %d %lf %lf", &op, &mode, &bytes, &iters, &cuda, &wall) != 6) {
        Log("rank %d: unreadable result line '%s'", r, line.c_str());
        return kExitError;
      }
      auto key = std::make_tuple(op, mode, bytes);
      auto it = agg.find(key);
      if (it == agg.end()) {
        it = agg.emplace(key, Agg{}).first;
        if (r == 0) order.push_back(key);
      }
      Agg& a = it->second;
      a.iters = iters;
      a.cuda_max = std::max(a.cuda_max, cuda);
      a.wall_max = std::max(a.wall_max, wall);
      if (r == 0) a.cuda_r0 = cuda, a.wall_r0 = wall;
      ++a.ranks;
    }
  }
  // The header once: on stdout, or when --out starts a new file.
  bool header = o.out.empty();
  if (!header) {
    fseek(csv, 0, SEEK_END);
    header = ftell(csv) == 0;
  }
  if (header)
    fputs("config,round,nranks,op,mode,bytes,iters,us_per_op_cuda,us_per_op_wall,us_cuda_rank0,"
          "us_wall_rank0,plugin,nccl_version\n",
          csv);
  for (const auto& key : order) {
    const Agg& a = agg[key];
    if (a.ranks != o.nranks) {
      Log("missing results from some ranks for %s %s %zu", OpName(OpKind(std::get<0>(key))),
          ModeName(Mode(std::get<1>(key))), std::get<2>(key));
      return kExitError;
    }
    fprintf(csv, "%s,%d,%d,%s,%s,%zu,%d,%.4f,%.4f,%.4f,%.4f,%s,%d\n", o.label.c_str(), o.round, o.nranks,
            OpName(OpKind(std::get<0>(key))), ModeName(Mode(std::get<1>(key))), std::get<2>(key), a.iters,
            a.cuda_max, a.wall_max, a.cuda_r0, a.wall_r0, plugin.c_str(), version);
  }
  if (csv != stdout) fclose(csv);
  else fflush(csv);
  Log("config %s round %d nranks %d: %zu rows, plugin %s, %.1f s", o.label.c_str(), o.round, o.nranks,
      order.size(), plugin.c_str(), SecSince(t0));
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) { return ParentMain(argc, argv); }

#include "plugin/testing/fake_nccl_host.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <type_traits>

#include <gtest/gtest.h>

#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_net.h"
#include "plugin/abi/profiler_v1.h"
#include "plugin/abi/profiler_v2.h"
#include "plugin/abi/profiler_v3.h"
#include "plugin/abi/profiler_v4.h"
#include "plugin/abi/profiler_v5.h"
#include "plugin/abi/profiler_v6.h"
#include "plugin/abi/profiler_v7.h"
#include "plugin/testing/waits.h"
#include "tools/reader/reader.h"

namespace {
std::atomic<int> g_fake_nccl_version{22809};
std::atomic<uint64_t> g_clock_steps{0};  // StepPluginClock
}  // namespace

// NCCL's own entry point, as the plugin finds it in a process that runs NCCL.
extern "C" __attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  const int v = g_fake_nccl_version.load();
  if (version == nullptr || v == 0) return 4;  // ncclInvalidArgument
  *version = v;
  return 0;
}

// The plugin's clock under NCCLWATCH_CLOCK=test (plugin/core/clock.h):
// CLOCK_MONOTONIC with the test's steps.
extern "C" __attribute__((visibility("default"))) int ncclwatch_test_clock_gettime(clockid_t id, timespec* ts) {
  const int rc = clock_gettime(id, ts);
  if (rc != 0 || id != CLOCK_MONOTONIC) return rc;
  const uint64_t ns = static_cast<uint64_t>(ts->tv_sec) * 1000000000ull + static_cast<uint64_t>(ts->tv_nsec) +
                      g_clock_steps.load(std::memory_order_relaxed);
  ts->tv_sec = static_cast<time_t>(ns / 1000000000ull);
  ts->tv_nsec = static_cast<long>(ns % 1000000000ull);
  return 0;
}

namespace ncclwatch::testing {

void SetFakeNcclVersion(int code) { g_fake_nccl_version.store(code); }

void StepPluginClock(uint64_t ns) { g_clock_steps.fetch_add(ns, std::memory_order_relaxed); }
void ResetPluginClock() { g_clock_steps.store(0, std::memory_order_relaxed); }
namespace {

std::mutex g_log_mu;
std::vector<LogLine>* g_logs = new std::vector<LogLine>();  // guarded by g_log_mu; never freed
std::vector<int>* g_log_watches = new std::vector<int>();   // LogWatch eventfds; guarded by g_log_mu

std::string TmpRoot() {
  const char* t = getenv("TEST_TMPDIR");
  return t != nullptr && t[0] != '\0' ? t : "/tmp";
}

bool Exists(const std::string& p) { return access(p.c_str(), R_OK) == 0; }

uint8_t IndexOf(const char* name, const char* const* names, size_t n) {
  if (name == nullptr) return 0xff;
  for (size_t i = 0; i < n; ++i)
    if (strcmp(name, names[i]) == 0) return static_cast<uint8_t>(i);
  return 0xff;
}

}  // namespace

// ------------------------------------------------------------------- loading

std::string PluginPath() {
  const std::string rel = "plugin/libnccl-profiler-ncclwatch.so";
  if (Exists(rel)) {
    char buf[4096];
    if (realpath(rel.c_str(), buf) != nullptr) return buf;
    return rel;
  }
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  if (srcdir != nullptr) {
    std::string p = std::string(srcdir) + "/" + (ws != nullptr ? ws : "ncclwatch") + "/" + rel;
    if (Exists(p)) return p;
  }
  return rel;
}

PluginLib::PluginLib(std::string path) : path_(std::move(path)) {
  handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* e = dlerror();
    ADD_FAILURE() << "dlopen " << path_ << ": " << (e != nullptr ? e : "?");
  }
}

int PluginLib::Close() {
  int rc = dlclose(handle_);
  handle_ = nullptr;
  return rc;
}

void* PluginLib::Reopen() {
  handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  return handle_;
}

PluginLib* PluginLib::Shared() {
  static PluginLib* lib = new PluginLib(PluginPath());
  return lib;
}

PluginLib* PluginLib::Load(const std::string& path) { return new PluginLib(path); }

PluginLib* PluginLib::FreshCopy() {
  static std::atomic<int> n{0};
  std::string src = PluginPath();
  std::string dst = TmpRoot() + "/ncclwatch-copy-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".so";
  std::ifstream in(src, std::ios::binary);
  std::ofstream out(dst, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
  out.close();
  if (!in || !out) ADD_FAILURE() << "cannot copy " << src << " to " << dst;
  // Kept reachable for the life of the process (never dlclose'd).
  static std::vector<PluginLib*>* copies = new std::vector<PluginLib*>();
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  copies->push_back(new PluginLib(dst));
  return copies->back();
}

void* PluginLib::Table(int version) const {
  if (handle_ == nullptr) return nullptr;
  std::string sym = "ncclProfiler_v" + std::to_string(version);
  return dlsym(handle_, sym.c_str());
}

// ------------------------------------------------------------------- logging

void FakeLogger(nccl::LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_logs->push_back({static_cast<int>(level), flags, buf});
  const uint64_t one = 1;
  for (int fd : *g_log_watches)
    if (write(fd, &one, sizeof(one)) != sizeof(one)) ADD_FAILURE() << "LogWatch: " << strerror(errno);
}

LogWatch::LogWatch() {
  fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  EXPECT_GE(fd_, 0) << "eventfd: " << strerror(errno);
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log_watches->push_back(fd_);
}

LogWatch::~LogWatch() {
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_log_watches->erase(std::remove(g_log_watches->begin(), g_log_watches->end(), fd_), g_log_watches->end());
  }
  if (fd_ >= 0) close(fd_);
}

void WaitForLog(const std::string& text) {
  LogWatch w;
  WaitUntil(
      [&] {
        for (const LogLine& l : Logs())
          if (l.text.find(text) != std::string::npos) return true;
        return false;
      },
      {w.fd()});
}

std::vector<LogLine> Logs() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  return *g_logs;
}

void ClearLogs() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_logs->clear();
}

std::vector<std::string> Warnings() {
  std::vector<std::string> out;
  for (const LogLine& l : Logs())
    if (l.level == nccl::kLogWarn) out.push_back(l.text);
  return out;
}

StderrCapture::StderrCapture() {
  fflush(stderr);
  char tmpl[4096];
  snprintf(tmpl, sizeof(tmpl), "%s/stderr-XXXXXX", TmpRoot().c_str());
  int fd = mkstemp(tmpl);
  if (fd < 0) {
    ADD_FAILURE() << "mkstemp: " << strerror(errno);
    return;
  }
  path_ = tmpl;
  saved_ = dup(2);
  dup2(fd, 2);
  close(fd);
}

StderrCapture::~StderrCapture() { Take(); }

std::string StderrCapture::Take() {
  if (done_) return text_;
  done_ = true;
  if (saved_ < 0) return "";
  fflush(stderr);
  dup2(saved_, 2);
  close(saved_);
  std::ifstream in(path_);
  std::stringstream ss;
  ss << in.rdbuf();
  text_ = ss.str();
  unlink(path_.c_str());
  return text_;
}

// ------------------------------------------------------------------- env/dirs

std::string MakeTempDir(const std::string& tag) {
  std::string t = TmpRoot() + "/" + tag + "-XXXXXX";
  std::vector<char> buf(t.begin(), t.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << t << ": " << strerror(errno);
    return "";
  }
  return buf.data();
}

void SetPluginEnv(const std::map<std::string, std::string>& vars) {
  // Every NCCLWATCH_* variable, not a list of them: a test must not inherit
  // a setting an earlier test made (a list had missed newer variables).
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("NCCLWATCH_", 0) == 0) names.push_back(entry.substr(0, entry.find('=')));
  }
  for (const std::string& n : names) unsetenv(n.c_str());
  for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
}

uint64_t MonoNs() {
  timespec ts;
  ncclwatch_test_clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ------------------------------------------------------------------- v1 enums

uint8_t V1FuncIndex(const char* name) {
  static const char* const k[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                  "AllReduce", "SendRecv", "Send", "Recv"};
  return IndexOf(name, k, 8);
}
uint8_t V1DatatypeIndex(const char* name) {
  static const char* const k[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",  "ncclInt64",
                                  "ncclUint64",  "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16"};
  return IndexOf(name, k, 10);
}
uint8_t V1AlgoIndex(const char* name) {
  static const char* const k[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
  return IndexOf(name, k, 7);
}
uint8_t V1ProtoIndex(const char* name) {
  static const char* const k[] = {"LL", "LL128", "SIMPLE"};
  return IndexOf(name, k, 3);
}

// ------------------------------------------------------------------- events

namespace {

template <typename D>
void FillProxyV(const Ev& e, D* d) {
  if (e.type == nccl::kProxyOp) {
    d->proxyOp.pid = e.pid;
    d->proxyOp.channelId = e.channel;
    d->proxyOp.peer = e.peer;
    d->proxyOp.nSteps = e.nsteps;
    d->proxyOp.chunkSize = e.chunk_size;
    d->proxyOp.isSend = e.is_send ? 1 : 0;
  } else if (e.type == nccl::kProxyStep) {
    d->proxyStep.step = e.step;
  }
}

nccl::DescrV1 MakeV1(const Ev& e) {
  nccl::DescrV1 d;
  memset(&d, 0, sizeof(d));
  d.type = static_cast<uint8_t>(e.type);
  d.parentObj = e.parent;
  d.rank = e.rank;
  if (e.type == nccl::kColl) {
    d.coll.name = e.comm_name;
    d.coll.commHash = e.comm_hash;
    d.coll.seqNumber = e.seq;
    d.coll.func = V1FuncIndex(e.func);
    d.coll.sendBuff = e.send_buff;
    d.coll.recvBuff = e.recv_buff;
    d.coll.count = e.count;
    d.coll.root = e.root;
    d.coll.datatype = V1DatatypeIndex(e.datatype);
    d.coll.op = e.redop;
    d.coll.trafficBytes = e.traffic_bytes;
    d.coll.nMaxChannels = e.nchannels;
    d.coll.nWarps = e.nwarps;
    d.coll.algo = V1AlgoIndex(e.algo);
    d.coll.proto = V1ProtoIndex(e.proto);
    d.coll.isCollnet = e.is_collnet;
    d.coll.isNvls = e.is_nvls;
  } else if (e.type == nccl::kP2p) {
    d.p2p.name = e.comm_name;
    d.p2p.commHash = e.comm_hash;
    d.p2p.func = V1FuncIndex(e.func);
    d.p2p.buff = e.recv_buff;
    d.p2p.datatype = V1DatatypeIndex(e.datatype);
    d.p2p.count = e.count;
    d.p2p.peer = e.peer;
  } else {
    FillProxyV(e, &d);
  }
  return d;
}

template <typename D>
void FillCollV2V3(const Ev& e, D* d) {
  d->coll.name = e.comm_name;
  d->coll.commHash = e.comm_hash;
  d->coll.seqNumber = e.seq;
  d->coll.func = e.func;
  d->coll.sendBuff = e.send_buff;
  d->coll.recvBuff = e.recv_buff;
  d->coll.count = e.count;
  d->coll.root = e.root;
  d->coll.datatype = e.datatype;
  d->coll.nMaxChannels = e.nchannels;
  d->coll.nWarps = e.nwarps;
  d->coll.algo = e.algo;
  d->coll.proto = e.proto;
}
template <typename D>
void FillP2pV2V3(const Ev& e, D* d) {
  d->p2p.name = e.comm_name;
  d->p2p.commHash = e.comm_hash;
  d->p2p.func = e.func;
  d->p2p.buff = e.recv_buff;
  d->p2p.datatype = e.datatype;
  d->p2p.count = e.count;
  d->p2p.peer = e.peer;
}

nccl::DescrV2 MakeV2(const Ev& e) {
  nccl::DescrV2 d;
  memset(&d, 0, sizeof(d));
  d.type = static_cast<uint8_t>(e.type);
  d.parentObj = e.parent;
  d.rank = e.rank;
  if (e.type == nccl::kColl) {
    FillCollV2V3(e, &d);
    d.coll.trafficBytes = e.traffic_bytes;
  } else if (e.type == nccl::kP2p) {
    FillP2pV2V3(e, &d);
  } else {
    FillProxyV(e, &d);
  }
  return d;
}

nccl::DescrV3 MakeV3(const Ev& e) {
  nccl::DescrV3 d;
  memset(&d, 0, sizeof(d));
  d.type = static_cast<uint8_t>(e.type);
  d.parentObj = e.parent;
  d.rank = e.rank;
  if (e.type == nccl::kColl) {
    FillCollV2V3(e, &d);
  } else if (e.type == nccl::kP2p) {
    FillP2pV2V3(e, &d);
  } else if (e.type == nccl::kKernelCh) {
    d.kernelCh.channelId = e.channel;
  } else if (e.type == nccl::kNetPlugin) {
    d.netPlugin.id = e.net_id;
    d.netPlugin.data = e.net_data;
  } else {
    FillProxyV(e, &d);
  }
  return d;
}

// Members shared by v4, v5, v6.
template <typename D>
void FillCommonV4(const Ev& e, D* d) {
  switch (e.type) {
    case nccl::kColl:
      d->coll.seqNumber = e.seq;
      d->coll.func = e.func;
      d->coll.sendBuff = e.send_buff;
      d->coll.recvBuff = e.recv_buff;
      d->coll.count = e.count;
      d->coll.root = e.root;
      d->coll.datatype = e.datatype;
      d->coll.nChannels = e.nchannels;
      d->coll.nWarps = e.nwarps;
      d->coll.algo = e.algo;
      d->coll.proto = e.proto;
      break;
    case nccl::kP2p:
      d->p2p.func = e.func;
      d->p2p.buff = e.recv_buff;
      d->p2p.datatype = e.datatype;
      d->p2p.count = e.count;
      d->p2p.peer = e.peer;
      d->p2p.nChannels = e.nchannels;
      break;
    case nccl::kKernelCh:
      d->kernelCh.channelId = e.channel;
      d->kernelCh.pTimer = e.ptimer;
      break;
    case nccl::kNetPlugin:
      d->netPlugin.id = e.net_id;
      d->netPlugin.data = e.net_data;
      break;
    default:
      FillProxyV(e, d);
  }
}

template <typename D>
void FillApiV5(const Ev& e, D* d) {
  switch (e.type) {
    case nccl::kGroupApi:
      d->groupApi.graphCaptured = e.graph_captured;
      d->groupApi.groupDepth = e.group_depth;
      break;
    case nccl::kCollApi:
      d->collApi.func = e.func;
      d->collApi.count = e.count;
      d->collApi.datatype = e.datatype;
      d->collApi.root = e.root;
      d->collApi.stream = e.stream;
      d->collApi.graphCaptured = e.graph_captured;
      if constexpr (std::is_same<D, nccl::DescrV7>::value) d->collApi.userTag = e.user_tag;
      break;
    case nccl::kP2pApi:
      d->p2pApi.func = e.func;
      d->p2pApi.count = e.count;
      d->p2pApi.datatype = e.datatype;
      d->p2pApi.stream = e.stream;
      d->p2pApi.graphCaptured = e.graph_captured;
      if constexpr (std::is_same<D, nccl::DescrV7>::value) d->p2pApi.userTag = e.user_tag;
      break;
    case nccl::kKernelLaunch:
      d->kernelLaunch.stream = e.stream;
      break;
    default:
      FillCommonV4(e, d);
      if (e.type == nccl::kColl) d->coll.parentGroup = e.parent_group;
      if (e.type == nccl::kP2p) d->p2p.parentGroup = e.parent_group;
  }
}

nccl::DescrV4 MakeV4(const Ev& e) {
  nccl::DescrV4 d;
  memset(&d, 0, sizeof(d));
  d.type = static_cast<uint8_t>(e.type);
  d.parentObj = e.parent;
  d.rank = e.rank;
  FillCommonV4(e, &d);
  return d;
}

nccl::DescrV5 MakeV5(const Ev& e) {
  nccl::DescrV5 d;
  memset(&d, 0, sizeof(d));
  d.type = e.type;
  d.parentObj = e.parent;
  d.rank = e.rank;
  FillApiV5(e, &d);
  return d;
}

nccl::DescrV6 MakeV6(const Ev& e) {
  nccl::DescrV6 d;
  memset(&d, 0, sizeof(d));
  d.type = e.type;
  d.parentObj = e.parent;
  d.rank = e.rank;
  switch (e.type) {
    case nccl::kCeColl:
      d.ceColl.seqNumber = e.seq;
      d.ceColl.func = e.func;
      d.ceColl.sendBuff = e.send_buff;
      d.ceColl.recvBuff = e.recv_buff;
      d.ceColl.count = e.count;
      d.ceColl.root = e.root;
      d.ceColl.datatype = e.datatype;
      d.ceColl.syncStrategy = e.sync_strategy;
      d.ceColl.intraBatchSync = e.intra_batch_sync;
      d.ceColl.batchSize = e.batch_size;
      d.ceColl.numBatches = e.num_batches;
      d.ceColl.ceSeqNum = e.ce_seq;
      d.ceColl.stream = e.stream;
      break;
    case nccl::kCeSync:
      d.ceCollSync.isComplete = e.is_complete;
      d.ceCollSync.nRanks = e.nranks;
      break;
    case nccl::kCeBatch:
      d.ceCollBatch.numOps = e.num_ops;
      d.ceCollBatch.totalBytes = e.total_bytes;
      d.ceCollBatch.useIntraSync = e.use_intra_sync;
      break;
    default:
      FillApiV5(e, &d);
  }
  return d;
}

// v7 (NCCL 2.31.2): v6's layout of every member, plus the tags, the
// symmetric kernel and the kernel phase.
nccl::DescrV7 MakeV7(const Ev& e) {
  nccl::DescrV7 d;
  memset(&d, 0, sizeof(d));
  d.type = e.type;
  d.parentObj = e.parent;
  d.rank = e.rank;
  switch (e.type) {
    case nccl::kCeColl:
      d.ceColl.seqNumber = e.seq;
      d.ceColl.func = e.func;
      d.ceColl.sendBuff = e.send_buff;
      d.ceColl.recvBuff = e.recv_buff;
      d.ceColl.count = e.count;
      d.ceColl.root = e.root;
      d.ceColl.datatype = e.datatype;
      d.ceColl.syncStrategy = e.sync_strategy;
      d.ceColl.intraBatchSync = e.intra_batch_sync;
      d.ceColl.batchSize = e.batch_size;
      d.ceColl.numBatches = e.num_batches;
      d.ceColl.ceSeqNum = e.ce_seq;
      d.ceColl.stream = e.stream;
      d.ceColl.userTag = e.user_tag;
      break;
    case nccl::kCeSync:
      d.ceCollSync.isComplete = e.is_complete;
      d.ceCollSync.nRanks = e.nranks;
      break;
    case nccl::kCeBatch:
      d.ceCollBatch.numOps = e.num_ops;
      d.ceCollBatch.totalBytes = e.total_bytes;
      d.ceCollBatch.useIntraSync = e.use_intra_sync;
      break;
    case nccl::kKernelPhase:
      d.kernelPhase.channelId = e.channel;
      d.kernelPhase.phaseId = e.phase;
      d.kernelPhase.phaseName = e.phase == nccl::kPhaseInitialSync ? "initial_sync"
                                : e.phase == nccl::kPhaseCompute   ? "compute"
                                                                   : "final_sync";
      d.kernelPhase.pTimer = e.ptimer;
      break;
    default:
      FillApiV5(e, &d);
      if (e.type == nccl::kColl) {
        d.coll.kernelVariant = e.kernel_variant;
        d.coll.isSymColl = e.is_sym_coll;
        d.coll.userTag = e.user_tag;
      }
      if (e.type == nccl::kP2p) d.p2p.userTag = e.user_tag;
  }
  return d;
}

bool IsProxyOpState(int s) {
  return (s >= nccl::kProxyOpSendPosted && s <= nccl::kProxyOpRecvDone) || s == nccl::kProxyOpInProgress;
}

}  // namespace

FakeComm::FakeComm(PluginLib* lib, int version) : lib_(lib), version_(version) {}

FakeComm::~FakeComm() {
  if (inited_) Finalize();
}

void* ForeignContext() {
  static void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return static_cast<char*>(page) + 64;
}

namespace {
// NCCL's ncclProfilerEventMask: one int for every communicator of the
// process, handed to each init and read again per operation.
int g_event_mask = 0;

// NCCL 2.31's profiler thread (src/plugin/profiler.cc, ncclProfilerThreadFunc),
// which reports kernel channels and their phases; one for the process here.
// Run() hands it a job and waits until it is done, so the events keep the
// order the caller's code gives them while NCCL's thread makes the calls.
// It lives until StopFakeProfilerThread (a test that forks afterwards must
// have no thread left: ThreadSanitizer refuses threads after a
// multi-threaded fork), and the next job starts it again.
class ProfilerThread {
 public:
  // Thread safety: any thread.
  static void RunJob(const std::function<void()>& fn) {
    std::lock_guard<std::mutex> lock(Instance());
    if (Current() == nullptr) Current() = new ProfilerThread();
    Current()->Run(fn);
  }
  static void Stop() {
    std::lock_guard<std::mutex> lock(Instance());
    delete Current();
    Current() = nullptr;
  }

 private:
  static std::mutex& Instance() {
    static std::mutex* mu = new std::mutex;  // leaked: used until exit
    return *mu;
  }
  static ProfilerThread*& Current() {
    static ProfilerThread* t = nullptr;
    return t;
  }
  ProfilerThread() : thread_([this] { Loop(); }) {}
  ~ProfilerThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // One job at a time (RunJob holds Instance()).
  void Run(const std::function<void()>& fn) {
    std::unique_lock<std::mutex> lock(mu_);
    job_ = &fn;
    done_ = false;
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_; });
    job_ = nullptr;
  }
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || (job_ != nullptr && !done_); });
      if (stop_) return;
      const std::function<void()>* job = job_;
      lock.unlock();
      (*job)();
      lock.lock();
      done_ = true;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void()>* job_ = nullptr;  // guarded by mu_
  bool done_ = false;                           // guarded by mu_
  bool stop_ = false;                           // guarded by mu_
  std::thread thread_;                          // last: starts once the rest is set
};
}  // namespace

// Read and written atomically, as NCCL does (communicators may be
// initialized on several threads at once).
void StopFakeProfilerThread() { ProfilerThread::Stop(); }

int NcclEventMask() { return __atomic_load_n(&g_event_mask, __ATOMIC_RELAXED); }
void SetNcclEventMask(int mask) { __atomic_store_n(&g_event_mask, mask, __ATOMIC_RELAXED); }

namespace {
std::atomic<bool> g_ras_active{false};
std::atomic<int> g_ras_mask{0};
// NCCL 2.31's ncclProfilerEnforceMaskDeps.
int WithMaskDeps(int mask) { return (mask & nccl::kKernelPhase) ? mask | nccl::kKernelCh : mask; }
}  // namespace

void SetRasEventMask(int mask) {
  mask = WithMaskDeps(mask);
  SetNcclEventMask(mask);
  g_ras_mask.store(mask, std::memory_order_relaxed);
  g_ras_active.store(true, std::memory_order_release);
}

void ClearRasEventMask() { g_ras_active.store(false, std::memory_order_release); }

int FakeComm::Init(uint64_t hash, const char* name, int nnodes, int nranks, int rank) {
  hash_ = hash;
  name_ = name;
  rank_ = rank;
  void* t = lib_->Table(version_);
  if (t == nullptr) {
    ADD_FAILURE() << "no ncclProfiler_v" << version_;
    return -1;
  }
  int rc = -1;
  ctx_ = nullptr;
  switch (version_) {
    case 1:
      rc = static_cast<nccl::ProfilerV1*>(t)->init(&ctx_, &g_event_mask);
      break;
    case 2:
      rc = static_cast<nccl::ProfilerV2*>(t)->init(&ctx_, &g_event_mask);
      break;
    case 3:
      rc = static_cast<nccl::ProfilerV3*>(t)->init(&ctx_, &g_event_mask);
      break;
    case 4:
      rc = static_cast<nccl::ProfilerV4*>(t)->init(&ctx_, &g_event_mask, name, hash, nnodes, nranks, rank, &FakeLogger);
      break;
    case 5:
      rc = static_cast<nccl::ProfilerV5*>(t)->init(&ctx_, hash, &g_event_mask, name, nnodes, nranks, rank, &FakeLogger);
      break;
    case 6:
      rc = static_cast<nccl::ProfilerV6*>(t)->init(&ctx_, hash, &g_event_mask, name, nnodes, nranks, rank, &FakeLogger);
      break;
    case 7:
      rc = static_cast<nccl::ProfilerV7*>(t)->init(&ctx_, hash, &g_event_mask, name, nnodes, nranks, rank, &FakeLogger);
      // NCCL 2.31 turns KernelCh on with KernelPhase (profiler.cc,
      // ncclProfilerEnforceMaskDeps).
      if (NcclEventMask() & nccl::kKernelPhase) SetNcclEventMask(NcclEventMask() | nccl::kKernelCh);
      break;
  }
  // 2.31 re-applies a mask RAS set, over whatever the plugin's init wrote
  // (ncclProfilerPluginInit).
  if (version_ >= 7 && g_ras_active.load(std::memory_order_acquire))
    SetNcclEventMask(g_ras_mask.load(std::memory_order_relaxed));
  mask_ = NcclEventMask();
  inited_ = rc == 0;
  return rc;
}

int FakeComm::Finalize() {
  if (!inited_) return 0;
  inited_ = false;
  // NCCL 2.28 and later finalize only a context the plugin gave.
  if (version_ >= 5 && ctx_ == nullptr) return 0;
  void* t = lib_->Table(version_);
  // finalize is at the same offset in every table.
  int rc = static_cast<nccl::ProfilerV6*>(t)->finalize(ctx_);
  ctx_ = nullptr;
  return rc;
}

FakeComm FakeComm::Alias() const {
  FakeComm a(*this);
  a.inited_ = false;
  return a;
}

int FakeComm::FinalizeAgain(void* context) {
  return static_cast<nccl::ProfilerV6*>(lib_->Table(version_))->finalize(context);
}

int FakeComm::StartRaw(const Ev& in, void** handle) {
  Ev e = in;
  if (version_ <= 3 && (e.type == nccl::kColl || e.type == nccl::kP2p)) {
    e.comm_hash = hash_;
    e.comm_name = nullptr;  // NCCL 2.23 to 2.26 never set it
  }
  // NCCL fills rank only for these; Group, KernelCh, ProxyCtrl and the API
  // events (GroupApi, CollApi, P2pApi, KernelLaunch) carry 0.
  const bool has_rank = e.type == nccl::kColl || e.type == nccl::kP2p || e.type == nccl::kProxyOp ||
                        e.type == nccl::kProxyStep || e.type == nccl::kNetPlugin || e.type == nccl::kCeColl ||
                        e.type == nccl::kCeSync || e.type == nccl::kCeBatch;
  if (e.rank == 0 && has_rank) e.rank = rank_;
  void* context = e.context != nullptr ? e.context : ctx_;
  void* t = lib_->Table(version_);
  switch (version_) {
    case 1: {
      nccl::DescrV1 d = MakeV1(e);
      return static_cast<nccl::ProfilerV1*>(t)->startEvent(context, handle, &d);
    }
    case 2: {
      nccl::DescrV2 d = MakeV2(e);
      return static_cast<nccl::ProfilerV2*>(t)->startEvent(context, handle, &d);
    }
    case 3: {
      nccl::DescrV3 d = MakeV3(e);
      return static_cast<nccl::ProfilerV3*>(t)->startEvent(context, handle, &d);
    }
    case 4: {
      nccl::DescrV4 d = MakeV4(e);
      return static_cast<nccl::ProfilerV4*>(t)->startEvent(context, handle, &d);
    }
    case 5: {
      nccl::DescrV5 d = MakeV5(e);
      return static_cast<nccl::ProfilerV5*>(t)->startEvent(context, handle, &d);
    }
    case 6: {
      nccl::DescrV6 d = MakeV6(e);
      return static_cast<nccl::ProfilerV6*>(t)->startEvent(context, handle, &d);
    }
    case 7: {
      nccl::DescrV7 d = MakeV7(e);
      return static_cast<nccl::ProfilerV7*>(t)->startEvent(context, handle, &d);
    }
  }
  return -1;
}

void* FakeComm::Start(const Ev& e) {
  void* h = reinterpret_cast<void*>(0xdeadbeef);  // must be overwritten
  int rc = StartRaw(e, &h);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(h, reinterpret_cast<void*>(0xdeadbeef)) << "startEvent left the handle unwritten";
  return h;
}

void FakeComm::Stop(void* h) {
  void* t = lib_->Table(version_);
  EXPECT_EQ(static_cast<nccl::ProfilerV6*>(t)->stopEvent(h), 0);
}

void FakeComm::State(void* h, int state, const StArgs& a) {
  void* t = lib_->Table(version_);
  if (version_ <= 3) {
    nccl::StateArgsV1 s;
    memset(&s, 0, sizeof(s));
    // NCCL 2.23 to 2.26 pass null args with every ProxyStep state.
    const bool step_state = state >= nccl::kProxyStepSendGPUWait && state <= nccl::kProxyStepRecvGPUWait;
    nccl::StateArgsV1* args = step_state ? nullptr : &s;
    if (IsProxyOpState(state)) {
      s.proxyOp.transSize = a.trans_size;
      s.proxyOp.steps = a.steps;
    } else if (state >= nccl::kProxyCtrlIdle && state <= nccl::kProxyCtrlAppendEnd) {
      s.proxyCtrl.appendedProxyOps = a.appended_proxy_ops;
    }
    int rc;
    if (version_ == 1) rc = static_cast<nccl::ProfilerV1*>(t)->recordEventState(h, state, args);
    else if (version_ == 2) rc = static_cast<nccl::ProfilerV2*>(t)->recordEventState(h, state, args);
    else rc = static_cast<nccl::ProfilerV3*>(t)->recordEventState(h, state, args);
    EXPECT_EQ(rc, 0);
    return;
  }
  nccl::StateArgsV4 s;
  memset(&s, 0, sizeof(s));
  if ((state >= nccl::kProxyStepSendGPUWait && state <= nccl::kProxyStepRecvGPUWait) ||
      state == nccl::kProxyStepSendPeerWait) {
    s.proxyStep.transSize = a.trans_size;
  } else if (state >= nccl::kProxyCtrlIdle && state <= nccl::kProxyCtrlAppendEnd) {
    s.proxyCtrl.appendedProxyOps = a.appended_proxy_ops;
  } else if (state == nccl::kNetPluginUpdate) {
    s.netPlugin.data = a.net_data;
  } else if (state == nccl::kKernelChStop || state == nccl::kKernelPhaseStop) {
    s.kernelCh.pTimer = a.ptimer;
  }
  // NCCL passes null args with the API events' states, and zeroed ones
  // with ProxyOp's InProgress.
  const bool has_args = state < nccl::kGroupStartApiStop || state == nccl::kKernelPhaseStop;
  int rc;
  if (version_ == 4) rc = static_cast<nccl::ProfilerV4*>(t)->recordEventState(h, state, has_args ? &s : nullptr);
  else if (version_ == 5) rc = static_cast<nccl::ProfilerV5*>(t)->recordEventState(h, state, has_args ? &s : nullptr);
  else if (version_ == 6) rc = static_cast<nccl::ProfilerV6*>(t)->recordEventState(h, state, has_args ? &s : nullptr);
  else rc = static_cast<nccl::ProfilerV7*>(t)->recordEventState(h, state, has_args ? &s : nullptr);
  EXPECT_EQ(rc, 0);
}

std::vector<void*> FakeComm::ProxyOps(const OpSpec& s, void* parent, int channel, OpResult* r) {
  std::vector<void*> open;
  std::vector<std::pair<int, bool>> ops;  // peer, is_send
  for (int peer : s.proxy_peers) {
    if (!s.p2p) {
      ops.push_back({peer, true});
      ops.push_back({peer, false});
    }
  }
  if (s.p2p) ops.push_back({s.peer, strcmp(s.func, "Send") == 0});
  for (auto [peer, is_send] : ops) {
    void* context = s.pxn ? ForeignContext() : nullptr;
    Ev e;
    e.type = nccl::kProxyOp;
    e.context = context;
    e.parent = s.pxn ? reinterpret_cast<void*>(0x1234) : parent;
    e.pid = s.pxn ? getpid() + 100000 : getpid();
    e.channel = static_cast<uint8_t>(channel);
    e.peer = peer;
    e.nsteps = s.nsteps;
    e.chunk_size = s.chunk_size;
    e.is_send = is_send;
    void* px = Start(e);
    if (!s.pxn) r->proxy_ops++;
    if (version_ <= 3) {
      State(px, is_send ? nccl::kProxyOpSendPosted : nccl::kProxyOpRecvPosted, {0, 0});
    } else {
      State(px, nccl::kProxyOpInProgress);
    }
    for (int step = 0; step < s.nsteps; ++step) {
      Ev st;
      st.type = nccl::kProxyStep;
      st.context = context;
      st.parent = px;
      st.step = step;
      void* sh = Start(st);
      std::vector<int> states;
      if (is_send) {
        states.push_back(nccl::kProxyStepSendGPUWait);
        if (version_ >= 4) states.push_back(nccl::kProxyStepSendPeerWait);
        states.push_back(nccl::kProxyStepSendWait);
      } else {
        states = {nccl::kProxyStepRecvWait, nccl::kProxyStepRecvFlushWait, nccl::kProxyStepRecvGPUWait};
      }
      for (int x : states) {
        StArgs a;
        a.trans_size = s.step_bytes;
        State(sh, x, a);
      }
      if (version_ >= 4 && s.net_plugin) {
        nccl::NetIbDescrV1 ib;
        memset(&ib, 0, sizeof(ib));
        ib.type = 1;
        ib.qp.device = 3;
        ib.qp.wr_id = 0xabc000 + step;
        ib.qp.opcode = is_send ? 2 : 4;
        ib.qp.qpNum = 77 + channel;
        ib.qp.length = s.step_bytes;
        Ev n;
        n.type = nccl::kNetPlugin;
        n.context = context;
        n.parent = sh;
        n.net_id = nccl::kNetTypeIb | 1;
        n.net_data = &ib;
        void* nh = Start(n);
        StArgs u;
        u.net_data = &ib;
        State(nh, nccl::kNetPluginUpdate, u);
        Stop(nh);
        nccl::NetSocketDescrV1 so;
        memset(&so, 0, sizeof(so));
        so.type = 1;
        so.sock.fd = 40 + channel;
        so.sock.op = is_send ? 1 : 0;
        so.sock.length = s.step_bytes / 2;
        Ev m;
        m.type = nccl::kNetPlugin;
        m.context = context;
        m.parent = sh;
        m.net_id = nccl::kNetTypeSocket | 1;
        m.net_data = &so;
        void* mh = Start(m);
        Stop(mh);
      }
      Stop(sh);
      if (version_ >= 4 && !s.pxn && sh != nullptr) r->proxy_bytes += s.step_bytes;
    }
    if (version_ <= 3) {
      if (is_send) {
        State(px, nccl::kProxyOpSendRemFifoWait, {0, 1});
        State(px, nccl::kProxyOpSendTransmitted, {s.step_bytes, s.nsteps});
        State(px, nccl::kProxyOpSendDone, {s.step_bytes * s.nsteps, s.nsteps});
      } else {
        State(px, nccl::kProxyOpRecvReceived, {s.step_bytes, 1});
        State(px, nccl::kProxyOpRecvTransmitted, {s.step_bytes, s.nsteps});
        State(px, nccl::kProxyOpRecvDone, {s.step_bytes * s.nsteps, s.nsteps});
      }
    }
    open.push_back(px);
  }
  return open;
}

// The order of NCCL 2.27 to 2.31 (docs/nccl_call_order.md): the API events
// and the kernel launch come first; then, on the same thread, the plan's
// Group and ops start and stop (hostStreamPlanTask), their stop meaning
// "enqueued". NCCL's proxy thread meanwhile sees the kernel's channels start
// and stop, and ProxyOps stop after the channels, once the network is done.
// 2.23 to 2.26 differ only in having no API events and no kernel launch;
// 2.31 in reporting the channels (and their phases) on a thread of its own.
OpResult FakeComm::RunOp(const OpSpec& s) {
  OpResult r;
  // The mask as NCCL reads it at the API call and keeps with the call's
  // tasks (2.28+: ncclProfilerStartGroupApiEvent).
  const int m = NcclEventMask();
  // Only under a RAS mask does this fake hold back what the mask does not
  // ask for (the plugin refuses the rest itself).
  const bool gate = g_ras_active.load(std::memory_order_acquire);
  const int op_bits = (s.p2p ? nccl::kP2p : nccl::kColl) | nccl::kProxyOp | nccl::kProxyStep | nccl::kKernelCh |
                      nccl::kNetPlugin;
  const bool op_reported = !gate || (m & op_bits) != 0;
  void* group_api = nullptr;
  void* api = nullptr;
  const bool api_events = version_ >= 5 && s.api_events && !s.replay;
  if (api_events) {
    const bool captured = s.captured && s.captured(s.stream);
    Ev g;
    g.type = nccl::kGroupApi;
    g.group_depth = 1;
    g.graph_captured = captured;
    group_api = Start(g);
    State(group_api, nccl::kGroupStartApiStop);
    Ev a;
    a.type = s.p2p ? nccl::kP2pApi : nccl::kCollApi;
    a.parent = group_api;
    a.func = s.func;
    a.count = s.count;
    a.datatype = s.datatype;
    a.root = s.root;
    a.stream = s.stream;
    a.user_tag = s.user_tag;
    a.graph_captured = captured;
    api = Start(a);
    Stop(api);
    State(group_api, nccl::kGroupEndApiStart);
    Ev k;
    k.type = nccl::kKernelLaunch;
    k.parent = group_api;
    k.stream = s.stream;
    void* kh = !gate || (m & nccl::kKernelLaunch) ? Start(k) : nullptr;
    if (s.launch) s.launch(s.stream);
    if (kh != nullptr) Stop(kh);
    r.api = api;
  }
  if (s.defer_to_replays) {
    if (api_events) Stop(group_api);
    r.counted = false;
    return r;
  }
  if (!op_reported) {
    // NCCL starts no Group and no task events: the kernel runs unseen.
    if (api_events) Stop(group_api);
    return r;
  }
  Ev ge;
  ge.type = nccl::kGroup;  // parentObj null in every release
  void* group = Start(ge);
  // NCCL 2.23 to 2.27 (API v1 to v4) start a plan's Coll and P2p events
  // only under a Group handle that is not null (src/misc/profiler.cc
  // 2.23:272); the kernel still runs, unseen.
  if (version_ <= 4 && group == nullptr) {
    if (api_events) Stop(group_api);
    return r;
  }

  Ev o;
  o.type = s.p2p ? nccl::kP2p : nccl::kColl;
  void* task_api = s.replay ? s.replay_api : api;
  o.parent = version_ >= 5 ? task_api : group;
  const bool persistent = s.replay || (s.captured && s.captured(s.stream));
  r.counted = !persistent || ((group != nullptr || (version_ >= 5 && task_api != nullptr)) &&
                              (m & nccl::kKernelCh) != 0);
  o.parent_group = group;
  o.seq = s.seq;
  o.func = s.func;
  o.send_buff = s.send_buff;
  o.recv_buff = s.recv_buff;
  o.count = s.count;
  o.root = s.root;
  o.datatype = s.datatype;
  o.nchannels = s.nchannels;
  o.nwarps = s.nwarps;
  o.algo = s.algo;
  o.proto = s.proto;
  o.peer = s.peer;
  o.redop = s.redop;
  o.traffic_bytes = s.traffic_bytes;
  o.is_collnet = s.is_collnet;
  o.is_nvls = s.is_nvls;
  o.user_tag = s.user_tag;
  if (s.kernel_variant != nullptr) {
    o.is_sym_coll = true;
    o.kernel_variant = s.kernel_variant;
    const char* cut = strchr(s.kernel_variant, '_');
    o.algo = cut != nullptr ? cut + 1 : s.kernel_variant;
    o.proto = "";
  }
  void* op = Start(o);
  r.handle = op;

  // The kernel runs: channels start, the proxy moves data, channels stop,
  // then the ProxyOps stop.
  // NCCL's proxy thread reports kernel channels only when the mask asks
  // (v5+ with completions from CUDA events does not).
  const bool channels = version_ >= 3 && (version_ < 5 || (m & nccl::kKernelCh) != 0);
  auto children = [&] {
    if (!s.kernel_runs) return;
    std::vector<void*> kc(s.nchannels, nullptr);
    // From 2.31 NCCL's profiler thread reports the channels, not the proxy.
    auto on_channel_thread = [&](const std::function<void()>& fn) {
      if (version_ >= 7) {
        ProfilerThread::RunJob(fn);
      } else {
        fn();
      }
    };
    if (channels) {
      on_channel_thread([&] {
        for (int c = 0; c < s.nchannels; ++c) {
          Ev k;
          k.type = nccl::kKernelCh;
          k.parent = op;
          k.channel = static_cast<uint8_t>(c);
          k.ptimer = s.ptimer0 + s.start_step * c;
          kc[c] = Start(k);
        }
      });
    }
    std::vector<void*> proxies;
    for (int c = 0; c < s.nchannels; ++c) {
      std::vector<void*> p = ProxyOps(s, op, c, &r);
      proxies.insert(proxies.end(), p.begin(), p.end());
    }
    if (channels) {
      const int nstop = s.kernel_stop < 0 ? s.nchannels : s.kernel_stop;
      const bool phases = version_ >= 7 && (m & nccl::kKernelPhase) != 0;
      on_channel_thread([&] {
        for (int c = 0; c < nstop; ++c) {
          const uint64_t start = s.ptimer0 + s.start_step * c;
          const uint64_t stop = s.ptimer0 + s.duration + s.stop_step * c;
          // 2.31 reports a channel's phases only once it completed, just
          // before its KernelChStop (profilerFireKernelPhaseEvents), and
          // skips the state and stop of a phase given a null handle.
          if (phases) {
            const uint64_t bounds[4] = {start, start + s.phase_ends[0], start + s.phase_ends[1], stop};
            for (uint8_t i = 0; i < 3; ++i) {
              Ev p;
              p.type = nccl::kKernelPhase;
              p.parent = kc[c];
              p.channel = static_cast<uint8_t>(c);
              p.phase = i;
              p.ptimer = bounds[i];
              void* ph = Start(p);
              if (ph == nullptr) continue;
              StArgs a;
              a.ptimer = bounds[i + 1];
              State(ph, nccl::kKernelPhaseStop, a);
              Stop(ph);
            }
          }
          if (version_ >= 4) {
            StArgs a;
            a.ptimer = stop;
            State(kc[c], nccl::kKernelChStop, a);
          }
          Stop(kc[c]);
          r.kernel_channels++;
        }
      });
      if (version_ >= 4 && s.nchannels > 0 && nstop > 0) {
        r.gpu_start = s.ptimer0;
        r.gpu_stop = s.ptimer0 + s.duration + s.stop_step * (nstop - 1);
      }
    }
    if (s.stop_proxies) {
      for (void* px : proxies) Stop(px);
    }
  };
  // NCCL wakes its proxy thread before it stops the ops: the children may
  // all come before the op's own stop.
  if (s.children_before_stop) children();
  Stop(op);  // enqueued
  Stop(group);
  if (api_events) Stop(group_api);
  if (!s.children_before_stop) children();
  return r;
}

// NCCL's proxy loop makes three kinds of short ProxyCtrl events: around
// its sleep (Sleep, Wakeup), around appending posted ops (Append with 0,
// AppendEnd with the count), and one per idle/active change.
void FakeComm::RunProxyCtrl(int appended) {
  Ev e;
  e.type = nccl::kProxyCtrl;
  void* h = Start(e);
  State(h, nccl::kProxyCtrlSleep);
  State(h, nccl::kProxyCtrlWakeup);
  Stop(h);
  h = Start(e);
  StArgs none;
  State(h, nccl::kProxyCtrlAppend, none);
  StArgs a;
  a.appended_proxy_ops = appended;
  State(h, nccl::kProxyCtrlAppendEnd, a);
  Stop(h);
  for (int state : {nccl::kProxyCtrlActive, nccl::kProxyCtrlIdle}) {
    h = Start(e);
    State(h, state);
    Stop(h);
  }
}

// A copy-engine collective as NCCL 2.29 and 2.30 report it (src/ce_coll.cc):
// the API events, then on the launching thread a CeColl under the (already
// stopped) CollApi, a CeSync before and after a CeBatch, all under the
// CeColl. CE events get no recordEventState (profiler_v6.h says so).
void FakeComm::RunCe(uint64_t seq, uint32_t ce_seq, uint64_t user_tag) {
  Ev g;
  g.type = nccl::kGroupApi;
  g.group_depth = 1;
  void* group_api = Start(g);
  State(group_api, nccl::kGroupStartApiStop);
  Ev a;
  a.type = nccl::kCollApi;
  a.parent = group_api;
  a.func = "AllGather";
  a.count = 65536;
  a.datatype = "ncclBfloat16";
  a.stream = reinterpret_cast<void*>(0x6000);
  a.user_tag = user_tag;
  void* api = Start(a);
  Stop(api);
  State(group_api, nccl::kGroupEndApiStart);
  Ev c;
  c.type = nccl::kCeColl;
  c.parent = api;
  c.seq = seq;
  c.func = "AllGather";
  c.send_buff = reinterpret_cast<const void*>(0x7f00000a0000);
  c.recv_buff = reinterpret_cast<void*>(0x7f00000b0000);
  c.count = 65536;
  c.root = 3;
  c.datatype = "ncclBfloat16";
  c.sync_strategy = "barrier";
  c.intra_batch_sync = true;
  c.batch_size = 4;
  c.num_batches = 5;
  c.ce_seq = ce_seq;
  c.stream = reinterpret_cast<void*>(0x6000);
  c.user_tag = user_tag;
  void* ce = Start(c);
  auto sync = [&](bool complete) {
    Ev y;
    y.type = nccl::kCeSync;
    y.parent = ce;
    y.is_complete = complete;
    y.nranks = 8;
    Stop(Start(y));
  };
  sync(true);
  Ev b;
  b.type = nccl::kCeBatch;
  b.parent = ce;
  b.num_ops = 3;
  b.total_bytes = 1 << 20;
  b.use_intra_sync = true;
  Stop(Start(b));
  sync(false);
  Stop(ce);
  Stop(group_api);
}

// ------------------------------------------------------------------- reading

std::vector<std::string> TraceFiles(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    const std::string ext = ".ncclwatch";
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0) out.push_back(dir + "/" + n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

ReadResult ReadTraceFile(const std::string& path) {
  ReadResult rr;
  rr.path = path;
  tools::TraceReader reader;
  std::string err;
  if (!reader.Open(path, &err)) {
    ADD_FAILURE() << err;
    rr.only_cut_tail = false;
    return rr;
  }
  trace::Record rec;
  uint64_t off = 0;
  while (reader.Next(&rec, &off)) rr.records.push_back(rec);
  rr.issues = reader.IssueLines();
  rr.cut_tail = reader.cut_tail();
  for (const tools::ReadIssue& i : reader.issues())
    if (i.kind != tools::ReadIssue::kCutTail) rr.only_cut_tail = false;
  return rr;
}

std::string Trace::Str(uint32_t id) const {
  auto it = strings.find(id);
  return it == strings.end() ? "<undefined string " + std::to_string(id) + ">" : it->second;
}

std::vector<const trace::EventStart*> Trace::Children(uint64_t parent_id, trace::EventType type) const {
  std::vector<const trace::EventStart*> out;
  for (const trace::EventStart* s : starts)
    if (s->parent_id() == parent_id && s->type() == type) out.push_back(s);
  return out;
}

void IndexTrace(Trace* t) {
  // GPU times: gpu = reference CPU time + (gpu_base_ns - cpu_ns) + delta, with
  // the most recent GpuClock (trace.proto).
  int64_t offset = 0;
  bool have_clock = false;
  auto gpu = [&](uint64_t ref, int64_t delta) -> uint64_t {
    EXPECT_TRUE(have_clock) << "GPU delta before any GpuClock in " << t->raw.path;
    return ref + static_cast<uint64_t>(offset) + static_cast<uint64_t>(delta);
  };
  auto complete = [&](OpView* v, const trace::OpDone& d, bool folded) {
    v->done_count++;
    v->folded = folded;
    v->done = d;
    if (folded) {
      v->done_ns = v->op->start_ns() + d.done_after_start_ns();
      if (d.kernel_channels() == 0) v->done.set_kernel_channels(v->op->nchannels());
    } else {
      v->done_ns = d.done_ns();
    }
    v->has_gpu = d.gpu_timing() || d.gpu_duration_ns() > 0;
    v->done.set_gpu_timing(v->has_gpu);
    if (v->has_gpu) {
      v->gpu_start = gpu(v->done_ns, d.gpu_start_delta_ns());
      v->gpu_stop = v->gpu_start + d.gpu_duration_ns();
    }
  };
  bool seen_non_batch = false;
  std::vector<std::pair<const trace::OpDone*, std::pair<int64_t, bool>>> separate;  // done, (clock offset, had clock)
  for (const trace::Record& r : t->raw.records) {
    if (!r.has_batch() && !seen_non_batch) {
      seen_non_batch = true;
      t->header_first = r.has_header();
    }
    switch (r.body_case()) {
      case trace::Record::kHeader:
        if (t->header == nullptr) t->header = &r.header();
        break;
      case trace::Record::kStringDef:
        EXPECT_EQ(t->strings.count(r.string_def().id()), 0u) << "string id defined twice: " << r.string_def().id();
        t->strings[r.string_def().id()] = r.string_def().text();
        break;
      case trace::Record::kCommInit:
        t->comm_inits.push_back(&r.comm_init());
        break;
      case trace::Record::kCommFinalize:
        t->comm_finalizes.push_back(&r.comm_finalize());
        break;
      case trace::Record::kOp: {
        OpView v;
        v.op = &r.op();
        if (r.op().has_completion()) complete(&v, r.op().completion(), true);
        if (r.op().event_id() != 0) {
          EXPECT_EQ(t->op_by_id.count(r.op().event_id()), 0u) << "op event id twice: " << r.op().event_id();
          t->op_by_id[r.op().event_id()] = t->ops.size();
        }
        t->ops.push_back(v);
        break;
      }
      case trace::Record::kOpDone:
        separate.push_back({&r.op_done(), {offset, have_clock}});
        break;
      case trace::Record::kEventStart:
        t->starts.push_back(&r.event_start());
        t->start_by_id[r.event_start().event_id()] = &r.event_start();
        if (r.event_start().has_kernel_ch() && r.event_start().kernel_ch().has_gpu_start())
          t->ev_gpu_start[r.event_start().event_id()] =
              gpu(r.event_start().time_ns(), r.event_start().kernel_ch().gpu_start_delta_ns());
        if (r.event_start().has_kernel_phase() && r.event_start().kernel_phase().has_gpu_start())
          t->ev_gpu_start[r.event_start().event_id()] =
              gpu(r.event_start().time_ns(), r.event_start().kernel_phase().gpu_start_delta_ns());
        break;
      case trace::Record::kEventStop:
        t->stop_by_id[r.event_stop().event_id()] = &r.event_stop();
        if (r.event_stop().has_gpu_stop())
          t->ev_gpu_stop[r.event_stop().event_id()] = gpu(r.event_stop().time_ns(), r.event_stop().gpu_stop_delta_ns());
        break;
      case trace::Record::kEventState:
        t->states_by_id[r.event_state().event_id()].push_back(&r.event_state());
        if (r.event_state().has_gpu())
          t->state_gpu[r.event_state().event_id()] = gpu(r.event_state().time_ns(), r.event_state().gpu_delta_ns());
        break;
      case trace::Record::kGpuClock:
        offset = static_cast<int64_t>(r.gpu_clock().gpu_base_ns() - r.gpu_clock().cpu_ns());
        have_clock = true;
        t->gpu_clocks++;
        break;
      case trace::Record::kHeartbeat:
        t->heartbeats.push_back(&r.heartbeat());
        break;
      case trace::Record::kStuck:
        t->stucks.push_back(&r.stuck());
        break;
      case trace::Record::kDrops:
        t->drops.push_back(&r.drops());
        break;
      case trace::Record::kFinalize:
        t->finalizes.push_back(&r.finalize());
        break;
      case trace::Record::kBatch:
        t->batches.push_back(&r.batch());
        break;
      default:
        break;
    }
  }
  // Separate OpDone records may come before their Op (another thread's buffer).
  for (auto& [d, clk] : separate) {
    auto it = t->op_by_id.find(d->event_id());
    if (it == t->op_by_id.end()) {
      t->orphan_done.push_back(d);
      continue;
    }
    const int64_t saved = offset;
    const bool saved_have = have_clock;
    offset = clk.first;
    have_clock = clk.second;
    complete(&t->ops[it->second], *d, false);
    offset = saved;
    have_clock = saved_have;
  }
}

std::unique_ptr<Trace> ReadTrace(const std::string& path) {
  auto t = std::make_unique<Trace>();
  t->raw = ReadTraceFile(path);
  IndexTrace(t.get());
  return t;
}

std::unique_ptr<Trace> ReadSingleTrace(const std::string& dir) {
  std::vector<std::string> files = TraceFiles(dir);
  EXPECT_EQ(files.size(), 1u) << "trace files in " << dir;
  if (files.empty()) return std::make_unique<Trace>();
  return ReadTrace(files[0]);
}

std::unique_ptr<Trace> WaitForTrace(const std::string& dir, const std::function<bool(const Trace&)>& done) {
  DirWatch watch(dir);
  std::unique_ptr<Trace> t;
  WaitUntil(
      [&] {
        std::vector<std::string> files = TraceFiles(dir);
        if (files.size() > 1) {
          ADD_FAILURE() << files.size() << " trace files in " << dir;
          t = std::make_unique<Trace>();
          return true;
        }
        if (files.empty()) return false;
        t = ReadTrace(files[0]);
        return done(*t);
      },
      {watch.fd()}, 100);
  return t;
}

bool WriterPast(const Trace& t, uint64_t mono_ns) {
  if (t.header == nullptr) return false;
  int after = 0;
  for (const trace::Heartbeat* h : t.heartbeats) after += t.header->mono_base_ns() + h->time_ns() >= mono_ns;
  return after >= 2;
}

Ev AllReduceEv(uint64_t seq) {
  Ev o;
  o.type = nccl::kColl;
  o.seq = seq;
  o.func = "AllReduce";
  o.datatype = "ncclFloat32";
  o.algo = "RING";
  o.proto = "SIMPLE";
  o.count = 4096;
  o.nchannels = 2;
  o.nwarps = 8;
  return o;
}

}  // namespace ncclwatch::testing

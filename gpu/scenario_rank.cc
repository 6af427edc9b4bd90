// One forked rank (struct Child): device, communicators (world, split into
// tp and dp) and buffers; the step loop that issues each step's ops in order,
// with the scenario's hooks, and polls for their completion under the
// watchdog; teardown. Also Fatal, which in a rank hands a failed call to the
// watchdog so the communicators are aborted first.

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_common.h"
#include "scenario.h"
#include "scenario_watchdog.h"

namespace ncclwatch::scenarios {
namespace {

Watchdog* g_watchdog = nullptr;  // set in the child

}  // namespace

void Fatal(const char* file, int line, const char* call, const std::string& what) {
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + what;
  if (g_watchdog != nullptr) {
    if (g_watchdog->firing()) Park();  // the watchdog is aborting; it exits for us
    g_watchdog->Fire(kExitError, msg + "; aborting communicators");
  }
  Log("%s", msg.c_str());
  exit(kExitError);
}

namespace {

struct Child {
  const Options& opt;
  const Scenario& scen;
  int rank;
  int nranks;
  Watchdog wd;
  ncclComm_t comms[kNumComms] = {nullptr, nullptr, nullptr};
  int comm_size[kNumComms] = {0, 0, 0};
  int comm_rank[kNumComms] = {0, 0, 0};
  cudaStream_t stream = nullptr;
  float* sendbuf = nullptr;
  float* recvbuf = nullptr;
  void* scratch_send = nullptr;  // Scenario::scratch_bytes each, for ops with .scratch
  void* scratch_recv = nullptr;

  Child(const Options& o, const Scenario& s, int r) : opt(o), scen(s), rank(r), nranks(o.nranks) {}

  // Non-blocking communicators: wait until the communicator is ready for the
  // next call. Blocking ones are always ready when a call returns.
  void WaitComm(CommId id) {
    if (!opt.nonblocking) return;
    if (comms[id] == nullptr) Fatal(__FILE__, __LINE__, "WaitComm", "no communicator handle");
    for (;;) {
      ncclResult_t st = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(comms[id], &st));
      if (st == ncclSuccess) return;
      if (st != ncclInProgress)
        Fatal(__FILE__, __LINE__, "ncclCommGetAsyncError", std::string(kCommNames[id]) + ": " +
                                                                ncclGetErrorString(st) + " (" +
                                                                ncclGetLastError(comms[id]) + ")");
      if (wd.firing()) Park();
      usleep(100);
    }
  }

  ncclConfig_t Config(CommId id) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = kCommNames[id];
    if (opt.nonblocking) cfg.blocking = 0;
    return cfg;
  }

  void Split(CommId id, int color) {
    ncclConfig_t cfg = Config(id);
    NCCL_CHECK(ncclCommSplit(comms[kWorld], color, rank, &comms[id], &cfg));
    // A non-blocking split may fill in the handle only once the parent is
    // ready (seen with NCCL 2.28.3), so register after the waits.
    WaitComm(kWorld);
    WaitComm(id);
    wd.Register(id, comms[id]);
    NCCL_CHECK(ncclCommCount(comms[id], &comm_size[id]));
    NCCL_CHECK(ncclCommUserRank(comms[id], &comm_rank[id]));
  }

  void Init(const ncclUniqueId& id) {
    int ndev = 0;
    CUDA_CHECK(cudaGetDeviceCount(&ndev));
    // SCENARIO_ONE_GPU=1: every rank on device 0 with its own NCCL_HOSTID,
    // so NCCL takes the ranks for separate nodes and connects them over
    // sockets (../shared/gpu/one_gpu_ranks.py): real NCCL where one GPU is
    // lent. Functional runs only: sockets say nothing of NVLink speed.
    const char* one = getenv("SCENARIO_ONE_GPU");
    const bool one_gpu = one != nullptr && strcmp(one, "1") == 0;
    if (!one_gpu && ndev < nranks) {
      Log("need %d visible GPUs, found %d (SCENARIO_ONE_GPU=1 puts every rank on one)", nranks, ndev);
      exit(kExitError);
    }
    const int dev = one_gpu ? 0 : rank;
    if (one_gpu) {
      char host[32];
      snprintf(host, sizeof(host), "host%d", rank);
      setenv("NCCL_HOSTID", host, 1);
      setenv("NCCL_SOCKET_IFNAME", "lo", 1);
      setenv("NCCL_IB_DISABLE", "1", 1);
    }
    CUDA_CHECK(cudaSetDevice(dev));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));

    int64_t t0 = NowNs();
    wd.SetWhere("ncclCommInitRankConfig(world)");
    ncclConfig_t cfg = Config(kWorld);
    NCCL_CHECK(ncclCommInitRankConfig(&comms[kWorld], nranks, id, rank, &cfg));
    if (comms[kWorld] != nullptr) wd.Register(kWorld, comms[kWorld]);
    WaitComm(kWorld);
    NCCL_CHECK(ncclCommCount(comms[kWorld], &comm_size[kWorld]));
    NCCL_CHECK(ncclCommUserRank(comms[kWorld], &comm_rank[kWorld]));
    wd.SetWhere("ncclCommSplit(tp)");
    Split(kTp, rank / 2);
    wd.SetWhere("ncclCommSplit(dp)");
    Split(kDp, rank % 2);

    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&sendbuf, opt.max_bytes));
    CUDA_CHECK(cudaMalloc(&recvbuf, opt.max_bytes));
    CUDA_CHECK(cudaMemset(sendbuf, 0, opt.max_bytes));
    CUDA_CHECK(cudaMemset(recvbuf, 0, opt.max_bytes));
    if (scen.scratch_bytes > 0) {
      CUDA_CHECK(cudaMalloc(&scratch_send, scen.scratch_bytes));
      CUDA_CHECK(cudaMalloc(&scratch_recv, scen.scratch_bytes));
      CUDA_CHECK(cudaMemset(scratch_send, 0, scen.scratch_bytes));
      CUDA_CHECK(cudaMemset(scratch_recv, 0, scen.scratch_bytes));
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    Log("ready on GPU %d (%s, bus %02x:%02x): world %d/%d, tp %d/%d (color %d), dp %d/%d "
        "(color %d), %s comms, init %.0f ms",
        rank, prop.name, prop.pciBusID, prop.pciDeviceID, comm_rank[kWorld], comm_size[kWorld],
        comm_rank[kTp], comm_size[kTp], rank / 2, comm_rank[kDp], comm_size[kDp], rank % 2,
        opt.nonblocking ? "non-blocking" : "blocking", SecSince(t0) * 1e3);
  }

  void Issue(const Op& op) {
    ncclComm_t c = comms[op.comm];
    size_t count = ElemCount(op);
    void* sb = sendbuf;
    void* rb = recvbuf;
    size_t cap = opt.max_bytes;
    if (op.scratch) {
      sb = scratch_send;
      rb = scratch_recv;
      cap = scen.scratch_bytes;
    }
    // Never let a scenario overrun a buffer (a crash is not the fault we want).
    if (sb == nullptr || count * DtypeBytes(op.dtype) > cap)
      Fatal(__FILE__, __LINE__, "Issue", "op does not fit its buffers: " + Describe(op));
    switch (op.kind) {
      case OpKind::kAllReduce:
        NCCL_CHECK(ncclAllReduce(sb, rb, count, op.dtype, ncclSum, c, stream));
        break;
      case OpKind::kAllGather: {  // recv total = bytes
        size_t per = std::max<size_t>(1, count / comm_size[op.comm]);
        NCCL_CHECK(ncclAllGather(sendbuf, recvbuf, per, ncclFloat, c, stream));
        break;
      }
      case OpKind::kReduceScatter: {  // send total = bytes
        size_t per = std::max<size_t>(1, count / comm_size[op.comm]);
        NCCL_CHECK(ncclReduceScatter(sendbuf, recvbuf, per, ncclFloat, ncclSum, c, stream));
        break;
      }
      case OpKind::kBroadcast:
        NCCL_CHECK(ncclBroadcast(sb, rb, count, op.dtype, op.root, c, stream));
        break;
      case OpKind::kSend:  // alone in its own group
        NCCL_CHECK(ncclGroupStart());
        NCCL_CHECK(ncclSend(sb, count, op.dtype, op.root, c, stream));
        NCCL_CHECK(ncclGroupEnd());
        break;
      case OpKind::kSendRecvRing: {
        int n = comm_size[op.comm], r = comm_rank[op.comm];
        NCCL_CHECK(ncclGroupStart());
        NCCL_CHECK(ncclSend(sendbuf, count, ncclFloat, (r + 1) % n, c, stream));
        NCCL_CHECK(ncclRecv(recvbuf, count, ncclFloat, (r + n - 1) % n, c, stream));
        NCCL_CHECK(ncclGroupEnd());
        break;
      }
    }
    WaitComm(op.comm);
  }

  // cudaStreamQuery polling instead of cudaStreamSynchronize: the main thread
  // stays responsive (parks once the watchdog fires) and keeps the watchdog
  // told which op the GPU is on.
  void WaitStep(int step, const std::vector<Op>& ops, const std::vector<cudaEvent_t>& done,
                const std::vector<bool>& issued) {
    size_t shown = size_t(-1);
    int sleep_us = 0;
    for (;;) {
      cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) CUDA_CHECK(e);
      if (wd.firing()) Park();
      size_t cur = ops.size();
      for (size_t i = 0; i < ops.size(); ++i) {
        if (!issued[i]) continue;
        cudaError_t q = cudaEventQuery(done[i]);
        if (q == cudaErrorNotReady) { cur = i; break; }
        if (q != cudaSuccess) CUDA_CHECK(q);
      }
      if (cur != shown && cur < ops.size()) {
        shown = cur;
        wd.SetWhere("step " + std::to_string(step) + ", GPU running " + Describe(ops[cur]));
      }
      if (sleep_us > 0) usleep(sleep_us);
      sleep_us = std::min(sleep_us * 2 + 10, 200);
    }
  }

  // host-stuck: no NCCL call of this rank is outstanding (the previous step
  // completed), so its watchdog, like a framework's, has nothing to time out.
  // The process stays alive (the plugin's heartbeat thread keeps going) until
  // the parent kills it, or an async error on a communicator fires the watchdog.
  [[noreturn]] void IdleForever(int step, const Op& next) {
    wd.Disarm();
    wd.SetWhere("host code (idle, no NCCL call outstanding)");
    Log("scenario %s: idling in host code from step %d on, before %s; no more NCCL calls",
        scen.name, step, Describe(next).c_str());
    for (;;) sleep(1);
  }

  void RunSteps() {
    const StepCtx base{rank,   nranks, 0, &opt, ResolveFaultRank(opt, scen), ResolveFaultStep(opt),
                       ResolveDelayMs(opt, scen), stream};
    std::vector<cudaEvent_t> done(5);
    for (cudaEvent_t& ev : done) CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    int64_t t_all = NowNs();
    for (int step = 0; step < opt.steps; ++step) {
      StepCtx ctx = base;
      ctx.step = step;
      std::vector<Op> ops = BuildStep(step, nranks, opt.max_bytes);
      if (scen.shape_step) scen.shape_step(ctx, &ops);
      std::vector<bool> issued(ops.size(), false);
      if (done.size() < ops.size()) {
        size_t old = done.size();
        done.resize(ops.size());
        for (size_t i = old; i < done.size(); ++i)
          CUDA_CHECK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
      }
      int64_t t0 = NowNs();
      wd.Arm("collective", opt.timeout_sec);
      for (size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        Verdict v = scen.before_op ? scen.before_op(ctx, op) : Verdict::kRun;
        if (v == Verdict::kSkip) continue;
        if (v == Verdict::kIdle) IdleForever(step, op);
        wd.SetWhere("step " + std::to_string(step) + ", enqueuing " + Describe(op));
        Issue(op);
        CUDA_CHECK(cudaEventRecord(done[i], stream));
        issued[i] = true;
        if (scen.after_enqueue) scen.after_enqueue(ctx, op);
      }
      WaitStep(step, ops, done, issued);
      wd.Disarm();
      if (opt.log_every > 0 && (step % opt.log_every == 0 || step + 1 == opt.steps))
        Log("step %d/%d done in %.2f ms (%zu ops, world all_reduce %s)", step + 1, opt.steps,
            SecSince(t0) * 1e3, ops.size(),
            HumanBytes(ops[std::max(0, IndexOf(ops, IsWorldAllReduce))].bytes).c_str());
    }
    Log("%d steps in %.2f s", opt.steps, SecSince(t_all));
    for (cudaEvent_t ev : done) CUDA_CHECK(cudaEventDestroy(ev));
  }

  void Teardown() {
    wd.Arm("teardown", opt.timeout_sec);
    const CommId order[] = {kDp, kTp, kWorld};
    for (CommId id : order) {
      wd.SetWhere(std::string("ncclCommFinalize(") + kCommNames[id] + ")");
      NCCL_CHECK(ncclCommFinalize(comms[id]));
      WaitComm(id);
    }
    wd.ReleaseComms();
    for (CommId id : order) {
      wd.SetWhere(std::string("ncclCommDestroy(") + kCommNames[id] + ")");
      NCCL_CHECK(ncclCommDestroy(comms[id]));
      comms[id] = nullptr;
    }
    wd.Disarm();
    wd.Stop();
    CUDA_CHECK(cudaFree(sendbuf));
    CUDA_CHECK(cudaFree(recvbuf));
    if (scratch_send) CUDA_CHECK(cudaFree(scratch_send));
    if (scratch_recv) CUDA_CHECK(cudaFree(scratch_recv));
    CUDA_CHECK(cudaStreamDestroy(stream));
    Log("communicators finalized and destroyed");
  }

  int Main(const ncclUniqueId& id) {
    g_watchdog = &wd;
    wd.Start();
    wd.Arm("init", opt.init_timeout_sec);
    Init(id);
    wd.Disarm();
    RunSteps();
    Teardown();
    g_watchdog = nullptr;
    return kExitOk;
  }
};

}  // namespace

int RunRank(const Options& o, const Scenario& s, int rank, const ncclUniqueId& id) {
  Child* child = new Child(o, s, rank);  // never freed: the process ends here
  return child->Main(id);
}

}  // namespace ncclwatch::scenarios

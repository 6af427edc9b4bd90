// Drives the built plugin .so through ncclProfiler_v1..v7 the way NCCL does
// (plugin/testing/fake_nccl_host.h) and checks the trace file it writes.

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "plugin/core/clock.h"
#include "plugin/abi/profiler_common.h"
#include "plugin/abi/profiler_net.h"
#include "plugin/abi/profiler_v1.h"
#include "plugin/abi/profiler_v2.h"
#include "plugin/abi/profiler_v4.h"
#include "plugin/abi/profiler_v5.h"
#include "plugin/abi/profiler_v6.h"
#include "plugin/abi/profiler_v7.h"
#include "plugin/testing/fake_nccl_host.h"
#include "proto/trace.pb.h"

namespace ncclwatch::testing {
namespace {

using trace::EventType;

std::vector<int> Kinds(const std::vector<const trace::EventState*>& v) {
  std::vector<int> out;
  for (auto* s : v) out.push_back(static_cast<int>(s->state()));
  return out;
}

// ------------------------------------------------------------ the scenario

struct CommPlan {
  uint64_t hash;
  const char* name;
  int nnodes, nranks, rank;
  std::vector<int> coll_peers;
  int send_peer, recv_peer;
};

const CommPlan kPlans[2] = {
    {0xA11CE00000000001ull, "commA", 2, 4, 1, {1, 2}, 2, 0},
    {0xB0B0000000000002ull, "commB", 1, 2, 0, {1}, 1, 1},
};

std::vector<OpSpec> OpsFor(int which) {
  const CommPlan& p = kPlans[which];
  std::vector<OpSpec> ops;
  OpSpec a;
  a.seq = 1;
  a.func = "AllReduce";
  a.datatype = "ncclFloat32";
  a.algo = "RING";
  a.proto = "SIMPLE";
  a.count = 1024 + which;
  a.root = 0;
  a.nchannels = 2;
  a.nwarps = 8;
  a.redop = 1 + which;
  a.traffic_bytes = 4096 * (which + 1);
  a.is_collnet = which == 0;
  a.is_nvls = which == 1;
  a.proxy_peers = p.coll_peers;
  a.nsteps = 3;
  a.step_bytes = 8192;
  a.ptimer0 = 5'000'000'000ull + which * 1'000'000ull;
  a.user_tag = 0xA11'0000ull + which;  // only v7 descriptors carry it
  ops.push_back(a);

  OpSpec b;
  b.seq = 2;
  b.func = "Broadcast";
  b.datatype = "ncclInt8";
  b.algo = "TREE";
  b.proto = "LL";
  b.count = 77;
  b.root = 1;
  b.nchannels = 1;
  b.nwarps = 4;
  b.proxy_peers = {p.coll_peers[0]};
  b.nsteps = 2;
  b.step_bytes = 100;
  b.ptimer0 = 6'000'000'000ull + which * 1'000'000ull;
  b.duration = 333;
  ops.push_back(b);

  for (int i = 0; i < 3; ++i) {
    OpSpec s;
    s.p2p = true;
    s.seq = 0;
    s.func = i < 2 ? "Send" : "Recv";
    s.peer = i < 2 ? p.send_peer : p.recv_peer;
    s.datatype = "ncclUint8";
    s.algo = nullptr;
    s.proto = nullptr;
    s.count = 10 + i;
    s.nchannels = 1;
    s.nwarps = 0;
    s.nsteps = 1;
    s.step_bytes = 10 + i;
    s.send_buff = nullptr;
    s.ptimer0 = 7'000'000'000ull + which * 1'000'000ull + i * 100'000;
    s.user_tag = i == 1 ? 0 : (uint64_t{1} << 62) + i;  // one untagged
    ops.push_back(s);
  }
  return ops;
}

uint32_t ExpectedProxyOps(const OpSpec& s) {
  return s.p2p ? s.nchannels : s.nchannels * s.proxy_peers.size() * 2;
}

// The header of a run with no NCCLWATCH_* variable but the directory: the defaults.
trace::ProcessHeader DefaultHeader() {
  static trace::ProcessHeader* h = [] {
    const std::string dir = MakeTempDir("defaults");
    SetPluginEnv({{"NCCLWATCH_DIR", dir}});
    FakeComm c(PluginLib::Shared(), 5);
    EXPECT_EQ(c.Init(0xDEF, "defaults", 1, 1, 0), 0);
    c.Finalize();
    auto t = ReadSingleTrace(dir);
    EXPECT_NE(t->header, nullptr);
    return new trace::ProcessHeader(t->header != nullptr ? *t->header : trace::ProcessHeader());
  }();
  return *h;
}

class AbiTest : public ::testing::TestWithParam<int> {};

TEST_P(AbiTest, EveryFieldArrives) {
  const int v = GetParam();
  const trace::ProcessHeader defaults = DefaultHeader();
  EXPECT_GT(defaults.buffer_bytes(), 0u);
  const std::string dir = MakeTempDir("abi-v" + std::to_string(v));
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_EVENTS", "all"}, {"NCCLWATCH_FLUSH_MS", "20"}});
  ClearLogs();
  PluginLib* lib = PluginLib::Shared();

  FakeComm comms[2] = {FakeComm(lib, v), FakeComm(lib, v)};
  for (int i = 0; i < 2; ++i) {
    const CommPlan& p = kPlans[i];
    ASSERT_EQ(comms[i].Init(p.hash, p.name, p.nnodes, p.nranks, p.rank), 0);
    ASSERT_NE(comms[i].context(), nullptr);
    // "all" hands NCCL every event type.
    EXPECT_EQ(comms[i].mask(), 0xffff);
  }
  std::vector<OpSpec> specs[2] = {OpsFor(0), OpsFor(1)};
  // v7: the Broadcast runs a symmetric-memory kernel.
  if (v >= 7)
    for (auto& s : specs) s[1].kernel_variant = "AGxLL_R";
  std::vector<OpResult> results[2];
  std::thread threads[2];
  for (int i = 0; i < 2; ++i) {
    threads[i] = std::thread([&, i] {
      for (const OpSpec& s : specs[i]) results[i].push_back(comms[i].RunOp(s));
      comms[i].RunProxyCtrl(5 + i);
      if (v >= 6) comms[i].RunCe(100 + i, 200 + i, 0xCE00 + i);
    });
  }
  for (auto& t : threads) t.join();
  for (auto& c : comms) EXPECT_EQ(c.Finalize(), 0);

  std::unique_ptr<Trace> t = ReadSingleTrace(dir);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->raw.issues.empty()) << ::testing::PrintToString(t->raw.issues);
  ASSERT_FALSE(t->raw.records.empty());

  // ---- header
  EXPECT_TRUE(t->header_first);
  ASSERT_NE(t->header, nullptr);
  const trace::ProcessHeader& h = *t->header;
  EXPECT_EQ(h.schema_version(), 1u);
  EXPECT_EQ(h.profiler_api_version(), static_cast<uint32_t>(v));
  EXPECT_EQ(h.pid(), getpid());
  EXPECT_FALSE(h.hostname().empty());
  EXPECT_FALSE(h.plugin_version().empty());
  EXPECT_GT(h.mono_base_ns(), 0u);
  EXPECT_GT(h.realtime_base_ns(), 0u);
  EXPECT_EQ(h.event_mask(), 0xffffu);
  EXPECT_EQ(h.events_config(), "all");
  EXPECT_EQ(h.flush_ms(), 20u);
  EXPECT_EQ(h.heartbeat_ms(), defaults.heartbeat_ms());
  EXPECT_EQ(h.stuck_sec(), defaults.stuck_sec());
  EXPECT_EQ(h.buffer_bytes(), defaults.buffer_bytes());
  // Which NCCL loaded the plugin: the process's ncclGetVersion (the fake
  // host's reports 2.28.9); the CUDA driver's only where one is loaded.
  EXPECT_EQ(h.nccl_version(), "2.28.9");
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (cuda == nullptr) EXPECT_EQ(h.cuda_driver_version(), 0);
  else EXPECT_GT(h.cuda_driver_version(), 0);
  if (cuda != nullptr) dlclose(cuda);
  // The clock: the kernel's clocksource is a fact of this machine; the cost of
  // clock_gettime is a measurement of this process, and the choice must be
  // the one its own facts give (never compared with another process's).
  const plugin::ClockFacts here = plugin::ReadClockFacts();
  EXPECT_EQ(h.kernel_clocksource(), here.clocksource);
  EXPECT_GT(h.clock_gettime_ns(), 0.0);
  EXPECT_LT(h.clock_gettime_ns(), 1e6);
  plugin::ClockFacts recorded = here;
  recorded.gettime_ns = h.clock_gettime_ns();
  const plugin::TickChoice choice = plugin::ChooseTicks(plugin::ClockMode::kAuto, recorded);
  EXPECT_EQ(h.clock_source(), choice.why);
  EXPECT_EQ(h.tick_clock(), choice.tsc ? trace::TICK_CLOCK_TSC : trace::TICK_CLOCK_MONOTONIC);
  if (v >= 4) {  // NCCL hands a logger from v4 on: the info line names the clock
    bool named = false;
    for (const LogLine& l : Logs()) named |= l.text.find("clock " + h.clock_source()) != std::string::npos;
    EXPECT_TRUE(named) << ::testing::PrintToString(Logs().size());
    // The closing line: what the file holds, nothing dropped.
    int closing = 0;
    const std::string want = ": " + std::to_string(t->raw.records.size()) + " records, ";
    for (const LogLine& l : Logs())
      closing += l.level == nccl::kLogInfo && l.text.find("closed ") != std::string::npos &&
                 l.text.find(want) != std::string::npos && l.text.find("dropped 0 events") != std::string::npos;
    EXPECT_EQ(closing, 1) << want;
  }
  // Only the info line: no warnings.
  EXPECT_TRUE(Warnings().empty()) << ::testing::PrintToString(Warnings());

  // ---- communicators
  std::map<uint64_t, uint32_t> comm_of_hash;
  for (const trace::CommInit* ci : t->comm_inits) {
    if (ci->comm_hash() == 0) continue;
    EXPECT_EQ(comm_of_hash.count(ci->comm_hash()), 0u) << "hash announced twice";
    comm_of_hash[ci->comm_hash()] = ci->comm();
  }
  ASSERT_EQ(comm_of_hash.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const CommPlan& p = kPlans[i];
    ASSERT_EQ(comm_of_hash.count(p.hash), 1u) << p.name;
    const trace::CommInit* ci = nullptr;
    for (auto* c : t->comm_inits)
      if (c->comm_hash() == p.hash) ci = c;
    ASSERT_NE(ci, nullptr);
    EXPECT_NE(ci->comm(), 0u);
    if (v >= 4) {
      EXPECT_FALSE(ci->from_event());
      EXPECT_EQ(ci->name(), p.name);
      EXPECT_EQ(ci->nranks(), p.nranks);
      EXPECT_EQ(ci->nnodes(), p.nnodes);
      EXPECT_EQ(ci->rank(), p.rank);
    } else {
      // v1..v3: NCCL says nothing at init; the hash comes with the first event.
      EXPECT_TRUE(ci->from_event());
      EXPECT_EQ(ci->nranks(), 0);
    }
  }
  EXPECT_EQ(t->comm_inits.size(), v >= 4 ? 2u : 4u);

  // ---- ops
  std::map<uint32_t, std::vector<const OpView*>> ops_of_comm;
  for (const OpView& o : t->ops) ops_of_comm[o.op->comm()].push_back(&o);
  std::set<uint64_t> ids;
  for (const OpView& o : t->ops) EXPECT_TRUE(ids.insert(o.op->event_id()).second) << "event id reused";
  EXPECT_TRUE(t->orphan_done.empty());
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(kPlans[i].name);
    const uint32_t comm = comm_of_hash[kPlans[i].hash];
    const auto& ops = ops_of_comm[comm];
    ASSERT_EQ(ops.size(), specs[i].size());
    int sends = 0;
    for (size_t k = 0; k < ops.size(); ++k) {
      SCOPED_TRACE("op " + std::to_string(k));
      const OpView& view = *ops[k];
      const trace::Op& op = *view.op;
      const OpSpec& s = specs[i][k];
      const OpResult& r = results[i][k];
      EXPECT_NE(op.event_id(), 0u);
      EXPECT_EQ(op.kind(), s.p2p ? trace::OP_KIND_P2P : trace::OP_KIND_COLL);
      EXPECT_EQ(op.seq(), s.seq);
      EXPECT_EQ(t->Str(op.func()), s.func);
      EXPECT_EQ(t->Str(op.datatype()), s.datatype);
      EXPECT_EQ(op.count(), s.count);
      EXPECT_EQ(op.user_tag(), v >= 7 ? s.user_tag : 0u);
      EXPECT_EQ(op.is_sym_coll(), v >= 7 && s.kernel_variant != nullptr);
      if (s.p2p) {
        EXPECT_EQ(op.peer(), s.peer);
        EXPECT_EQ(op.algo(), 0u);
        EXPECT_EQ(op.proto(), 0u);
        EXPECT_EQ(op.nwarps(), 0u);
        EXPECT_EQ(op.nchannels(), v >= 4 ? s.nchannels : 0u);
        EXPECT_EQ(op.send_buff(), 0u);
        EXPECT_EQ(op.recv_buff(), reinterpret_cast<uint64_t>(s.recv_buff));
        int expect_seq = 0;
        if (std::string(s.func) == "Send") expect_seq = ++sends;
        else expect_seq = 1;
        if (v >= 4) {
          EXPECT_EQ(op.p2p_seq(), static_cast<uint64_t>(expect_seq));
        }
      } else {
        EXPECT_EQ(op.root(), s.root);
        if (s.kernel_variant != nullptr) {
          // NCCL 2.31 passes the variant's tail as the algorithm and "" as
          // the protocol; the record keeps the variant instead.
          EXPECT_EQ(t->Str(op.kernel_variant()), s.kernel_variant);
          EXPECT_EQ(t->Str(op.algo()), "R");
          EXPECT_EQ(op.proto(), 0u);
        } else {
          EXPECT_EQ(op.kernel_variant(), 0u);
          EXPECT_EQ(t->Str(op.algo()), s.algo);
          EXPECT_EQ(t->Str(op.proto()), s.proto);
        }
        EXPECT_EQ(op.nchannels(), s.nchannels);
        EXPECT_EQ(op.nwarps(), s.nwarps);
        EXPECT_EQ(op.send_buff(), reinterpret_cast<uint64_t>(s.send_buff));
        EXPECT_EQ(op.recv_buff(), reinterpret_cast<uint64_t>(s.recv_buff));
        EXPECT_EQ(op.traffic_bytes(), v <= 2 ? s.traffic_bytes : 0u);
        EXPECT_EQ(op.op(), v == 1 ? s.redop : 0u);
        EXPECT_EQ(op.is_collnet(), v == 1 && s.is_collnet);
        EXPECT_EQ(op.is_nvls(), v == 1 && s.is_nvls);
      }
      EXPECT_GT(op.start_ns(), 0u);
      // Tracked: said by the flag, or by a completion folded in.
      EXPECT_EQ(op.completion_tracked() || view.folded, v >= 4);
      // Parent: the Group (v1..v4) or the CollApi/P2pApi (v5+) event.
      ASSERT_NE(op.parent_id(), 0u);
      ASSERT_EQ(t->start_by_id.count(op.parent_id()), 1u);
      const trace::EventStart& parent = *t->start_by_id[op.parent_id()];
      if (v >= 5) {
        EXPECT_EQ(parent.type(), s.p2p ? trace::P2P_API : trace::COLL_API);
        if (s.p2p) {
          ASSERT_TRUE(parent.has_p2p_api());
          EXPECT_EQ(t->Str(parent.p2p_api().func()), s.func);
          EXPECT_EQ(parent.p2p_api().count(), s.count);
          EXPECT_EQ(t->Str(parent.p2p_api().datatype()), s.datatype);
          EXPECT_EQ(parent.p2p_api().stream(), reinterpret_cast<uint64_t>(s.stream));
          EXPECT_FALSE(parent.p2p_api().graph_captured());
          EXPECT_EQ(parent.p2p_api().user_tag(), v >= 7 ? s.user_tag : 0u);
        } else {
          ASSERT_TRUE(parent.has_coll_api());
          EXPECT_EQ(t->Str(parent.coll_api().func()), s.func);
          EXPECT_EQ(parent.coll_api().count(), s.count);
          EXPECT_EQ(t->Str(parent.coll_api().datatype()), s.datatype);
          EXPECT_EQ(parent.coll_api().root(), s.root);
          EXPECT_EQ(parent.coll_api().stream(), reinterpret_cast<uint64_t>(s.stream));
          EXPECT_FALSE(parent.coll_api().graph_captured());
          EXPECT_EQ(parent.coll_api().user_tag(), v >= 7 ? s.user_tag : 0u);
        }
        // ... whose parent is the GroupApi, with its two states and a KernelLaunch.
        ASSERT_EQ(t->start_by_id.count(parent.parent_id()), 1u);
        const trace::EventStart& gapi = *t->start_by_id[parent.parent_id()];
        EXPECT_EQ(gapi.type(), trace::GROUP_API);
        ASSERT_TRUE(gapi.has_group_api());
        EXPECT_EQ(gapi.group_api().group_depth(), 1);
        EXPECT_EQ(Kinds(t->states_by_id[gapi.event_id()]),
                  (std::vector<int>{nccl::kGroupStartApiStop, nccl::kGroupEndApiStart}));
        auto launches = t->Children(gapi.event_id(), trace::KERNEL_LAUNCH);
        ASSERT_EQ(launches.size(), 1u);
        ASSERT_TRUE(launches[0]->has_kernel_launch());
        EXPECT_EQ(launches[0]->kernel_launch().stream(), reinterpret_cast<uint64_t>(s.stream));
        // NCCL starts the plan's Group after the launch, with no parent.
        EXPECT_TRUE(t->Children(gapi.event_id(), trace::GROUP).empty());
      } else {
        EXPECT_EQ(parent.type(), trace::GROUP);
      }

      // Completion (v4+): exact pTimers, channels, proxy operations and bytes.
      if (v >= 4) {
        ASSERT_EQ(view.done_count, 1) << "completion seen once";
        const trace::OpDone& d = view.done;
        EXPECT_TRUE(view.has_gpu);
        EXPECT_EQ(view.gpu_start, r.gpu_start);
        EXPECT_EQ(view.gpu_stop, r.gpu_stop);
        EXPECT_EQ(d.gpu_duration_ns(), r.gpu_stop - r.gpu_start);
        EXPECT_EQ(d.kernel_channels(), s.nchannels);
        EXPECT_EQ(d.proxy_ops(), ExpectedProxyOps(s));
        EXPECT_EQ(r.proxy_ops, ExpectedProxyOps(s));
        EXPECT_EQ(d.proxy_bytes(), r.proxy_bytes);
        EXPECT_EQ(d.proxy_bytes(), uint64_t{ExpectedProxyOps(s)} * s.nsteps * s.step_bytes);
        EXPECT_GE(view.done_ns, op.start_ns());
      } else {
        EXPECT_EQ(view.done_count, 0) << "no completion before v4";
      }

      // Raw kernel channels (v3+).
      auto kcs = t->Children(op.event_id(), trace::KERNEL_CH);
      if (v >= 3) {
        ASSERT_EQ(kcs.size(), s.nchannels);
        for (const trace::EventStart* kc : kcs) {
          ASSERT_TRUE(kc->has_kernel_ch());
          const uint32_t c = kc->kernel_ch().channel();
          EXPECT_LT(c, s.nchannels);
          EXPECT_EQ(kc->comm(), comm);
          ASSERT_EQ(t->stop_by_id.count(kc->event_id()), 1u);
          if (v >= 4) {
            EXPECT_TRUE(kc->kernel_ch().has_gpu_start());
            EXPECT_EQ(t->ev_gpu_start[kc->event_id()], s.ptimer0 + s.start_step * c);
            EXPECT_EQ(t->ev_gpu_stop[kc->event_id()], s.ptimer0 + s.duration + s.stop_step * c);
            EXPECT_EQ(t->state_gpu[kc->event_id()], s.ptimer0 + s.duration + s.stop_step * c);
            EXPECT_EQ(Kinds(t->states_by_id[kc->event_id()]), std::vector<int>{nccl::kKernelChStop});
          } else {
            EXPECT_FALSE(kc->kernel_ch().has_gpu_start());
            EXPECT_FALSE(t->stop_by_id[kc->event_id()]->has_gpu_stop());
          }
          // v7: its three phases, each with its GPU start and stop, on NCCL's
          // profiler thread (not the thread that issued the op).
          auto phases = t->Children(kc->event_id(), trace::KERNEL_PHASE);
          if (v >= 7) {
            EXPECT_NE(kc->tid(), parent.tid());
            ASSERT_EQ(phases.size(), 3u);
            const uint64_t start = s.ptimer0 + s.start_step * c;
            const uint64_t bounds[4] = {start, start + s.phase_ends[0], start + s.phase_ends[1],
                                        s.ptimer0 + s.duration + s.stop_step * c};
            std::set<int> seen;
            for (const trace::EventStart* ph : phases) {
              ASSERT_TRUE(ph->has_kernel_phase());
              const int k = ph->kernel_phase().phase();
              ASSERT_TRUE(k >= 0 && k < 3) << k;
              EXPECT_TRUE(seen.insert(k).second);
              EXPECT_EQ(ph->kernel_phase().channel(), c);
              EXPECT_EQ(ph->tid(), kc->tid());
              EXPECT_EQ(t->ev_gpu_start[ph->event_id()], bounds[k]);
              EXPECT_EQ(t->state_gpu[ph->event_id()], bounds[k + 1]);
              EXPECT_EQ(t->ev_gpu_stop[ph->event_id()], bounds[k + 1]);
              EXPECT_EQ(Kinds(t->states_by_id[ph->event_id()]), std::vector<int>{nccl::kKernelPhaseStop});
            }
          } else {
            EXPECT_TRUE(phases.empty());
          }
        }
      } else {
        EXPECT_TRUE(kcs.empty());
      }

      // Raw proxy operations, their steps and (v4+) network events.
      auto pxs = t->Children(op.event_id(), trace::PROXY_OP);
      ASSERT_EQ(pxs.size(), ExpectedProxyOps(s));
      std::multiset<std::tuple<uint32_t, int, bool>> want_px, got_px;
      for (int c = 0; c < s.nchannels; ++c) {
        if (s.p2p) want_px.insert({c, s.peer, std::string(s.func) == "Send"});
        else
          for (int peer : s.proxy_peers) {
            want_px.insert({c, peer, true});
            want_px.insert({c, peer, false});
          }
      }
      for (const trace::EventStart* px : pxs) {
        ASSERT_TRUE(px->has_proxy_op());
        const trace::ProxyOpDetail& pd = px->proxy_op();
        got_px.insert({pd.channel(), pd.peer(), pd.is_send()});
        EXPECT_EQ(pd.pid(), getpid());
        EXPECT_EQ(pd.nsteps(), s.nsteps);
        EXPECT_EQ(pd.chunk_size(), s.chunk_size);
        EXPECT_EQ(pd.op_id(), op.event_id());
        EXPECT_EQ(px->nccl_rank(), kPlans[i].rank);  // the descriptor's originating rank
        EXPECT_EQ(px->comm(), comm);
        EXPECT_NE(px->tid(), 0u);
        EXPECT_EQ(t->stop_by_id.count(px->event_id()), 1u);
        const auto& pst = t->states_by_id[px->event_id()];
        if (v <= 3) {
          std::vector<int> want = pd.is_send() ? std::vector<int>{nccl::kProxyOpSendPosted, nccl::kProxyOpSendRemFifoWait,
                                                                  nccl::kProxyOpSendTransmitted, nccl::kProxyOpSendDone}
                                               : std::vector<int>{nccl::kProxyOpRecvPosted, nccl::kProxyOpRecvReceived,
                                                                  nccl::kProxyOpRecvTransmitted, nccl::kProxyOpRecvDone};
          ASSERT_EQ(Kinds(pst), want);
          EXPECT_EQ(pst[2]->trans_size(), s.step_bytes);
          EXPECT_EQ(pst[2]->steps(), s.nsteps);
          EXPECT_EQ(pst[3]->trans_size(), s.step_bytes * s.nsteps);
          EXPECT_EQ(pst[3]->steps(), s.nsteps);
        } else {
          EXPECT_EQ(Kinds(pst), std::vector<int>{nccl::kProxyOpInProgress});
        }
        auto steps = t->Children(px->event_id(), trace::PROXY_STEP);
        ASSERT_EQ(steps.size(), static_cast<size_t>(s.nsteps));
        for (int k2 = 0; k2 < s.nsteps; ++k2) {
          const trace::EventStart& st = *steps[k2];
          ASSERT_TRUE(st.has_proxy_step());
          EXPECT_EQ(st.proxy_step().step(), k2);
          EXPECT_EQ(t->stop_by_id.count(st.event_id()), 1u);
          std::vector<int> want;
          if (pd.is_send()) {
            want.push_back(nccl::kProxyStepSendGPUWait);
            if (v >= 4) want.push_back(nccl::kProxyStepSendPeerWait);
            want.push_back(nccl::kProxyStepSendWait);
          } else {
            want = {nccl::kProxyStepRecvWait, nccl::kProxyStepRecvFlushWait, nccl::kProxyStepRecvGPUWait};
          }
          const auto& sst = t->states_by_id[st.event_id()];
          EXPECT_EQ(Kinds(sst), want);
          for (auto* x : sst) EXPECT_EQ(x->trans_size(), v >= 4 ? s.step_bytes : 0u);
          auto nets = t->Children(st.event_id(), trace::NET_PLUGIN);
          if (v < 4) {
            EXPECT_TRUE(nets.empty());
            continue;
          }
          ASSERT_EQ(nets.size(), 2u);
          for (const trace::EventStart* n : nets) {
            ASSERT_TRUE(n->has_net_plugin());
            EXPECT_EQ(t->stop_by_id.count(n->event_id()), 1u);
            const trace::NetPluginDetail& nd = n->net_plugin();
            if (nd.has_ib_qp()) {
              EXPECT_EQ(nd.id(), nccl::kNetTypeIb | 1);
              EXPECT_EQ(nd.ib_qp().type(), 1u);
              EXPECT_EQ(nd.ib_qp().device(), 3);
              EXPECT_EQ(nd.ib_qp().wr_id(), 0xabc000u + k2);
              EXPECT_EQ(nd.ib_qp().opcode(), pd.is_send() ? 2 : 4);
              EXPECT_EQ(nd.ib_qp().qp_num(), 77 + static_cast<int>(pd.channel()));
              EXPECT_EQ(nd.ib_qp().length(), s.step_bytes);
              const auto& ns = t->states_by_id[n->event_id()];
              ASSERT_EQ(Kinds(ns), std::vector<int>{nccl::kNetPluginUpdate});
              EXPECT_NE(ns[0]->net_data(), 0u);
            } else {
              ASSERT_TRUE(nd.has_socket());
              EXPECT_EQ(nd.id(), nccl::kNetTypeSocket | 1);
              EXPECT_EQ(nd.socket().type(), 1u);
              EXPECT_EQ(nd.socket().fd(), 40 + static_cast<int>(pd.channel()));
              EXPECT_EQ(nd.socket().op(), pd.is_send() ? 1 : 0);
              EXPECT_EQ(nd.socket().length(), s.step_bytes / 2);
            }
          }
        }
      }
      EXPECT_EQ(got_px, want_px);
    }
  }

  // ---- ProxyCtrl
  std::vector<const trace::EventStart*> ctrls;
  for (auto* s : t->starts)
    if (s->type() == trace::PROXY_CTRL) ctrls.push_back(s);
  // Four short events per RunProxyCtrl, as NCCL's proxy loop makes them.
  ASSERT_EQ(ctrls.size(), 8u);
  std::multiset<std::vector<int>> shapes;
  std::set<int> appended;
  for (auto* c : ctrls) {
    const auto& st = t->states_by_id[c->event_id()];
    shapes.insert(Kinds(st));
    if (Kinds(st) == std::vector<int>{nccl::kProxyCtrlAppend, nccl::kProxyCtrlAppendEnd}) {
      EXPECT_EQ(st[0]->appended_proxy_ops(), 0);
      appended.insert(st[1]->appended_proxy_ops());
    }
    EXPECT_EQ(t->stop_by_id.count(c->event_id()), 1u);
  }
  for (const std::vector<int>& shape : std::vector<std::vector<int>>{
           {nccl::kProxyCtrlSleep, nccl::kProxyCtrlWakeup},
           {nccl::kProxyCtrlAppend, nccl::kProxyCtrlAppendEnd},
           {nccl::kProxyCtrlActive},
           {nccl::kProxyCtrlIdle}}) {
    EXPECT_EQ(shapes.count(shape), 2u);
  }
  EXPECT_EQ(appended, (std::set<int>{5, 6}));

  // ---- CE events (v6)
  std::vector<const trace::EventStart*> ces;
  for (auto* s : t->starts)
    if (s->type() == trace::CE_COLL) ces.push_back(s);
  if (v >= 6) {
    ASSERT_EQ(ces.size(), 2u);
    std::set<uint64_t> seqs;
    for (auto* c : ces) {
      ASSERT_TRUE(c->has_ce_coll());
      const trace::CeCollDetail& d = c->ce_coll();
      const int which = static_cast<int>(d.seq() - 100);
      ASSERT_TRUE(which == 0 || which == 1);
      seqs.insert(d.seq());
      EXPECT_EQ(c->comm(), comm_of_hash[kPlans[which].hash]);
      EXPECT_EQ(t->Str(d.func()), "AllGather");
      EXPECT_EQ(d.send_buff(), 0x7f00000a0000u);
      EXPECT_EQ(d.recv_buff(), 0x7f00000b0000u);
      EXPECT_EQ(d.count(), 65536u);
      EXPECT_EQ(d.root(), 3);
      EXPECT_EQ(t->Str(d.datatype()), "ncclBfloat16");
      EXPECT_EQ(t->Str(d.sync_strategy()), "barrier");
      EXPECT_TRUE(d.intra_batch_sync());
      EXPECT_EQ(d.batch_size(), 4u);
      EXPECT_EQ(d.num_batches(), 5u);
      EXPECT_EQ(d.ce_seq(), 200u + which);
      EXPECT_EQ(d.stream(), 0x6000u);
      EXPECT_EQ(d.user_tag(), v >= 7 ? 0xCE00u + which : 0u);
      EXPECT_EQ(t->start_by_id[c->parent_id()]->coll_api().user_tag(), v >= 7 ? 0xCE00u + which : 0u);
      // No states on CE events (NCCL records none); the parent is the CollApi.
      EXPECT_TRUE(t->states_by_id[c->event_id()].empty());
      ASSERT_NE(t->start_by_id.count(c->parent_id()), 0u);
      EXPECT_EQ(t->start_by_id[c->parent_id()]->type(), trace::COLL_API);
      auto syncs = t->Children(c->event_id(), trace::CE_SYNC);
      ASSERT_EQ(syncs.size(), 2u);
      ASSERT_TRUE(syncs[0]->has_ce_sync());
      EXPECT_TRUE(syncs[0]->ce_sync().is_complete());
      EXPECT_FALSE(syncs[1]->ce_sync().is_complete());
      EXPECT_EQ(syncs[0]->ce_sync().nranks(), 8);
      EXPECT_TRUE(t->states_by_id[syncs[0]->event_id()].empty());
      auto batches = t->Children(c->event_id(), trace::CE_BATCH);
      ASSERT_EQ(batches.size(), 1u);
      ASSERT_TRUE(batches[0]->has_ce_batch());
      EXPECT_EQ(batches[0]->ce_batch().num_ops(), 3);
      EXPECT_EQ(batches[0]->ce_batch().total_bytes(), 1u << 20);
      EXPECT_TRUE(batches[0]->ce_batch().use_intra_sync());
      EXPECT_TRUE(t->states_by_id[batches[0]->event_id()].empty());
      EXPECT_EQ(t->stop_by_id.count(c->event_id()), 1u);
    }
    EXPECT_EQ(seqs.size(), 2u);
  } else {
    EXPECT_TRUE(ces.empty());
  }

  // ---- every raw event stopped, nothing undefined, no drops
  for (auto* s : t->starts) {
    EXPECT_EQ(t->stop_by_id.count(s->event_id()), 1u) << "event " << s->event_id() << " type " << s->type();
    EXPECT_NE(s->type(), trace::COLL) << "Coll events are Op records";
    EXPECT_NE(s->type(), trace::P2P) << "P2p events are Op records";
  }
  // v4+: at least one GpuClock (re-anchored when a tighter GPU/CPU pair is
  // seen; every GPU time above still decodes exactly); none before v4.
  if (v >= 4) EXPECT_GE(t->gpu_clocks, 1);
  else EXPECT_EQ(t->gpu_clocks, 0);
  EXPECT_TRUE(t->drops.empty()) << t->drops[0]->DebugString();

  // ---- finalize
  ASSERT_EQ(t->comm_finalizes.size(), 2u);
  for (const trace::CommFinalize* f : t->comm_finalizes) {
    EXPECT_EQ(f->ops_enqueued(), 5u);
    EXPECT_EQ(f->ops_completed(), v >= 4 ? 5u : 0u);
  }
  ASSERT_EQ(t->finalizes.size(), 1u);
  EXPECT_TRUE(t->finalizes[0]->clean());
  EXPECT_TRUE(t->raw.records.back().has_finalize());
}

INSTANTIATE_TEST_SUITE_P(AllVersions, AbiTest, ::testing::Range(1, 8),
                         [](const ::testing::TestParamInfo<int>& i) { return "v" + std::to_string(i.param); });

// ------------------------------------------------------------ the default capture

// Default events (Coll|P2p|KernelCh): Op records with completion, no raw events.
TEST(DefaultCapture, OpsWithCompletionOnly) {
  const std::string dir = MakeTempDir("default");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}});
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0x5151, "d", 1, 2, 0), 0);
  EXPECT_EQ(c.mask(), nccl::kColl | nccl::kP2p | nccl::kKernelCh);
  OpSpec s;
  s.proxy_peers = {1};
  OpResult r = c.RunOp(s);
  c.RunProxyCtrl(1);
  ASSERT_EQ(c.Finalize(), 0);
  auto t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->starts.empty());
  EXPECT_TRUE(t->states_by_id.empty());
  ASSERT_EQ(t->ops.size(), 1u);
  const OpView& view = t->ops[0];
  const trace::Op& op = *view.op;
  EXPECT_EQ(op.parent_id(), 0u);  // the CollApi was not captured
  EXPECT_EQ(op.send_buff(), 0u);  // buffers only with full capture
  EXPECT_EQ(op.recv_buff(), 0u);
  EXPECT_EQ(op.seq(), s.seq);
  EXPECT_EQ(t->Str(op.func()), s.func);
  ASSERT_EQ(view.done_count, 1);
  EXPECT_EQ(view.gpu_start, r.gpu_start);
  EXPECT_EQ(view.gpu_stop, r.gpu_stop);
  EXPECT_EQ(view.done.kernel_channels(), s.nchannels);
  EXPECT_EQ(view.done.proxy_ops(), 4u);
  // ProxyStep capture is off, but steps under a tracked ProxyOp still count bytes.
  EXPECT_EQ(view.done.proxy_bytes(), r.proxy_bytes);
}

// v4+: Coll and P2p go from NCCL's descriptor to the Op record without an
// EventDesc (exports.cc CopyOpV4). At the default capture every field the
// full capture writes (EveryFieldArrives) is there, buffers and parent aside.
class DefaultCaptureOps : public ::testing::TestWithParam<int> {};

TEST_P(DefaultCaptureOps, EveryOpFieldArrives) {
  const int v = GetParam();
  const std::string dir = MakeTempDir("default-ops-v" + std::to_string(v));
  SetPluginEnv({{"NCCLWATCH_DIR", dir}});
  FakeComm c(PluginLib::Shared(), v);
  const CommPlan& p = kPlans[0];
  ASSERT_EQ(c.Init(p.hash, p.name, p.nnodes, p.nranks, p.rank), 0);
  std::vector<OpSpec> specs = OpsFor(0);
  if (v >= 7) specs[1].kernel_variant = "AGxLL_R";
  for (const OpSpec& s : specs) c.RunOp(s);
  ASSERT_EQ(c.Finalize(), 0);
  auto t = ReadSingleTrace(dir);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->starts.empty());
  EXPECT_TRUE(t->drops.empty());
  ASSERT_EQ(t->ops.size(), specs.size());
  int sends = 0;
  for (size_t k = 0; k < specs.size(); ++k) {
    SCOPED_TRACE("op " + std::to_string(k));
    const OpView& view = t->ops[k];
    const trace::Op& op = *view.op;
    const OpSpec& s = specs[k];
    EXPECT_EQ(op.kind(), s.p2p ? trace::OP_KIND_P2P : trace::OP_KIND_COLL);
    EXPECT_EQ(op.seq(), s.seq);
    EXPECT_EQ(t->Str(op.func()), s.func);
    EXPECT_EQ(t->Str(op.datatype()), s.datatype);
    EXPECT_EQ(op.count(), s.count);
    EXPECT_EQ(op.user_tag(), v >= 7 ? s.user_tag : 0u);
    EXPECT_EQ(op.is_sym_coll(), v >= 7 && s.kernel_variant != nullptr);
    EXPECT_EQ(op.nchannels(), s.nchannels);
    EXPECT_EQ(op.nwarps(), s.p2p ? 0u : s.nwarps);
    EXPECT_EQ(op.send_buff(), 0u);  // buffers only with full capture
    EXPECT_EQ(op.recv_buff(), 0u);
    EXPECT_EQ(op.parent_id(), 0u);  // the parent was not captured
    EXPECT_EQ(op.traffic_bytes(), 0u);
    EXPECT_EQ(op.op(), 0u);
    EXPECT_FALSE(op.is_collnet());
    EXPECT_FALSE(op.is_nvls());
    if (v >= 7) {
      // No libcuda here, and on NCCL 2.31+ kernel channels cost up to 10%
      // (NVIDIA/nccl#2355): the default asks for none, so nothing completes.
      EXPECT_FALSE(op.completion_tracked());
      EXPECT_EQ(view.done_count, 0);
    } else {
      EXPECT_TRUE(op.completion_tracked() || view.folded);
      EXPECT_EQ(view.done_count, 1);
    }
    if (s.p2p) {
      EXPECT_EQ(op.peer(), s.peer);
      EXPECT_EQ(op.algo(), 0u);
      EXPECT_EQ(op.proto(), 0u);
      const uint64_t expect_seq = std::string(s.func) == "Send" ? ++sends : 1;
      EXPECT_EQ(op.p2p_seq(), expect_seq);
    } else {
      EXPECT_EQ(op.root(), s.root);
      if (v >= 7 && s.kernel_variant != nullptr) {
        EXPECT_EQ(t->Str(op.kernel_variant()), s.kernel_variant);
        EXPECT_EQ(op.proto(), 0u);
      } else {
        EXPECT_EQ(op.kernel_variant(), 0u);
        EXPECT_EQ(t->Str(op.algo()), s.algo);
        EXPECT_EQ(t->Str(op.proto()), s.proto);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(V4ToV7, DefaultCaptureOps, ::testing::Range(4, 8),
                         [](const ::testing::TestParamInfo<int>& i) { return "v" + std::to_string(i.param); });

// NCCL 2.31 (v7): the call's tag and a symmetric kernel reach the Op record
// at the default capture. KernelPhase is not asked for, but NCCL may report
// it all the same (RAS can set the mask of a whole job, profiler.cc
// ncclProfilerSetRasOverride): each phase gets a null handle, so NCCL makes
// no state or stop call for it, and nothing is counted against the op.
TEST(KernelPhase, NotAskedForGetsNullHandles) {
  const std::string dir = MakeTempDir("phase_default");
  // Channels give the op its completion here, without libcuda; they do not
  // ask for phases (ChannelsDoNotAskForThem).
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_COMPLETIONS", "channels"}});
  FakeComm c(PluginLib::Shared(), 7);
  ASSERT_EQ(c.Init(0x7070, "v7", 1, 2, 0), 0);
  EXPECT_EQ(c.mask() & nccl::kKernelPhase, 0);
  SetNcclEventMask(c.mask() | nccl::kKernelPhase);  // as a RAS override would
  OpSpec s;
  s.user_tag = 0x7a6;
  s.kernel_variant = "AGxLL_R";
  OpResult r = c.RunOp(s);
  Ev kc;  // and one phase under a kernel channel handle of the op, by hand
  kc.type = nccl::kKernelCh;
  kc.parent = r.handle;
  Ev ph;
  ph.type = nccl::kKernelPhase;
  ph.parent = c.Start(kc);
  EXPECT_NE(ph.parent, nullptr);
  EXPECT_EQ(c.Start(ph), nullptr);
  ASSERT_EQ(c.Finalize(), 0);
  auto t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty());
  EXPECT_TRUE(t->starts.empty());
  ASSERT_EQ(t->ops.size(), 1u);
  const trace::Op& op = *t->ops[0].op;
  EXPECT_EQ(op.user_tag(), 0x7a6u);
  EXPECT_TRUE(op.is_sym_coll());
  EXPECT_EQ(t->Str(op.kernel_variant()), "AGxLL_R");
  EXPECT_EQ(t->ops[0].done_count, 1);
  EXPECT_EQ(t->ops[0].gpu_stop, r.gpu_stop);
  // Nothing dropped, no parent refused (a Drops record would say so).
  EXPECT_EQ(t->LastDrops(), nullptr) << t->LastDrops()->ShortDebugString();
}

// Kernel channels chosen on v7 do not bring their phases along: NCCL 2.31
// reports a channel's phases only once the channel has completed (read in
// profilerProgressOps: they fire just before its KernelChStop), so a hung
// kernel reports none and they cannot say where it waits. Asked for, each
// channel of each op costs NCCL's profiler thread three more starts, states
// and stops, and the ring nine records. Only a name in NCCLWATCH_EVENTS
// asks for them.
TEST(KernelPhase, ChannelsDoNotAskForThem) {
  const std::vector<std::map<std::string, std::string>> envs = {
      {{"NCCLWATCH_COMPLETIONS", "channels"}},
      {{"NCCLWATCH_EVENTS", "default,kernelch"}},
      {{"NCCLWATCH_EVENTS", "all"}},
      {{"NCCLWATCH_EVENTS", "default,kernelphase"}, {"NCCLWATCH_COMPLETIONS", "channels"}},
  };
  const bool asked[] = {false, false, true, true};  // "all" names it
  for (size_t i = 0; i < envs.size(); ++i) {
    const std::string dir = MakeTempDir("phase_mask");
    auto env = envs[i];
    env["NCCLWATCH_DIR"] = dir;
    SetPluginEnv(env);
    FakeComm c(PluginLib::Shared(), 7);
    ASSERT_EQ(c.Init(0x7272 + i, "v7", 1, 2, 0), 0);
    EXPECT_NE(c.mask() & nccl::kKernelCh, 0) << i;
    EXPECT_EQ((c.mask() & nccl::kKernelPhase) != 0, asked[i]) << i;
    ASSERT_EQ(c.Finalize(), 0);
  }
}

// Phases captured without their kernel channels: a channel's handle is then
// its op's, tagged, and each phase names the op as its parent.
TEST(KernelPhase, CapturedAloneNameTheirOp) {
  const std::string dir = MakeTempDir("phase_alone");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_EVENTS", "default,kernelphase"}});
  FakeComm c(PluginLib::Shared(), 7);
  ASSERT_EQ(c.Init(0x7171, "v7", 1, 2, 0), 0);
  EXPECT_NE(c.mask() & nccl::kKernelPhase, 0);
  OpSpec s;
  s.nchannels = 3;
  OpResult r = c.RunOp(s);
  ASSERT_EQ(c.Finalize(), 0);
  auto t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty());
  ASSERT_EQ(t->ops.size(), 1u);
  EXPECT_EQ(t->ops[0].done_count, 1);
  EXPECT_EQ(t->ops[0].gpu_stop, r.gpu_stop);
  auto phases = t->Children(t->ops[0].op->event_id(), trace::KERNEL_PHASE);
  ASSERT_EQ(phases.size(), 9u);
  std::map<uint32_t, std::set<int>> per_channel;
  for (const trace::EventStart* ph : phases) {
    ASSERT_TRUE(ph->has_kernel_phase());
    per_channel[ph->kernel_phase().channel()].insert(ph->kernel_phase().phase());
    EXPECT_EQ(t->stop_by_id.count(ph->event_id()), 1u);
  }
  for (uint32_t ch = 0; ch < 3; ++ch)
    EXPECT_EQ(per_channel[ch], (std::set<int>{trace::PHASE_INITIAL_SYNC, trace::PHASE_COMPUTE,
                                              trace::PHASE_FINAL_SYNC}));
  EXPECT_TRUE(t->Children(t->ops[0].op->event_id(), trace::KERNEL_CH).empty());
  // Nothing dropped, no parent refused (a Drops record would say so).
  EXPECT_EQ(t->LastDrops(), nullptr) << t->LastDrops()->ShortDebugString();
}

// NCCL 2.23 to 2.27 start a plan's Coll and P2p events only under a Group
// handle that is not null. Seen on 2x H200 with those releases: the default
// capture (no Group in the mask) gave files without a single operation.
TEST(GroupHandle, NeverNullOnV1ToV4SoOpsAreStarted) {
  for (int v : {1, 2, 3, 4, 5}) {
    SCOPED_TRACE("v" + std::to_string(v));
    const std::string dir = MakeTempDir("group");
    SetPluginEnv({{"NCCLWATCH_DIR", dir}});
    FakeComm c(PluginLib::Shared(), v);
    ASSERT_EQ(c.Init(0x6060, "g", 1, 2, 0), 0);
    Ev g;
    g.type = nccl::kGroup;
    void* h = c.Start(g);
    if (v <= 4) {
      EXPECT_NE(h, nullptr);
      c.State(h, nccl::kProxyCtrlIdle);  // never read
      c.Stop(h);
    }
    OpSpec s;
    s.proxy_peers = {};
    c.RunOp(s);  // the fake host, as NCCL, starts the op only under a Group handle
    ASSERT_EQ(c.Finalize(), 0);
    auto t = ReadSingleTrace(dir);
    EXPECT_EQ(t->ops.size(), 1u);
    const trace::Drops* d = t->LastDrops();
    if (d != nullptr) {
      EXPECT_EQ(d->bad_parent(), 0u) << "the token is no parent, not a bad one";
    }
  }
}

// The table's version decides, not the first init's: a v4 table gets the
// token even when a v5 init made the process's Profiler (seen as a flaky
// Concurrency test, where inits of several versions race).
TEST(GroupHandle, TheCallingTablesVersionDecides) {
  const std::string dir = MakeTempDir("group-mixed");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}});
  FakeComm v5(PluginLib::Shared(), 5), v4(PluginLib::Shared(), 4);
  ASSERT_EQ(v5.Init(0x6161, "first", 1, 2, 0), 0);
  ASSERT_EQ(v4.Init(0x6262, "second", 1, 2, 0), 0);
  Ev g;
  g.type = nccl::kGroup;
  EXPECT_NE(v4.Start(g), nullptr);
  ASSERT_EQ(v4.Finalize(), 0);
  ASSERT_EQ(v5.Finalize(), 0);
}

// ------------------------------------------------------------ null handles

TEST(NullHandles, AreNoOps) {
  for (int v : {2, 4, 5, 7}) {
    SCOPED_TRACE("v" + std::to_string(v));
    const std::string dir = MakeTempDir("null");
    SetPluginEnv({{"NCCLWATCH_DIR", dir}});
    PluginLib* lib = PluginLib::Shared();
    FakeComm c(lib, v);
    ASSERT_EQ(c.Init(0x77, "n", 1, 2, 0), 0);
    void* t = lib->Table(v);
    auto* p6 = static_cast<nccl::ProfilerV6*>(t);  // stopEvent at the same offset in every table
    EXPECT_EQ(p6->stopEvent(nullptr), 0);
    if (v <= 3) {
      auto* p = static_cast<nccl::ProfilerV2*>(t);
      nccl::StateArgsV1 a{};
      EXPECT_EQ(p->recordEventState(nullptr, nccl::kProxyOpSendDone, &a), 0);
      EXPECT_EQ(p->recordEventState(nullptr, nccl::kProxyOpSendDone, nullptr), 0);
      void* h = reinterpret_cast<void*>(1);
      EXPECT_EQ(p->startEvent(c.context(), &h, nullptr), 0);
      EXPECT_EQ(h, nullptr);
    } else {
      auto* p = static_cast<nccl::ProfilerV5*>(t);
      nccl::StateArgsV4 a{};
      EXPECT_EQ(p->recordEventState(nullptr, nccl::kKernelChStop, &a), 0);
      EXPECT_EQ(p->recordEventState(nullptr, nccl::kProxyStepSendWait, nullptr), 0);
      void* h = reinterpret_cast<void*>(1);
      if (v == 4) {
        EXPECT_EQ(static_cast<nccl::ProfilerV4*>(t)->startEvent(c.context(), &h, nullptr), 0);
      } else if (v == 7) {
        EXPECT_EQ(static_cast<nccl::ProfilerV7*>(t)->startEvent(c.context(), &h, nullptr), 0);
        EXPECT_EQ(h, nullptr);
        EXPECT_EQ(static_cast<nccl::ProfilerV7*>(t)->recordEventState(nullptr, nccl::kKernelPhaseStop, &a), 0);
      } else {
        EXPECT_EQ(p->startEvent(c.context(), &h, nullptr), 0);
      }
      EXPECT_EQ(h, nullptr);
    }
    // Not captured and no tracked parent: a null handle, and the null handle's
    // children and states are no-ops.
    Ev ps;
    ps.type = nccl::kProxyStep;
    ps.step = 3;
    void* step = c.Start(ps);
    EXPECT_EQ(step, nullptr);
    c.State(step, nccl::kProxyStepSendWait, StArgs{});
    c.Stop(step);
    Ev px;
    px.type = nccl::kProxyOp;
    px.pid = getpid();
    void* pxh = c.Start(px);
    EXPECT_EQ(pxh, nullptr);
    Ev child;
    child.type = nccl::kProxyStep;
    child.parent = pxh;
    EXPECT_EQ(c.Start(child), nullptr);
    Ev ctrl;
    ctrl.type = nccl::kProxyCtrl;
    EXPECT_EQ(c.Start(ctrl), nullptr);
    if (v >= 5) {
      Ev g;
      g.type = nccl::kGroupApi;
      EXPECT_EQ(c.Start(g), nullptr);
    }
    if (v >= 7) {
      // A kernel phase under no channel, or under a null one.
      Ev ph;
      ph.type = nccl::kKernelPhase;
      ph.phase = nccl::kPhaseFinalSync;
      EXPECT_EQ(c.Start(ph), nullptr);
      Ev kc;
      kc.type = nccl::kKernelCh;
      ph.parent = c.Start(kc);
      EXPECT_EQ(ph.parent, nullptr);
      EXPECT_EQ(c.Start(ph), nullptr);
    }
    // An unknown type bit: ignored.
    Ev bogus;
    bogus.type = v >= 5 ? (uint64_t{1} << 40) : (1u << 7) | 1u;
    EXPECT_EQ(c.Start(bogus), nullptr);
    ASSERT_EQ(c.Finalize(), 0);
    auto tr = ReadSingleTrace(dir);
    EXPECT_TRUE(tr->raw.issues.empty());
    EXPECT_TRUE(tr->ops.empty());
    EXPECT_TRUE(tr->starts.empty());
    ASSERT_EQ(tr->finalizes.size(), 1u);
    EXPECT_TRUE(tr->finalizes[0]->clean());
  }
}

// ------------------------------------------------------------ PXN

// NCCL launches the kernel and wakes its proxy thread before it stops the
// plan's ops, so a fast kernel's channels (and the proxy's work) may all
// start and stop before the op's own stop: the op completes once, with its
// GPU times, and is not left in flight.
TEST(Order, ChildrenBeforeTheOpsStop) {
  for (int v : {4, 5, 6, 7}) {
    for (const char* events : {"all", "default"}) {
      SCOPED_TRACE(std::string(events) + " v" + std::to_string(v));
      const std::string dir = MakeTempDir("early");
      // Without libcuda, the v7 default asks for no channels and completes
      // nothing; the order under test is the channels'.
      SetPluginEnv({{"NCCLWATCH_DIR", dir},
                    {"NCCLWATCH_EVENTS", events},
                    {"NCCLWATCH_STUCK_SEC", "1"},
                    {"NCCLWATCH_COMPLETIONS", v >= 7 ? "channels" : "auto"}});
      FakeComm c(PluginLib::Shared(), v);
      ASSERT_EQ(c.Init(0x4242, "early", 1, 2, 0), 0);
      std::vector<OpResult> rs;
      for (int k = 0; k < 3; ++k) {
        OpSpec s;
        s.seq = 1 + k;
        s.children_before_stop = true;
        s.p2p = k == 1;
        if (s.p2p) s.func = "Send";
        rs.push_back(c.RunOp(s));
      }
      ASSERT_EQ(c.Finalize(), 0);
      auto t = ReadSingleTrace(dir);
      EXPECT_TRUE(t->raw.issues.empty());
      ASSERT_EQ(t->ops.size(), 3u);
      for (size_t k = 0; k < 3; ++k) {
        const OpView& view = t->ops[k];
        ASSERT_EQ(view.done_count, 1) << k;
        EXPECT_EQ(view.gpu_start, rs[k].gpu_start);
        EXPECT_EQ(view.gpu_stop, rs[k].gpu_stop);
        EXPECT_EQ(view.done.proxy_ops(), rs[k].proxy_ops);
      }
      EXPECT_TRUE(t->stucks.empty());
      ASSERT_EQ(t->finalizes.size(), 1u);
      EXPECT_TRUE(t->finalizes[0]->clean());
    }
  }
}

// PXN: NCCL hands this process's proxy another process's ProxyOps, with that
// process's context pointer (NVIDIA/nccl#1586): an address that faults here.
// The plugin reads nothing at it; the events are not this process's, and
// the op completes from its own kernel channels.
TEST(Pxn, AForeignContextIsNeverRead) {
  for (int v : {4, 5, 6, 7}) {
    for (const char* events : {"all", "default"}) {
      SCOPED_TRACE(std::string(events) + " v" + std::to_string(v));
      const std::string dir = MakeTempDir("pxn");
      SetPluginEnv({{"NCCLWATCH_DIR", dir},
                    {"NCCLWATCH_EVENTS", events},
                    {"NCCLWATCH_COMPLETIONS", v >= 7 ? "channels" : "auto"}});
      FakeComm c(PluginLib::Shared(), v);
      ASSERT_EQ(c.Init(0x9876, "pxn", 2, 8, 3), 0);
      OpSpec s;
      s.pxn = true;
      s.nchannels = 2;
      s.proxy_peers = {4, 5};
      OpResult r = c.RunOp(s);
      EXPECT_EQ(r.proxy_ops, 0u);
      ASSERT_EQ(c.Finalize(), 0);
      auto t = ReadSingleTrace(dir);
      EXPECT_TRUE(t->raw.issues.empty());
      ASSERT_EQ(t->ops.size(), 1u);
      const OpView& view = t->ops[0];
      ASSERT_EQ(view.done_count, 1);
      EXPECT_EQ(view.done.proxy_ops(), 0u);
      EXPECT_EQ(view.done.proxy_bytes(), 0u);
      EXPECT_EQ(view.done.kernel_channels(), 2u);
      EXPECT_EQ(view.gpu_start, r.gpu_start);
      EXPECT_EQ(view.gpu_stop, r.gpu_stop);
      for (auto* e : t->starts) {
        EXPECT_NE(e->type(), trace::PROXY_OP);
        EXPECT_NE(e->type(), trace::PROXY_STEP);
        EXPECT_NE(e->type(), trace::NET_PLUGIN);
      }
    }
  }
}

// ------------------------------------------------------------ many threads

TEST(Concurrency, ManyThreadsManyCommsEveryOpOnce) {
  const std::string dir = MakeTempDir("threads");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "5"}});
  PluginLib* lib = PluginLib::Shared();
  constexpr int kThreads = 8, kCommsPerThread = 6, kOps = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      for (int k = 0; k < kCommsPerThread; ++k) {
        const int v = 4 + (th + k) % 3;
        FakeComm c(lib, v);
        const uint64_t hash = (uint64_t{0xC0} << 56) | (uint64_t(th) << 16) | k;
        if (c.Init(hash, "many", 1, 8, th) != 0) {
          failures++;
          continue;
        }
        for (int i = 1; i <= kOps; ++i) {
          OpSpec s;
          s.seq = i;
          s.nchannels = 1 + i % 3;
          s.proxy_peers = {(th + 1) % 8};
          s.nsteps = 1;
          s.net_plugin = false;
          s.api_events = i % 2 == 0;
          c.RunOp(s);
        }
        if (c.Finalize() != 0) failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);

  // The process-wide state may have ended and restarted between bursts: every
  // file must be complete, and every op must be in exactly one of them.
  std::vector<std::string> files = TraceFiles(dir);
  ASSERT_GE(files.size(), 1u);
  std::map<std::pair<uint64_t, uint64_t>, int> seen;  // (comm hash, seq) -> count
  std::map<uint64_t, int> finalized;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    auto t = ReadTrace(f);
    EXPECT_TRUE(t->raw.issues.empty()) << ::testing::PrintToString(t->raw.issues);
    ASSERT_EQ(t->finalizes.size(), 1u);
    EXPECT_TRUE(t->finalizes[0]->clean());
    EXPECT_TRUE(t->drops.empty());
    // A file-local id names the communicator of its latest CommInit: ids
    // of finalized communicators are given again. Walk the file in order.
    std::map<uint32_t, uint64_t> hash_of;  // id -> hash, as of this point
    std::vector<uint64_t> op_hash, fin_hash;
    for (const trace::Record& rec : t->raw.records) {
      if (rec.has_comm_init()) {
        EXPECT_EQ(hash_of.count(rec.comm_init().comm()), 0u) << "an id given again before its CommFinalize";
        hash_of[rec.comm_init().comm()] = rec.comm_init().comm_hash();
      } else if (rec.has_op()) {
        ASSERT_EQ(hash_of.count(rec.op().comm()), 1u);
        op_hash.push_back(hash_of[rec.op().comm()]);
      } else if (rec.has_comm_finalize()) {
        ASSERT_EQ(hash_of.count(rec.comm_finalize().comm()), 1u);
        fin_hash.push_back(hash_of[rec.comm_finalize().comm()]);
        hash_of.erase(rec.comm_finalize().comm());
      }
    }
    EXPECT_TRUE(t->orphan_done.empty());
    ASSERT_EQ(op_hash.size(), t->ops.size());
    for (size_t i = 0; i < t->ops.size(); ++i) {
      const OpView& o = t->ops[i];
      seen[{op_hash[i], o.op->seq()}]++;
      EXPECT_EQ(o.done_count, 1);
      EXPECT_EQ(o.done.kernel_channels(), o.op->nchannels());
      EXPECT_TRUE(o.has_gpu);
    }
    ASSERT_EQ(fin_hash.size(), t->comm_finalizes.size());
    for (size_t i = 0; i < t->comm_finalizes.size(); ++i) {
      finalized[fin_hash[i]]++;
      EXPECT_EQ(t->comm_finalizes[i]->ops_enqueued(), static_cast<uint64_t>(kOps));
      EXPECT_EQ(t->comm_finalizes[i]->ops_completed(), static_cast<uint64_t>(kOps));
    }
  }
  EXPECT_EQ(finalized.size(), static_cast<size_t>(kThreads * kCommsPerThread));
  for (auto& [h, n] : finalized) EXPECT_EQ(n, 1);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kCommsPerThread * kOps));
  for (auto& [k, n] : seen) EXPECT_EQ(n, 1) << std::hex << k.first << " seq " << std::dec << k.second;
}

// ------------------------------------------------------------ bursts past the buffers

// A pipelined loop of small operations (nccl-tests style, 1,000 to 2,000
// enqueued in a few ms) fits in a thread's ring even if the writer sleeps
// through it: nothing is dropped at the default buffer size. (On the GPU,
// before the ring grew to 8,192 records, 2,000-operation send/recv bursts
// lost up to 5,000 events per run.)
TEST(Overload, APipelinedBurstLosesNothing) {
  const std::string dir = MakeTempDir("pipelined");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}});
  ClearLogs();
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0xB1B1, "pipelined", 1, 2, 0), 0);
  constexpr int kOps = 4000;  // two records each here (it completes at its own stop): 8,000 of 8,192
  for (int i = 1; i <= kOps; ++i) {
    OpSpec s;
    s.seq = static_cast<uint64_t>(i);
    s.nchannels = 0;  // completes at enqueue: one record
    s.proxy_peers = {};
    s.api_events = false;
    c.RunOp(s);
  }
  ASSERT_EQ(c.Finalize(), 0);
  auto t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty()) << ::testing::PrintToString(t->raw.issues);
  EXPECT_EQ(t->LastDrops(), nullptr) << "events were dropped";
  EXPECT_EQ(t->ops.size(), static_cast<size_t>(kOps));
  EXPECT_TRUE(Warnings().empty()) << ::testing::PrintToString(Warnings());
}

// NCCL 2.28 sometimes does not deliver one of an operation's kernel-channel
// events (seen on H200s): that operation never completes. Once a later
// operation on its communicator has completed (NCCL runs a communicator's
// kernels in order) and a second has passed, the plugin stops watching it: no
// stuck report, its handle free, and the closing line counts it.
TEST(LostEvents, ALaterCompletionEndsTheWatch) {
  const std::string dir = MakeTempDir("lostch");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_STUCK_SEC", "2"},
                {"NCCLWATCH_FLUSH_MS", "10"},
                {"NCCLWATCH_HEARTBEAT_MS", "100"}});
  ClearLogs();
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0x1057, "lost", 1, 2, 0), 0);
  OpSpec a;
  a.seq = 1;
  a.proxy_peers = {};
  a.api_events = false;
  a.kernel_stop = 1;  // one of its two channels never reports its stop
  c.RunOp(a);
  OpSpec b = a;
  b.seq = 2;
  b.kernel_stop = -1;
  c.RunOp(b);
  // Until the writer has looked past the 2 s threshold of the first.
  const uint64_t past_threshold = MonoNs() + 2'100'000'000;
  {
    auto live = WaitForTrace(dir, [&](const Trace& t) { return WriterPast(t, past_threshold); });
    EXPECT_TRUE(live->stucks.empty()) << "a stuck report for an operation a later one proved complete";
    ASSERT_FALSE(live->heartbeats.empty());
    EXPECT_EQ(live->heartbeats.back()->ops_in_flight(), 0u);
  }
  ASSERT_EQ(c.Finalize(), 0);
  int info = 0, closing = 0;
  for (const LogLine& l : Logs()) {
    info += l.text.find("kernel-channel events did not all arrive from NCCL") != std::string::npos;
    closing += l.text.find("closed ") != std::string::npos &&
               l.text.find("; 1 completions implied by a later one") != std::string::npos;
  }
  EXPECT_EQ(info, 1);
  EXPECT_EQ(closing, 1);
  EXPECT_TRUE(Warnings().empty()) << ::testing::PrintToString(Warnings());
  // The file keeps the facts: the first operation has no completion.
  auto t = ReadSingleTrace(dir);
  ASSERT_EQ(t->ops.size(), 2u);
  int completed = 0;
  for (const OpView& o : t->ops) completed += o.done_count > 0;
  EXPECT_EQ(completed, 1);
}

// Without a later completion the same operation is reported stuck.
TEST(LostEvents, WithoutALaterCompletionItIsStuck) {
  const std::string dir = MakeTempDir("lostch2");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_STUCK_SEC", "1"},
                {"NCCLWATCH_FLUSH_MS", "10"},
                {"NCCLWATCH_HEARTBEAT_MS", "100"}});
  ClearLogs();
  FakeComm c(PluginLib::Shared(), 5);
  ASSERT_EQ(c.Init(0x1058, "lost", 1, 2, 0), 0);
  OpSpec a;
  a.seq = 1;
  a.proxy_peers = {};
  a.api_events = false;
  a.kernel_stop = 1;
  c.RunOp(a);
  const uint64_t past_threshold = MonoNs() + 1'100'000'000;
  auto live = WaitForTrace(dir, [&](const Trace& t) { return WriterPast(t, past_threshold); });
  EXPECT_EQ(live->stucks.size(), 1u);
  ASSERT_EQ(c.Finalize(), 0);
}

TEST(Overload, BurstsPastTheBufferAreCountedNotFatal) {
  const std::string dir = MakeTempDir("burst");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_BUFFER_MB", "1"},
                {"NCCLWATCH_FLUSH_MS", "10"},
                {"NCCLWATCH_HEARTBEAT_MS", "10"}});
  ClearLogs();
  PluginLib* lib = PluginLib::Shared();
  FakeComm c(lib, 5);
  ASSERT_EQ(c.Init(0xB0057, "burst", 1, 2, 0), 0);
  // The operations that never complete run on a communicator of their own:
  // on `c`, the burst's later completions would prove them complete once a
  // second has passed (the lost-completion rule), and free their handles, so
  // the counts below would depend on how fast the machine runs the test.
  FakeComm hung(lib, 5);
  ASSERT_EQ(hung.Init(0xB0058, "hung", 1, 2, 0), 0);

  // Thread buffers are few with 1 MiB: two workers take theirs first, then
  // more threads than are left ask for one at the same time.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  bool stuck_done = false;  // the stuck worker's 20,000 live operations are recorded
  const int kExtra = 6;
  auto barrier_wait = [&](int n) {
    std::unique_lock<std::mutex> l(mu);
    ++arrived;
    cv.notify_all();
    cv.wait(l, [&] { return arrived >= n; });
  };
  auto one_op = [&](uint64_t seq) {
    OpSpec s;
    s.seq = seq;
    s.nchannels = 0;  // completes at enqueue
    s.proxy_peers = {};
    s.api_events = false;
    c.RunOp(s);
  };
  std::atomic<uint64_t> next_seq{1};
  std::thread stuck_worker([&] {
    one_op(next_seq++);
    barrier_wait(2 + kExtra + 1);
    // Ops that never complete: every event handle of this thread stays live.
    for (int i = 0; i < 20000; ++i) {
      Ev o;
      o.type = nccl::kColl;
      o.seq = next_seq++;
      o.func = "AllReduce";
      o.nchannels = 2;
      void* h = hung.Start(o);
      hung.Stop(h);
    }
    {
      std::lock_guard<std::mutex> l(mu);
      stuck_done = true;
    }
    cv.notify_all();
    // Then operations started and never stopped: once the spare handles
    // (256) hold them too, the rest are lost.
    for (int i = 0; i < 300; ++i) {
      Ev o;
      o.type = nccl::kColl;
      o.seq = next_seq++;
      o.func = "AllReduce";
      o.nchannels = 2;
      hung.Start(o);
    }
  });
  std::thread burst_worker([&] {
    one_op(next_seq++);
    barrier_wait(2 + kExtra + 1);
    // The burst starts once the stuck worker holds every handle and the
    // writer has said so: the warning, given once, names the thread with
    // the most operations past its handles, and a burst running beside it
    // (whose completions wait in their slots when the ring is full) could
    // be that thread on a loaded machine (seen once under TSan).
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return stuck_done; });
    }
    WaitForLog("event handles exhausted on thread");
    for (int i = 0; i < 50000; ++i) one_op(next_seq++);
  });
  // Give the workers their buffers first.
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return arrived >= 2; });
  }
  std::vector<std::thread> extra;
  for (int i = 0; i < kExtra; ++i)
    extra.emplace_back([&] {
      one_op(next_seq++);
      barrier_wait(2 + kExtra + 1);
    });
  barrier_wait(2 + kExtra + 1);
  stuck_worker.join();
  burst_worker.join();
  for (auto& t : extra) t.join();
  // Drops show while the job runs: a Drops record and a heartbeat counting them.
  {
    auto dropped_in_heartbeat = [](const Trace& t) {
      uint64_t max_dropped = 0;
      for (auto* hb : t.heartbeats) max_dropped = std::max(max_dropped, hb->events_dropped());
      return max_dropped;
    };
    auto live = WaitForTrace(dir, [&](const Trace& t) { return !t.drops.empty() && dropped_in_heartbeat(t) > 0; });
    EXPECT_TRUE(live->raw.only_cut_tail);
    ASSERT_FALSE(live->drops.empty()) << "drops visible before finalize";
    EXPECT_GT(dropped_in_heartbeat(*live), 0u);
  }
  ASSERT_EQ(hung.Finalize(), 0);
  ASSERT_EQ(c.Finalize(), 0);

  auto t = ReadSingleTrace(dir);
  EXPECT_TRUE(t->raw.issues.empty()) << ::testing::PrintToString(t->raw.issues);
  const trace::Drops* d = t->LastDrops();
  ASSERT_NE(d, nullptr);
  // Whether the burst outruns the writer (ring_full) depends on the machine
  // since the writer drains every 1 ms in a burst (under TSan it never did);
  // core_test fills a ring with the writer paused. So does what follows from
  // it: a completion that finds the ring full waits in its op's slot for the
  // writer, and the burst's later ops may find no free slot and go
  // untracked. The rest is certain: 20,000 live operations for 4,096
  // handles, so 15,904 recorded without completion tracking; then 300 never
  // stopped, 256 on spare handles, 44 lost; and more threads than buffers.
  EXPECT_GE(d->completion_untracked(), 20000u - 4096u + 256u);
  EXPECT_LE(d->completion_untracked(), 20000u - 4096u + 256u + 50000u);
  EXPECT_EQ(d->pool_exhausted(), 44u);
  EXPECT_GT(d->no_thread_slot(), 0u);
  EXPECT_EQ(d->write_failed(), 0u);
  // The user hears of it through NCCL's logger: once while it happens, and
  // in the closing line with the file's own totals.
  std::vector<std::string> w = Warnings();
  int dropping = 0, closing = 0;
  const std::string total = "dropped " + std::to_string(d->ring_full() + d->pool_exhausted() + d->no_thread_slot()) +
                            " events (buffer full " + std::to_string(d->ring_full()) + ", handles exhausted " +
                            std::to_string(d->pool_exhausted()) + ", no buffer " + std::to_string(d->no_thread_slot()) +
                            ", write failed 0)";
  for (const std::string& line : w) {
    dropping += line.find("events are being dropped") != std::string::npos &&
                line.find("NCCLWATCH_BUFFER_MB (now 1)") != std::string::npos;
    closing += line.find("closed ") != std::string::npos && line.find(total) != std::string::npos;
  }
  EXPECT_EQ(dropping, 1) << ::testing::PrintToString(w);
  EXPECT_EQ(closing, 1) << total << "\n" << ::testing::PrintToString(w);
  // Once, what holds the handles: the stuck worker's operations, each still
  // waiting for both of its kernel channels.
  int exhausted = 0;
  for (const std::string& line : w) {
    if (line.find("event handles exhausted on thread") == std::string::npos) continue;
    ++exhausted;
    EXPECT_NE(line.find("4096 of 4096 handles in use, 4096 by operations in flight (4096 waiting for kernel channels)"),
              std::string::npos)
        << line;
    // Its name, once the writer has its record (a slow writer, as under TSan, may not yet).
    EXPECT_TRUE(line.find("the oldest: AllReduce (event ") != std::string::npos ||
                line.find("the oldest: an operation whose record is not yet written (event ") != std::string::npos)
        << line;
    EXPECT_NE(line.find("kernel channels 2 expected, 0 started, 0 stopped"), std::string::npos) << line;
  }
  EXPECT_EQ(exhausted, 1) << ::testing::PrintToString(w);
  // What did arrive arrived once.
  std::set<uint64_t> seqs, ids;
  for (const OpView& o : t->ops) {
    EXPECT_TRUE(seqs.insert(o.op->seq()).second) << "seq " << o.op->seq() << " twice";
    if (o.op->event_id() != 0) {
      EXPECT_TRUE(ids.insert(o.op->event_id()).second);
    }
    EXPECT_LE(o.done_count, 1);
  }
  EXPECT_GT(t->ops.size(), 1000u);
  ASSERT_EQ(t->finalizes.size(), 1u);
  EXPECT_TRUE(t->finalizes[0]->clean());
}

// ------------------------------------------------------------ configuration

TEST(Config, BadValuesWarnThroughTheLoggerAndUseDefaults) {
  const std::string dir = MakeTempDir("badenv");
  SetPluginEnv({{"NCCLWATCH_DIR", dir},
                {"NCCLWATCH_EVENTS", "coll,bogus"},
                {"NCCLWATCH_FLUSH_MS", "abc"},
                {"NCCLWATCH_HEARTBEAT_MS", "5"},
                {"NCCLWATCH_STUCK_SEC", "-1"},
                {"NCCLWATCH_BUFFER_MB", "0"},
                {"NCCLWATCH_CLOCK", "hpet"},
                {"NCCLWATCH_ENABLE", "maybe"}});
  ClearLogs();
  PluginLib* lib = PluginLib::Shared();
  FakeComm a(lib, 5), b(lib, 5);
  ASSERT_EQ(a.Init(1, "a", 1, 2, 0), 0);
  ASSERT_EQ(b.Init(2, "b", 1, 2, 1), 0);  // a second init warns no more
  EXPECT_EQ(a.mask(), nccl::kColl | nccl::kP2p | nccl::kKernelCh);
  std::vector<std::string> w = Warnings();
  ASSERT_EQ(w.size(), 7u) << ::testing::PrintToString(w);
  for (const char* var : {"NCCLWATCH_EVENTS", "NCCLWATCH_FLUSH_MS", "NCCLWATCH_HEARTBEAT_MS", "NCCLWATCH_STUCK_SEC",
                          "NCCLWATCH_BUFFER_MB", "NCCLWATCH_CLOCK", "NCCLWATCH_ENABLE"}) {
    int n = 0;
    for (const std::string& line : w) n += line.find(var) != std::string::npos;
    EXPECT_EQ(n, 1) << var;
  }
  for (const LogLine& l : Logs()) EXPECT_NE(l.flags & nccl::kLogSubsysProfile, 0u);
  a.Finalize();
  b.Finalize();
  auto t = ReadSingleTrace(dir);
  ASSERT_NE(t->header, nullptr);
  const trace::ProcessHeader defaults = DefaultHeader();
  EXPECT_EQ(t->header->flush_ms(), defaults.flush_ms());
  EXPECT_EQ(t->header->heartbeat_ms(), defaults.heartbeat_ms());
  EXPECT_EQ(t->header->stuck_sec(), defaults.stuck_sec());
  EXPECT_EQ(t->header->buffer_bytes(), defaults.buffer_bytes());
  EXPECT_GT(t->header->flush_ms(), 0u);
  EXPECT_GE(t->header->heartbeat_ms(), 10u);
  EXPECT_GT(t->header->stuck_sec(), 0.0);
  EXPECT_EQ(t->header->event_mask(), uint64_t{nccl::kColl | nccl::kP2p | nccl::kKernelCh});
  EXPECT_EQ(t->header->events_config(), "default");
  // NCCLWATCH_CLOCK=hpet was ignored: the automatic choice, with its reason.
  const std::string& clock = t->header->clock_source();
  EXPECT_TRUE(clock.rfind("tsc (", 0) == 0 || clock.rfind("monotonic (", 0) == 0) << clock;
  EXPECT_EQ(clock.find("NCCLWATCH_CLOCK"), std::string::npos) << clock;
}

TEST(Config, V2WarnsOnStderr) {
  const std::string dir = MakeTempDir("badenv2");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_FLUSH_MS", "0"}});
  ClearLogs();
  FakeComm a(PluginLib::Shared(), 2);
  std::string err;
  {
    StderrCapture cap;
    ASSERT_EQ(a.Init(0, nullptr, 0, 0, 0), 0);
    err = cap.Take();
  }
  EXPECT_NE(err.find("NCCL WARN"), std::string::npos) << err;
  EXPECT_NE(err.find("NCCLWATCH_FLUSH_MS"), std::string::npos) << err;
  EXPECT_TRUE(Logs().empty());
  a.Finalize();
}

TEST(Lifecycle, InitAfterLastFinalizeStartsANewFile) {
  const std::string dir = MakeTempDir("cycle");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}});
  PluginLib* lib = PluginLib::Shared();
  for (int round = 0; round < 2; ++round) {
    FakeComm c(lib, 6);
    ASSERT_EQ(c.Init(0x10 + round, "cycle", 1, 2, 0), 0);
    OpSpec s;
    s.seq = 1 + round;
    c.RunOp(s);
    ASSERT_EQ(c.Finalize(), 0);
  }
  std::vector<std::string> files = TraceFiles(dir);
  ASSERT_EQ(files.size(), 2u);
  std::set<uint64_t> seqs;
  for (const std::string& f : files) {
    auto t = ReadTrace(f);
    EXPECT_TRUE(t->raw.issues.empty());
    ASSERT_EQ(t->ops.size(), 1u);
    seqs.insert(t->ops[0].op->seq());
    ASSERT_EQ(t->finalizes.size(), 1u);
    EXPECT_TRUE(t->finalizes[0]->clean());
  }
  EXPECT_EQ(seqs, (std::set<uint64_t>{1, 2}));
}

// NCCL 2.23 to 2.26 dlclose the plugin after the last finalize and dlopen it
// again for the next communicator. Threads that called the plugin may exit
// after the dlclose (the thread-exit hook gives their buffer back), and the
// writer thread must not run unmapped code: the .so stays loaded
// (-z nodelete) and serves the next communicator with a new file.
TEST(Lifecycle, DlcloseAfterLastFinalizeAsNccl226Does) {
  const std::string dir = MakeTempDir("dlclose");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}});
  PluginLib* lib = PluginLib::FreshCopy();
  std::mutex mu;
  std::condition_variable cv;
  int phase = 0;  // 1: the thread's op is posted; 2: the plugin was closed
  {
    FakeComm c(lib, 3);
    ASSERT_EQ(c.Init(0x51, "dlclose", 1, 2, 0), 0);
    FakeComm other = c.Alias();
    std::thread t([&] {
      OpSpec s;
      s.seq = 1;
      other.RunOp(s);
      std::unique_lock<std::mutex> lock(mu);
      phase = 1;
      cv.notify_all();
      cv.wait(lock, [&] { return phase == 2; });
      // Exits now, after the dlclose: its thread-exit hook runs.
    });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return phase == 1; });
    }
    ASSERT_EQ(c.Finalize(), 0);
    ASSERT_EQ(lib->Close(), 0);
    EXPECT_NE(dlopen(lib->path().c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr) << "the plugin was unloaded by dlclose";
    {
      std::lock_guard<std::mutex> lock(mu);
      phase = 2;
    }
    cv.notify_all();
    t.join();
  }
  ASSERT_NE(lib->Reopen(), nullptr);
  {
    FakeComm c(lib, 3);
    ASSERT_EQ(c.Init(0x52, "dlclose", 1, 2, 0), 0);
    OpSpec s;
    s.seq = 2;
    c.RunOp(s);
    ASSERT_EQ(c.Finalize(), 0);
  }
  std::vector<std::string> files = TraceFiles(dir);
  ASSERT_EQ(files.size(), 2u);
  std::set<uint64_t> seqs;
  for (const std::string& f : files) {
    auto t = ReadTrace(f);
    EXPECT_TRUE(t->raw.issues.empty()) << f;
    ASSERT_EQ(t->ops.size(), 1u) << f;
    seqs.insert(t->ops[0].op->seq());
    ASSERT_EQ(t->finalizes.size(), 1u) << f;
    EXPECT_TRUE(t->finalizes[0]->clean()) << f;
  }
  EXPECT_EQ(seqs, (std::set<uint64_t>{1, 2}));
}

// Finalizing one communicator while another lives: its CommFinalize follows
// its ops, the file stays open, and the last finalize ends it cleanly.
TEST(Lifecycle, CommFinalizeFollowsItsOps) {
  const std::string dir = MakeTempDir("order");
  SetPluginEnv({{"NCCLWATCH_DIR", dir}});
  PluginLib* lib = PluginLib::Shared();
  FakeComm a(lib, 5), b(lib, 5);
  ASSERT_EQ(a.Init(0xAA, "a", 1, 2, 0), 0);
  ASSERT_EQ(b.Init(0xBB, "b", 1, 2, 0), 0);
  OpSpec s;
  a.RunOp(s);
  ASSERT_EQ(a.Finalize(), 0);  // b lives on: the file stays open
  b.RunOp(s);
  // The CommFinalize goes out with the next write.
  std::unique_ptr<Trace> live = WaitForTrace(dir, [](const Trace& t) { return !t.comm_finalizes.empty(); });
  ASSERT_EQ(live->comm_finalizes.size(), 1u);
  bool op_before = false;
  for (const trace::Record& r : live->raw.records) {
    if (r.has_op()) op_before = true;
    if (r.has_comm_finalize()) break;
  }
  EXPECT_TRUE(op_before);
  EXPECT_TRUE(live->finalizes.empty());
  ASSERT_EQ(b.Finalize(), 0);
  auto t = ReadSingleTrace(dir);
  EXPECT_EQ(t->ops.size(), 2u);
  ASSERT_EQ(t->finalizes.size(), 1u);
  EXPECT_TRUE(t->finalizes[0]->clean());
}

// ------------------------------------------------------------ turned off

// Each case loads its own copy of the .so: "warn once" is per process.
// Init never fails (an error makes NCCL turn the profiler off process-wide,
// crash at the last destroy, or unload the plugin, by release): it gives a
// null context, leaves the process's mask as it was, and warns once.
TEST(TurnedOff, UnwritableDirGivesNoContextAndOneWarning) {
  struct Case {
    std::string dir;
    const char* what;
  };
  const std::string base = MakeTempDir("off");
  const std::string file = base + "/a-file";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  std::vector<Case> cases = {{base + "/missing/dir", "missing"}, {file, "a regular file"}};
  if (geteuid() != 0) {
    const std::string ro = base + "/readonly";
    ASSERT_EQ(mkdir(ro.c_str(), 0555), 0);
    cases.push_back({ro, "read-only"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    for (int v : {4, 5, 6}) {  // v1..v3 warn on stderr: EnableZero* covers them
      SCOPED_TRACE("v" + std::to_string(v));
      SetPluginEnv({{"NCCLWATCH_DIR", c.dir}});
      ClearLogs();
      PluginLib* lib = PluginLib::FreshCopy();
      for (int i = 0; i < 3; ++i) {
        FakeComm comm(lib, v);
        SetNcclEventMask(0x40000);
        EXPECT_EQ(comm.Init(0x1000 + i, "off", 1, 2, 0), 0);
        EXPECT_EQ(comm.context(), nullptr);
        EXPECT_EQ(NcclEventMask(), 0x40000) << "the mask is every communicator's";
        OpSpec s;
        comm.RunOp(s);  // NCCL calls on with the null context: no-ops
      }
      std::vector<std::string> w = Warnings();
      ASSERT_EQ(w.size(), 1u) << ::testing::PrintToString(w);
      EXPECT_NE(w[0].find(c.dir), std::string::npos) << w[0];
      EXPECT_EQ(Logs().size(), 1u);
    }
  }
  EXPECT_TRUE(TraceFiles(base).empty());
}

TEST(TurnedOff, EnableZeroGivesNoContextAndOneWarning) {
  const std::string dir = MakeTempDir("enable0");
  for (int v = 1; v <= 7; ++v) {
    SCOPED_TRACE("v" + std::to_string(v));
    SetPluginEnv({{"NCCLWATCH_DIR", dir}, {"NCCLWATCH_ENABLE", "0"}});
    ClearLogs();
    PluginLib* lib = PluginLib::FreshCopy();
    std::string err;
    {
      StderrCapture cap;
      for (int i = 0; i < 3; ++i) {
        FakeComm comm(lib, v);
        SetNcclEventMask(0x40000);
        EXPECT_EQ(comm.Init(0x2000 + i, "off", 1, 2, 0), 0);
        EXPECT_EQ(comm.context(), nullptr);
        EXPECT_EQ(NcclEventMask(), 0x40000);
        OpSpec s;
        comm.RunOp(s);
      }
      err = cap.Take();
    }
    if (v >= 4) {
      std::vector<std::string> w = Warnings();
      ASSERT_EQ(w.size(), 1u) << ::testing::PrintToString(w);
      EXPECT_NE(w[0].find("NCCLWATCH_ENABLE"), std::string::npos) << w[0];
      EXPECT_EQ(err.find("ncclwatch"), std::string::npos) << "v4+ warns through the logger only: " << err;
    } else {
      EXPECT_TRUE(Logs().empty());
      size_t n = 0;
      for (size_t at = err.find("NCCL WARN"); at != std::string::npos; at = err.find("NCCL WARN", at + 1)) ++n;
      EXPECT_EQ(n, 1u) << err;
      EXPECT_NE(err.find("NCCLWATCH_ENABLE"), std::string::npos) << err;
    }
  }
  EXPECT_TRUE(TraceFiles(dir).empty());
}

}  // namespace
}  // namespace ncclwatch::testing

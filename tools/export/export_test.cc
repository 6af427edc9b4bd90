#include "tools/cli.h"
#include "tools/export/export.h"

#include "proto/stats.pb.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000'000;  // aligned ns (CLOCK_REALTIME-like)

// Two ranks on two hosts, one communicator.
struct Job {
  Model m;

  explicit Job(const std::string& comm_name) {
    for (int r = 0; r < 2; ++r) {
      Proc p;
      p.host = "node" + std::to_string(r);
      p.pid = 4000 + r;
      p.launcher_rank = r;
      p.first_ns = kT0;
      p.last_ns = kT0 + 10'000'000;  // 10 ms
      m.procs.push_back(p);
    }
    Comm c;
    c.hash = 0xabcdef;
    c.name = comm_name;
    c.nranks = 2;
    for (int r = 0; r < 2; ++r) {
      c.members.push_back({static_cast<uint32_t>(r), r, kT0, kNoTime});
      c.proc_of_rank.push_back(static_cast<uint32_t>(r));
    }
    m.comms.push_back(c);
    m.alignment_method = "2 hosts: header clock pairs";
  }

  Op& Add(int r, const std::string& func, uint64_t seq, int64_t start, int64_t done, int64_t gpu_start = 0,
          uint32_t gpu_dur = 0) {
    Op o;
    o.proc = static_cast<uint32_t>(r);
    o.comm = 0;
    o.rank = r;
    o.kind = (func == "Send" || func == "Recv") ? OpKind::kP2p : OpKind::kColl;
    m.SetFunc(&o, func);
    o.datatype = m.Intern("ncclFloat32");
    o.algo = m.Intern("Ring");
    o.proto = m.Intern("Simple");
    o.nchannels = 2;
    o.seq = seq;
    o.count = 1024;
    o.start_ns = kT0 + start;
    o.enqueue_ns = 3000;
    if (done >= 0) {
      o.state = OpState::kCompleted;
      o.done_ns = kT0 + done;
    } else {
      o.state = done == -1 ? OpState::kInFlight : OpState::kUntracked;
    }
    if (gpu_dur > 0) {
      o.has_gpu = true;
      o.gpu_start_ns = kT0 + gpu_start;
      o.gpu_duration_ns = gpu_dur;
    }
    m.procs[static_cast<size_t>(r)].ops.push_back(static_cast<uint32_t>(m.ops.size()));
    m.ops.push_back(o);
    return m.ops.back();
  }
};

stats::ChromeTrace RoundTrip(const Model& m, std::string* json_out = nullptr) {
  std::ostringstream out;
  WriteChromeTrace(m, out);
  const std::string json = out.str();
  if (json_out) *json_out = json;
  stats::ChromeTrace back;
  auto st = google::protobuf::util::JsonStringToMessage(json, &back);
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << json;
  return back;
}

// name of thread (pid, tid) from the metadata.
std::map<std::pair<int, int>, std::string> ThreadNames(const stats::ChromeTrace& t) {
  std::map<std::pair<int, int>, std::string> out;
  for (const auto& e : t.traceevents())
    if (e.ph() == "M" && e.name() == "thread_name") out[{e.pid(), e.tid()}] = e.args().at("name").string_value();
  return out;
}

TEST(ExportTest, ProcessesTracksAndSpans) {
  Job j("world");
  // seq 0: completed with GPU timing on both ranks.
  j.Add(0, "AllReduce", 0, 1'000'000, 1'500'000, 1'100'000, 300'000);
  j.Add(1, "AllReduce", 0, 1'200'000, 1'500'000, 1'250'000, 240'000);
  std::string json;
  stats::ChromeTrace t = RoundTrip(j.m, &json);
  EXPECT_EQ(t.displaytimeunit(), "ns");
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u) << json;
  EXPECT_NE(json.find("\"displayTimeUnit\":\"ns\""), std::string::npos);
  EXPECT_EQ(t.otherdata().at("origin_ns"), std::to_string(kT0));

  std::map<int, std::string> procs;
  for (const auto& e : t.traceevents())
    if (e.ph() == "M" && e.name() == "process_name") procs[e.pid()] = e.args().at("name").string_value();
  EXPECT_EQ(procs[0], "rank 0 (node0:4000)");
  EXPECT_EQ(procs[1], "rank 1 (node1:4001)");

  auto threads = ThreadNames(t);
  EXPECT_EQ(threads[std::make_pair(0, 1)], "world");
  EXPECT_EQ(threads[std::make_pair(0, 2)], "world (GPU)");

  int cpu = 0, gpu = 0;
  for (const auto& e : t.traceevents()) {
    if (e.ph() != "X") continue;
    ASSERT_TRUE(e.has_ts() && e.has_dur() && e.has_pid() && e.has_tid());
    EXPECT_EQ(e.name(), "AllReduce");
    const auto& a = e.args();
    EXPECT_EQ(a.at("comm").string_value(), "world");
    EXPECT_EQ(a.at("seq").number_value(), 0);
    EXPECT_EQ(a.at("count").number_value(), 1024);
    EXPECT_EQ(a.at("datatype").string_value(), "ncclFloat32");
    EXPECT_EQ(a.at("algo").string_value(), "Ring");
    EXPECT_EQ(a.at("proto").string_value(), "Simple");
    EXPECT_EQ(a.at("nchannels").number_value(), 2);
    EXPECT_EQ(a.count("stuck"), 0u);
    const std::string track = threads[{e.pid(), e.tid()}];
    if (e.cat() == "gpu") {
      ++gpu;
      EXPECT_EQ(track, "world (GPU)");
      if (e.pid() == 0) {
        EXPECT_DOUBLE_EQ(e.ts(), 1100.0);  // us since the origin
        EXPECT_DOUBLE_EQ(e.dur(), 300.0);
      }
    } else {
      ++cpu;
      EXPECT_EQ(track, "world");
      if (e.pid() == 1) {
        EXPECT_DOUBLE_EQ(e.ts(), 1200.0);
        EXPECT_DOUBLE_EQ(e.dur(), 300.0);
      }
    }
  }
  EXPECT_EQ(cpu, 2);
  EXPECT_EQ(gpu, 2);
}

TEST(ExportTest, StuckOpsRunToTheEndWithAnInstantAtTheReport) {
  Job j("world");
  j.Add(0, "AllReduce", 0, 1'000'000, 1'500'000, 1'100'000, 300'000);
  j.Add(1, "AllReduce", 0, 1'000'000, 1'500'000, 1'100'000, 300'000);
  j.Add(0, "AllReduce", 1, 2'000'000, -1);  // never completes
  StuckReport r;
  r.time_ns = kT0 + 8'000'000;
  r.threshold_sec = 0.005;
  StuckOp so;
  so.op = 2;
  so.comm = 0;
  so.seq = 1;
  so.func = j.m.Intern("AllReduce");
  so.age_ns = 6'000'000;
  so.nchannels = 2;
  so.kernel_started = 2;
  so.kernel_stopped = 1;
  r.ops.push_back(so);
  j.m.procs[0].stucks.push_back(r);

  stats::ChromeTrace t = RoundTrip(j.m);
  int stuck = 0, instants = 0;
  for (const auto& e : t.traceevents()) {
    if (e.ph() == "X" && e.name() == "AllReduce (STUCK)") {
      ++stuck;
      EXPECT_TRUE(e.args().at("stuck").bool_value());
      EXPECT_DOUBLE_EQ(e.ts(), 2000.0);
      EXPECT_DOUBLE_EQ(e.ts() + e.dur(), 10000.0);  // the end of the trace: the last sign of life
    }
    if (e.ph() == "i") {
      ++instants;
      EXPECT_EQ(e.s(), "p");
      EXPECT_EQ(e.pid(), 0);
      EXPECT_DOUBLE_EQ(e.ts(), 8000.0);
      EXPECT_EQ(e.args().at("ops_in_flight").number_value(), 1);
      EXPECT_NE(e.args().at("op 1").string_value().find("AllReduce on world #1"), std::string::npos)
          << e.args().at("op 1").string_value();
    }
  }
  EXPECT_EQ(stuck, 1);
  EXPECT_EQ(instants, 1);
}

// Export calls a hang what diagnose calls a hang (tools/liveness.h): an
// operation the files end on 8 ms after its enqueue is in flight, not stuck,
// unless its wait passes the threshold or a stuck report names it.
TEST(ExportTest, InFlightIsNotStuckUnlessDiagnoseWouldSaySo) {
  Job j("world");
  j.Add(0, "AllReduce", 1, 2'000'000, -1);  // rank 0 waits 8 ms: in flight
  j.m.procs[1].last_ns = kT0 + 3'000'000'000;
  j.Add(1, "AllReduce", 1, 2'000'000, -1);  // rank 1 waits 3 s: hung
  stats::ChromeTrace t = RoundTrip(j.m);
  std::map<int, std::string> name_of_pid;
  for (const auto& e : t.traceevents())
    if (e.ph() == "X") {
      name_of_pid[e.pid()] = e.name();
      EXPECT_EQ(e.args().count("stuck"), e.name() == "AllReduce (STUCK)" ? 1u : 0u) << e.name();
    }
  EXPECT_EQ(name_of_pid[0], "AllReduce (in flight)");
  EXPECT_EQ(name_of_pid[1], "AllReduce (STUCK)");
}

TEST(ExportTest, OverlappingOpsGetLanesSoSpansNest) {
  Job j("world");
  // The CPU enqueues three ops before the first completes (GPU runs them in turn).
  j.Add(0, "AllReduce", 0, 0, 300'000, 10'000, 90'000);
  j.Add(0, "AllReduce", 1, 20'000, 400'000, 100'000, 90'000);
  j.Add(0, "AllReduce", 2, 40'000, 500'000, 200'000, 90'000);
  j.Add(0, "AllReduce", 3, 600'000, 700'000, 610'000, 50'000);  // after all: back to lane 1
  j.Add(0, "Send", 1, 650'000, -2);                               // completion not tracked
  stats::ChromeTrace t = RoundTrip(j.m);
  auto threads = ThreadNames(t);
  std::map<int, std::vector<std::pair<double, double>>> by_tid;
  std::map<uint64_t, std::string> cpu_track_of_seq;
  for (const auto& e : t.traceevents()) {
    if (e.ph() != "X" || e.pid() != 0) continue;
    by_tid[e.tid()].push_back({e.ts(), e.ts() + e.dur()});
    if (e.cat() != "gpu") cpu_track_of_seq[static_cast<uint64_t>(e.args().at("seq").number_value()) +
                                           (e.cat() == "p2p" ? 100 : 0)] = threads[{0, e.tid()}];
    if (e.cat() == "p2p") {
      EXPECT_EQ(e.args().at("completion").string_value(), "not tracked");
      EXPECT_DOUBLE_EQ(e.dur(), 3.0);  // its enqueue
      EXPECT_EQ(e.args().at("peer").number_value(), 0);
    }
  }
  EXPECT_EQ(cpu_track_of_seq[0], "world");
  EXPECT_EQ(cpu_track_of_seq[1], "world [2]");
  EXPECT_EQ(cpu_track_of_seq[2], "world [3]");
  EXPECT_EQ(cpu_track_of_seq[3], "world");
  // No two spans of one track overlap.
  for (auto& [tid, spans] : by_tid) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first) << threads[{0, tid}];
  }
  // GPU spans did not overlap: one GPU track.
  int gpu_tracks = 0;
  for (auto& [key, name] : threads)
    if (key.first == 0 && name.find("(GPU)") != std::string::npos) ++gpu_tracks;
  EXPECT_EQ(gpu_tracks, 1);
}

TEST(ExportTest, HostileNamesAreEscapedByTheEncoder) {
  const std::string hostile = "we\"ird\\comm\nname\t\x01 \xC3\xA9\xE2\x9C\x93 </script>";
  Job j(hostile);
  j.m.procs[1].host = "host\"with\\quote";
  j.Add(0, "AllReduce", 0, 0, 100'000, 10'000, 50'000);
  std::string json;
  stats::ChromeTrace t = RoundTrip(j.m, &json);
  // Raw control characters never reach the JSON text.
  for (char c : json) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << "raw control character in the JSON";
  EXPECT_NE(json.find("we\\\"ird\\\\comm\\nname\\t\\u0001 \xC3\xA9\xE2\x9C\x93"), std::string::npos) << json;
  auto threads = ThreadNames(t);
  EXPECT_EQ(threads[std::make_pair(0, 1)], hostile);
  EXPECT_EQ(threads[std::make_pair(0, 2)], hostile + " (GPU)");
  bool found = false;
  for (const auto& e : t.traceevents())
    if (e.ph() == "M" && e.name() == "process_name" && e.pid() == 1) {
      EXPECT_EQ(e.args().at("name").string_value(), "rank 1 (host\"with\\quote:4001)");
      found = true;
    }
  EXPECT_TRUE(found);

  // Invalid UTF-8 is replaced, not dropped with the rest of the string.
  Job bad(std::string("bad\xFFname"));
  bad.Add(0, "AllReduce", 0, 0, 100'000);
  stats::ChromeTrace tb = RoundTrip(bad.m);
  EXPECT_EQ(ThreadNames(tb)[std::make_pair(0, 1)], "bad\xEF\xBF\xBDname");
}

TEST(ExportTest, UnnamedCommsAndNoLauncherRank) {
  Job j("");
  j.m.procs[0].launcher_rank = -1;
  j.Add(0, "Broadcast", 0, 0, 100'000).peer_or_root = 1;
  stats::ChromeTrace t = RoundTrip(j.m);
  EXPECT_EQ(ThreadNames(t)[std::make_pair(0, 1)], "comm 0xabcdef");
  for (const auto& e : t.traceevents()) {
    if (e.ph() == "M" && e.name() == "process_name" && e.pid() == 0) {
      // No launcher rank: named by its rank in its communicator, as diagnose names it.
      EXPECT_EQ(e.args().at("name").string_value(), "rank 0 (node0:4000)");
    }
    if (e.ph() == "X") {
      EXPECT_EQ(e.args().at("root").number_value(), 1);
    }
  }
}

TEST(ExportTest, ExportCommandFlags) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"ncclwatch", "export", "--help"}, out, err), 0);
  EXPECT_NE(out.str().find("usage: ncclwatch export"), std::string::npos);
  EXPECT_EQ(RunCli({"ncclwatch", "export"}, out, err), 2);
  EXPECT_EQ(RunCli({"ncclwatch", "export", "--bogus", "x"}, out, err), 2);
  EXPECT_EQ(RunCli({"ncclwatch", "export", "--out"}, out, err), 2);
  std::ostringstream err2;
  EXPECT_EQ(RunCli({"ncclwatch", "export", "/nonexistent/file.ncclwatch"}, out, err2), 2);
  EXPECT_NE(err2.str().find("ncclwatch export: "), std::string::npos);
}

TEST(ExportEndToEnd, HungJobFromTraceFiles) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp");
  testing::JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 6;
  spec.funcs = {"AllReduce", "AllGather"};
  spec.stuck_sec = 2;
  spec.op_hook = [](int rank, int index, testing::OpPlan& op) {
    if (rank == 3 && index == 5) op.never_completes = true;  // rank 3's kernel never finishes #5
  };
  testing::WriteJob(testing::BuildJob(spec), dir);
  const std::string path = dir + "/trace.json";
  std::ostringstream out, err;
  ASSERT_EQ(RunCli({"ncclwatch", "export", "--out", path, dir}, out, err), 0) << err.str();
  EXPECT_NE(err.str().find("wrote " + path), std::string::npos) << err.str();
  std::ifstream f(path);
  std::stringstream json;
  json << f.rdbuf();
  stats::ChromeTrace t;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.str(), &t).ok()) << json.str().substr(0, 2000);
  std::set<std::string> procs;
  int gpu = 0, cpu = 0, stuck = 0, instants = 0;
  for (const auto& e : t.traceevents()) {
    if (e.ph() == "M" && e.name() == "process_name") procs.insert(e.args().at("name").string_value());
    if (e.ph() == "X" && e.cat() == "gpu") ++gpu;
    if (e.ph() == "X" && e.cat() == "coll") ++cpu;
    if (e.ph() == "X" && e.name().find("(STUCK)") != std::string::npos) ++stuck;
    if (e.ph() == "i") ++instants;
    if (e.ph() == "X") {
      EXPECT_GE(e.ts(), 0);
      EXPECT_GE(e.dur(), 0);
    }
  }
  EXPECT_EQ(procs.size(), 4u);
  EXPECT_EQ(procs.count("rank 0 (" + testing::BuildJob(spec)[0].spec().host + ":" +
                        std::to_string(testing::BuildJob(spec)[0].spec().pid) + ")"),
            1u);
  EXPECT_EQ(cpu, 4 * 6);
  EXPECT_EQ(gpu, 4 * 5 + 3);    // #5 completed on ranks 0..2 only
  EXPECT_EQ(stuck, 1);          // rank 3's #5
  EXPECT_GE(instants, 1);       // its stuck report

  std::ostringstream to_stdout;
  ASSERT_EQ(RunCli({"ncclwatch", "export", dir}, to_stdout, err), 0);
  EXPECT_EQ(to_stdout.str().rfind("{\"traceEvents\":[", 0), 0u);
}

// One collective is one flow across its ranks: "s" on the lowest rank's
// span, "f" on the highest's, one id, both bound to the span they sit on.
TEST(ExportTest, ACollectiveIsLinkedAcrossRanks) {
  Job j("world");
  j.Add(0, "AllReduce", 0, 1'000'000, 1'500'000);
  j.Add(1, "AllReduce", 0, 1'200'000, 1'500'000);
  Match mt;
  mt.comm = 0;
  mt.seq = 0;
  mt.ops = {0, 1};
  j.m.matches.push_back(mt);
  j.m.ops[0].match = j.m.ops[1].match = 0;
  stats::ChromeTrace t = RoundTrip(j.m);
  std::map<std::string, const stats::ChromeEvent*> flow;
  for (const auto& e : t.traceevents())
    if (e.cat() == "match") flow[e.ph()] = &e;
  ASSERT_EQ(flow.size(), 2u);
  ASSERT_TRUE(flow.count("s") && flow.count("f"));
  EXPECT_EQ(flow["s"]->id(), flow["f"]->id());
  EXPECT_EQ(flow["s"]->pid(), 0);
  EXPECT_EQ(flow["f"]->pid(), 1);
  EXPECT_EQ(flow["s"]->bp(), "e");
  EXPECT_DOUBLE_EQ(flow["s"]->ts(), 1000.0);  // on rank 0's span, which starts 1 ms in
  EXPECT_EQ(flow["f"]->name(), "AllReduce #0");
}

}  // namespace
}  // namespace ncclwatch::tools

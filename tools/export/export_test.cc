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

#include "tools/export/export_test_job.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

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

namespace ncclwatch::tools {
namespace {

stats::ChromeTrace ParseJson(const std::string& json) {
  stats::ChromeTrace t;
  auto st = google::protobuf::util::JsonStringToMessage(json, &t);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return t;
}

// Checks every flow of `t` steps forward in time: one "s", then "t"s, then
// one "f", none earlier than the step before it. Returns the flows.
size_t ExpectJsonFlowsInTimeOrder(const stats::ChromeTrace& t) {
  std::map<int64_t, std::vector<const stats::ChromeEvent*>> by_id;
  for (const auto& e : t.traceevents())
    if (e.cat() == "match") by_id[e.id()].push_back(&e);
  for (auto& [id, steps] : by_id) {
    int s = 0, f = 0;
    double s_ts = 0, f_ts = 0;
    for (const auto* e : steps) {
      if (e->ph() == "s") s_ts = e->ts(), ++s;
      if (e->ph() == "f") f_ts = e->ts(), ++f;
    }
    EXPECT_EQ(s, 1) << "flow " << id;
    EXPECT_EQ(f, 1) << "flow " << id;
    for (const auto* e : steps) {
      EXPECT_EQ(e->bp(), "e");
      EXPECT_GE(e->ts(), s_ts) << "flow " << id << " steps back before its start (" << e->ph() << ")";
      EXPECT_LE(e->ts(), f_ts) << "flow " << id << " steps back from its end (" << e->ph() << ")";
    }
  }
  return by_id.size();
}

// Perfetto's JSON importer drops a flow step that goes back in time; the
// old exporter ran flows from the lowest rank to the highest, and on this
// recording 21 of its 50 flows stepped back.
TEST(ExportTest, JsonFlowsNeverStepBackInTimeOnARealJob) {
  Model m;
  std::string error;
  ASSERT_TRUE(BuildModel({"testdata/gpu/skip"}, LoadOptions(), &m, &error)) << error;
  std::ostringstream out;
  WriteChromeTrace(m, out);
  const size_t flows = ExpectJsonFlowsInTimeOrder(ParseJson(out.str()));
  size_t linked = 0;
  for (const Match& mt : m.matches) {
    size_t n = 0;
    for (uint32_t oi : mt.ops) n += oi != kNone && m.ops[oi].start_ns != kNoTime;
    linked += n >= 2;
  }
  EXPECT_EQ(flows, linked);
  EXPECT_GT(flows, 40u);
}

TEST(ExportTest, FlowRunsInArrivalOrderNotRankOrder) {
  Job j("world", 4);
  const int64_t start[4] = {3'000'000, 1'000'000, 4'000'000, 2'000'000};
  for (int r = 0; r < 4; ++r) j.Add(r, "AllReduce", 0, start[r], 5'000'000);
  j.Link({0, 1, 2, 3});
  stats::ChromeTrace t = RoundTrip(j.m);
  std::map<int, std::string> phase_of_pid;
  for (const auto& e : t.traceevents())
    if (e.cat() == "match") phase_of_pid[e.pid()] = e.ph();
  EXPECT_EQ(phase_of_pid[1], "s");  // rank 1 arrived first
  EXPECT_EQ(phase_of_pid[3], "t");
  EXPECT_EQ(phase_of_pid[0], "t");
  EXPECT_EQ(phase_of_pid[2], "f");  // rank 2 last
  EXPECT_EQ(ExpectJsonFlowsInTimeOrder(t), 1u);
}

// A job of 4 ranks: seq 0 at 1 ms, seq 1 at 5 ms, seq 2 at 9 ms.
Job ThreeSteps() {
  Job j("world", 4);
  for (uint64_t k = 0; k < 3; ++k) {
    std::vector<uint32_t> ops;
    for (int r = 0; r < 4; ++r) {
      ops.push_back(static_cast<uint32_t>(j.m.ops.size()));
      j.Add(r, "AllReduce", k, 1'000'000 + static_cast<int64_t>(k) * 4'000'000 + r * 1000,
            2'000'000 + static_cast<int64_t>(k) * 4'000'000);
    }
    j.Link(ops);
  }
  return j;
}

TEST(ExportTest, WindowKeepsOverlappingOpsWholeAndTheJobsTimes) {
  Job j = ThreeSteps();
  ExportOptions o;
  o.from_ns = 1'500'000;  // in the middle of seq 0: kept whole
  o.to_ns = 5'000'500;    // seq 1 starts at 5.000 ms on rank 0, 5.001 on rank 1: ranks 0 only
  std::ostringstream out;
  const ExportCounts n = WriteChromeTrace(j.m, o, out);
  stats::ChromeTrace t = ParseJson(out.str());
  std::multiset<std::pair<int, double>> seq_ts;
  for (const auto& e : t.traceevents())
    if (e.ph() == "X") seq_ts.insert({static_cast<int>(e.args().at("seq").number_value()), e.ts()});
  EXPECT_EQ(seq_ts.count({0, 1000.0}), 1u);  // rank 0's seq 0: from its start, 1 ms on the job's timeline
  EXPECT_EQ(seq_ts.count({1, 5000.0}), 1u);  // rank 0's seq 1
  EXPECT_EQ(seq_ts.size(), 5u);              // seq 0 on 4 ranks, seq 1 on rank 0
  EXPECT_EQ(n.ops, 5u);
  EXPECT_EQ(n.procs, 4u);
  // seq 1's flow has one end in the window: no flow; seq 0's links its 4.
  EXPECT_EQ(ExpectJsonFlowsInTimeOrder(t), 1u);
}

TEST(ExportTest, RanksKeepOnlyThoseProcessesAndTheirFlows) {
  Job j = ThreeSteps();
  ExportOptions o;
  o.ranks = {0, 2};
  std::ostringstream out;
  WriteChromeTrace(j.m, o, out);
  stats::ChromeTrace t = ParseJson(out.str());
  std::set<std::string> procs;
  std::set<int> pids;
  for (const auto& e : t.traceevents()) {
    if (e.ph() == "M" && e.name() == "process_name") procs.insert(e.args().at("name").string_value());
    if (e.ph() == "X") pids.insert(e.pid());
  }
  EXPECT_EQ(procs, (std::set<std::string>{"rank 0 (node0:4000)", "rank 2 (node2:4002)"}));
  EXPECT_EQ(pids, (std::set<int>{0, 2}));
  EXPECT_EQ(ExpectJsonFlowsInTimeOrder(t), 3u);  // each seq linked between ranks 0 and 2
}

TEST(ExportTest, CutFlagsOnTheCommandLine) {
  auto run = [](std::vector<std::string> args, std::string* err_out = nullptr) {
    std::ostringstream out, err;
    args.insert(args.begin(), {"ncclwatch", "export"});
    const int status = RunCli(args, out, err);
    if (err_out) *err_out = err.str();
    return std::make_pair(status, out.str());
  };
  std::string err;
  EXPECT_EQ(run({"--format=text", "testdata/gpu/skip"}, &err).first, 2);
  EXPECT_NE(err.find("--format must be json or perfetto"), std::string::npos) << err;
  EXPECT_EQ(run({"--from", "2", "--to", "1", "testdata/gpu/skip"}, &err).first, 2);
  EXPECT_NE(err.find("--from must not be after --to"), std::string::npos) << err;
  EXPECT_EQ(run({"--ranks", "1-x", "testdata/gpu/skip"}, &err).first, 2);
  EXPECT_NE(err.find("bad --ranks: '1-x'"), std::string::npos) << err;
  EXPECT_EQ(run({"--around-finding", "--to", "3", "testdata/gpu/skip"}, &err).first, 2);
  EXPECT_EQ(run({"--around-finding", "testdata/gpu/healthy"}, &err).first, 2);
  EXPECT_NE(err.find("no finding names an operation"), std::string::npos) << err;

  // --ranks on a real job: two processes, flows between them only.
  auto [status, json] = run({"--ranks", "0,2", "testdata/gpu/skip"});
  ASSERT_EQ(status, 0);
  stats::ChromeTrace t = ParseJson(json);
  std::set<std::string> procs;
  for (const auto& e : t.traceevents())
    if (e.ph() == "M" && e.name() == "process_name") procs.insert(e.args().at("name").string_value().substr(0, 6));
  EXPECT_EQ(procs, (std::set<std::string>{"rank 0", "rank 2"}));
  EXPECT_GT(ExpectJsonFlowsInTimeOrder(t), 0u);

  // --from/--to: only what overlaps the window, on the job's timeline.
  auto [s2, cut] = run({"--from", "1.5", "--to", "2", "testdata/gpu/skip"});
  ASSERT_EQ(s2, 0);
  auto [s3, whole] = run({"testdata/gpu/skip"});
  ASSERT_EQ(s3, 0);
  size_t in_cut = 0, in_whole = 0;
  const stats::ChromeTrace cut_trace = ParseJson(cut), whole_trace = ParseJson(whole);
  for (const auto& e : cut_trace.traceevents())
    if (e.ph() == "X" && e.cat() != "gpu") {
      ++in_cut;
      EXPECT_LE(e.ts(), 2e6);
      EXPECT_GE(e.ts() + e.dur(), 1.5e6);
    }
  for (const auto& e : whole_trace.traceevents())
    if (e.ph() == "X" && e.cat() != "gpu" && e.ts() <= 2e6 && e.ts() + e.dur() >= 1.5e6) ++in_whole;
  EXPECT_EQ(in_cut, in_whole);
  EXPECT_GT(in_cut, 0u);

  // --around-finding: the hang's AllReduce #4 on every rank that reached it.
  auto [s4, around] = run({"--around-finding", "testdata/gpu/skip"}, &err);
  ASSERT_EQ(s4, 0) << err;
  EXPECT_NE(err.find("around AllReduce #4"), std::string::npos) << err;
  std::set<int> ranks_in_it;
  size_t ops = 0;
  const stats::ChromeTrace around_trace = ParseJson(around);
  for (const auto& e : around_trace.traceevents())
    if (e.ph() == "X" && e.cat() != "gpu") {
      ++ops;
      if (e.name().rfind("AllReduce", 0) == 0 && e.args().at("seq").number_value() == 4 &&
          e.args().at("comm").string_value() == "world")
        ranks_in_it.insert(static_cast<int>(e.args().at("rank").number_value()));
    }
  EXPECT_EQ(ranks_in_it, (std::set<int>{0, 1, 2}));
  size_t all = 0;
  for (const auto& e : whole_trace.traceevents()) all += e.ph() == "X" && e.cat() != "gpu";
  EXPECT_LT(ops, all) << "the window leaves out the job's earlier operations";
}

}  // namespace
}  // namespace ncclwatch::tools

// Diagnose as a whole: the verdict's order of findings, what the input
// lacked, the JSON and text views, and the command.

#include "tools/diagnose/diagnose.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/cli.h"
#include "tools/diagnose/test_job.h"

namespace ncclwatch::tools {
namespace {

using namespace diagnose_testing;  // NOLINT: the tests' own job builder

TEST(Diagnose, HealthyJob) {
  Job j;
  j.Procs(4, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 10);
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 2.0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(d.findings_size(), 0) << FormatText(d);
  EXPECT_EQ(ExitStatus(d), 0);
  EXPECT_EQ(d.severity(), report::SEVERITY_OK);
  EXPECT_EQ(d.verdict(), "OK: no problem found in 4 processes (1 communicator, 40 operations, 40 completed)");
  ASSERT_EQ(d.completed_before_hang_size(), 1);
  EXPECT_EQ(d.completed_before_hang(0).last_completed_seq(), 10u);
  EXPECT_EQ(d.completed_before_hang(0).completed_everywhere(), 10u);
}

TEST(Diagnose, MismatchComesBeforeMissingRankAndStuck) {
  Job j = MissingRankJob();  // a missing rank on 'world'
  uint32_t t = j.Comm("tp", 0x7, {0, 1, 2});
  for (uint32_t p = 0; p < 3; ++p) j.Coll(p, t, 1, "AllGather", p == 0 ? 128 : 256, 6.0, -1);
  report::Diagnosis d = Diagnose(j.Finish());
  ASSERT_GE(d.findings_size(), 2);
  EXPECT_EQ(d.findings(0).kind(), report::MISMATCH);
  EXPECT_EQ(d.findings(1).kind(), report::MISSING_RANK);
}

// Every communicator is complete, but the launcher started 8 ranks and 4
// gave files (a job whose other half used other communicators): not OK.
TEST(Diagnose, LauncherRanksWithoutFilesAreIncomplete) {
  Job j;
  j.Procs(4, 2.0);
  for (uint32_t p = 0; p < 4; ++p) j.m.procs[p].launcher_world_size = 8;
  uint32_t w = j.Comm("half", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 3);
  for (uint32_t p = 0; p < 4; ++p) j.Finalize(p, 2.0);
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(ExitStatus(d), 3) << FormatText(d);
  EXPECT_NE(d.verdict().find("but 4 of the launcher's 8 ranks given"), std::string::npos) << d.verdict();
}

TEST(Diagnose, InputIssues) {
  Job j;
  j.Procs(3, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2});
  j.m.comms[w].nranks = 4;
  j.m.comms[w].proc_of_rank.push_back(kNone);
  j.m.procs[2].drops.write_failed = 1234;
  j.m.procs[2].drops.last_write_error = "No space left on device";
  j.m.procs[1].cut_tail = true;
  j.m.procs[1].issues.push_back("/traces/node0-1001.ncclwatch: offset 4096: cut tail: the last record's length is incomplete");
  j.m.errors.push_back("cannot open /traces/x.ncclwatch: Permission denied");
  for (uint32_t p = 0; p < 3; ++p) j.Finalize(p, 2.0);
  report::Diagnosis d = Diagnose(j.Finish());
  // Input notes make the evidence incomplete: never OK, and the first line says why.
  EXPECT_EQ(ExitStatus(d), 3) << FormatText(d);
  // Failed writes first: they explain what the files lack, and what it
  // means (a full disk) is said.
  EXPECT_EQ(d.verdict().rfind("INCOMPLETE: no problem found in the 3 processes given, but rank 2 lost 1,234 records in "
                              "failed writes (No space left on device: the disk was full); the files hold no "
                              "operation; and 2 more (Input): cannot tell",
                              0),
            0u)
      << d.verdict();
  EXPECT_EQ(d.incomplete_size(), 4);
  std::string text = FormatText(d);
  EXPECT_NE(text.find("rank 2 lost 1,234 events: 1,234 in failed writes (No space left on device: the disk was full)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cut tail: the last record's length is incomplete (normal for a killed process)"), std::string::npos);
  EXPECT_NE(text.find("comm 'world' (4 ranks): no trace file for its rank 3 (3 of 4 given)"), std::string::npos);
  EXPECT_NE(text.find("cannot open /traces/x.ncclwatch: Permission denied"), std::string::npos);
  int drops = 0;
  for (const auto& i : d.input_issues())
    if (i.kind() == report::InputIssue::DROPS) {
      ++drops;
      EXPECT_EQ(i.lost_events(), 1234u);
    }
  EXPECT_EQ(drops, 1);
}

// What a windowed reader (ncclwatch watch) let go once every rank had
// finished it counts in the totals; what it let go before makes the
// evidence incomplete, and the first line says so.
TEST(Diagnose, OperationsAWindowLetGo) {
  Job j;
  j.Procs(4, 2.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 10);
  for (uint32_t p = 0; p < 4; ++p) {
    j.Finalize(p, 2.0);
    j.m.procs[p].settled_ops = 90;
    j.m.procs[p].settled_completed = 90;
  }
  j.m.comms[w].settled_colls = 90;
  report::Diagnosis d = Diagnose(j.Finish());
  EXPECT_EQ(ExitStatus(d), 0) << FormatText(d);
  EXPECT_EQ(d.verdict(), "OK: no problem found in 4 processes (1 communicator, 400 operations, 400 completed)");
  EXPECT_EQ(d.operations(), 400u);
  ASSERT_EQ(d.completed_before_hang_size(), 1);
  EXPECT_EQ(d.completed_before_hang(0).completed_everywhere(), 100u);
  EXPECT_NE(FormatText(d).find("watch kept a recent window: it let go of 360 operations"), std::string::npos);

  j.m.procs[1].cut_ops = 7;
  d = Diagnose(j.m);
  EXPECT_EQ(ExitStatus(d), 3) << FormatText(d);
  EXPECT_EQ(d.verdict(), "INCOMPLETE: no problem found in the 4 processes given, but watch let go of 7 operations of "
                         "rank 1 before every rank had finished them: cannot tell whether the job was healthy");
}

TEST(Diagnose, JsonRoundTrip) {
  Job j = MissingRankJob();
  j.Finalize(3, 5.2);
  report::Diagnosis d = Diagnose(j.Finish());
  std::string json = FormatJson(d);
  EXPECT_NE(json.find("\"verdict\": \"HANG: rank 3 never joined"), std::string::npos) << json;
  EXPECT_NE(json.find("\"kind\": \"MISSING_RANK\""), std::string::npos) << json;
  report::Diagnosis back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &back).ok());
  EXPECT_EQ(back.SerializeAsString(), d.SerializeAsString());
  EXPECT_EQ(FormatText(back), FormatText(d));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The whole text of one hang. To regenerate:
//   bazel test //tools/diagnose:diagnose_test --test_env=UPDATE_GOLDEN=$PWD/tools/diagnose/testdata
TEST(Diagnose, GoldenTextOfAHang) {
  Job j = MissingRankJob();
  j.m.procs[3].last_ns = Ns(5.0);
  j.m.procs[3].last_heartbeat_ns = Ns(4.9);
  j.m.procs[3].cut_tail = true;
  j.m.procs[3].issues.push_back("/traces/node0-1003.ncclwatch: offset 8190: cut tail: the last record's length is incomplete");
  StuckReport r;
  r.time_ns = Ns(11.0);
  r.threshold_sec = 6;
  StuckOp so;
  so.op = j.m.procs[0].ops.back();
  so.comm = 0;
  so.seq = 12;
  so.func = j.m.Intern("AllReduce");
  so.age_ns = 6 * kSec;
  so.nchannels = 2;
  so.kernel_started = 2;
  so.kernel_stopped = 0;
  ProxyState x;
  x.channel = 0;
  x.peer = 3;
  x.nsteps = 8;
  x.last_step = 0;
  x.last_state = 10;
  x.last_update_ns = Ns(5.0);
  so.proxy = {x};
  r.ops.push_back(so);
  j.m.procs[0].stucks.push_back(r);
  report::Diagnosis d = Diagnose(j.Finish());
  const std::string text = FormatText(d);
  EXPECT_EQ(FirstLine(text), d.verdict());
  if (const char* dir = getenv("UPDATE_GOLDEN")) {
    std::ofstream(std::string(dir) + "/hang.txt") << text;
  }
  EXPECT_EQ(text, ReadFile("tools/diagnose/testdata/hang.txt"));
}

TEST(DiagnoseCommand, Usage) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", "--help"}, out, err), 0);
  EXPECT_NE(out.str().find("usage: ncclwatch diagnose"), std::string::npos);
  std::ostringstream out2, err2;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", "--bogus"}, out2, err2), 2);
  EXPECT_NE(err2.str().find("unknown option '--bogus'"), std::string::npos);
  std::ostringstream out3, err3;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose"}, out3, err3), 2);
  std::ostringstream out4, err4;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", "--format=xml", "x"}, out4, err4), 2);
}

TEST(DiagnoseCommand, UnusableInputIsExit2) {
  const std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/garbage.ncclwatch";
  std::ofstream(path) << "this is not a trace file";
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", path}, out, err), 2);
  EXPECT_NE(err.str().find(path), std::string::npos) << err.str();
  std::ostringstream jout, jerr;
  EXPECT_EQ(RunCli({"ncclwatch", "diagnose", "--format=json", "/nonexistent/dir/x.ncclwatch"}, jout, jerr), 2);
  report::Diagnosis d;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(jout.str(), &d).ok()) << jout.str();
  EXPECT_EQ(d.exit_status(), 2);
  EXPECT_EQ(ExitStatus(d), 2);
  EXPECT_NE(d.verdict().find("UNUSABLE INPUT: "), std::string::npos);
}

}  // namespace
}  // namespace ncclwatch::tools

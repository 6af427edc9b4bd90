// The command line's conventions, the same for every subcommand: --flag=VALUE
// and --flag VALUE, -o for --out, a subcommand refuses another's flags, a
// repeatable flag accumulates, and every run starts from the defaults.

#include "tools/cli.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace ncclwatch::tools {
namespace {

const char kSkip[] = "testdata/gpu/skip";  // a real hang, 4 ranks

struct Result {
  int status;
  std::string out, err;
};
Result Nw(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ncclwatch"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::ostringstream out, err;
  const int status = RunCli(argv, out, err);
  return {status, out.str(), err.str()};
}

std::string TempPath(const std::string& name) {
  const char* tmp = getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Cli, AFlagsValueMayFollowItOrAnEqualsSign) {
  const Result eq = Nw({"merge", "--format=json", kSkip});
  const Result sep = Nw({"merge", "--format", "json", kSkip});
  ASSERT_EQ(eq.status, 0) << eq.err;
  EXPECT_EQ(sep.status, 0) << sep.err;
  EXPECT_EQ(sep.out, eq.out);
  EXPECT_EQ(eq.out.rfind("{", 0), 0u);
  const Result wait_eq = Nw({"diagnose", "--min-wait=3", kSkip});
  const Result wait_sep = Nw({"diagnose", "--min-wait", "3", kSkip});
  EXPECT_EQ(wait_eq.status, 1);
  EXPECT_EQ(wait_sep.status, 1);
  EXPECT_EQ(wait_sep.out, wait_eq.out);
}

TEST(Cli, DashOIsOutForEveryCommandThatWrites) {
  const std::string merged = TempPath("merge.txt"), exported = TempPath("export.json");
  const Result m = Nw({"merge", "-o", merged, kSkip});
  ASSERT_EQ(m.status, 0) << m.err;
  EXPECT_TRUE(m.out.empty());
  EXPECT_EQ(ReadFile(merged), Nw({"merge", kSkip}).out);
  const Result e = Nw({"export", "-o", exported, kSkip});
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_EQ(ReadFile(exported).rfind("{\"traceEvents\":[", 0), 0u);
}

// A file that cannot be written: the message says why, for every command
// that writes one.
TEST(Cli, CannotWriteSaysWhy) {
  const std::string nowhere = TempPath("no-such-folder/out");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"diagnose", "-o", nowhere, kSkip}, {"merge", "-o", nowhere, kSkip},
        {"export", "-o", nowhere, kSkip}, {"summarize", "-o", nowhere, kSkip}}) {
    const Result r = Nw(args);
    EXPECT_EQ(r.status, 2) << args[0];
    EXPECT_NE(r.err.find("cannot write " + nowhere + ": No such file or directory\n"), std::string::npos)
        << args[0] << ": " << r.err;
  }
}

// --ranks of a rank the job lacks: an error naming the ranks it has, not
// an empty timeline.
TEST(Cli, ExportOfRanksTheJobLacksIsAnError) {
  const Result r = Nw({"export", "--ranks", "9", kSkip});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("ncclwatch export: --ranks: no rank 9: the job's ranks are 0-3\n"), std::string::npos) << r.err;
  EXPECT_EQ(Nw({"export", "--ranks", "1-2", kSkip}).status, 0);
}

TEST(Cli, SummarizeThenDiagnoseTheSummary) {
  const std::string sum = TempPath("node0.ncclsummary");
  const Result s = Nw({"summarize", "--window", "2", "-o", sum, kSkip});
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(s.out.rfind("ncclwatch summarize: 4 processes, ", 0), 0u) << s.out;
  const Result full = Nw({"diagnose", kSkip}), from_summary = Nw({"diagnose", sum});
  EXPECT_EQ(from_summary.status, full.status);
  EXPECT_EQ(from_summary.out.substr(0, from_summary.out.find('\n')), full.out.substr(0, full.out.find('\n')));
  // export draws every operation: it refuses a summary.
  const Result e = Nw({"export", sum});
  EXPECT_EQ(e.status, 2);
  EXPECT_NE(e.err.find("is a per-node summary"), std::string::npos) << e.err;
  // stats reads its stats rows: the traces' rows, its quantiles marked.
  const Result st = Nw({"stats", sum}), st_full = Nw({"stats", kSkip});
  ASSERT_EQ(st.status, 0) << st.err;
  EXPECT_EQ(std::count(st.out.begin(), st.out.end(), '\n'), std::count(st_full.out.begin(), st_full.out.end(), '\n') + 1);
  EXPECT_NE(st.out.find("come from per-node summaries' sketches"), std::string::npos) << st.out;
  // check judges the rows as from the traces; its gate also takes
  // diagnose's verdict, which from a window of 2 is INCOMPLETE.
  const std::string base = TempPath("base.json");
  ASSERT_EQ(Nw({"stats", "--format=json", "-o", base, kSkip}).status, 0);
  const Result c = Nw({"check", "--baseline", base, sum}), c_full = Nw({"check", "--baseline", base, kSkip});
  EXPECT_EQ(c.status, c_full.status) << c.err;
  EXPECT_EQ(c.out.substr(0, c.out.find('\n')), c_full.out.substr(0, c_full.out.find('\n')));
  EXPECT_NE(c.out.find("run: quantiles and bandwidths marked '~' come from per-node summaries' sketches"),
            std::string::npos)
      << c.out;
  const Result cj = Nw({"check", "--format=json", "--baseline", base, sum});
  EXPECT_NE(cj.out.find("\"runNotes\": ["), std::string::npos) << cj.out;
  // Where to write is required; a window of 0 is a usage error.
  EXPECT_EQ(Nw({"summarize", kSkip}).status, 2);
  EXPECT_NE(Nw({"summarize", kSkip}).err.find("--out FILE (-o FILE) is required"), std::string::npos);
  EXPECT_EQ(Nw({"summarize", "--window", "0", "-o", sum, kSkip}).status, 2);
}

// The second round from the command line: diagnose --refine-args prints
// summarize's --collectives argument, and the summary made with it gives
// the traces' first line (testdata/gpu/dtype at a window of 2 operations:
// the first round cannot settle the mismatched AllReduce).
TEST(Cli, RefineArgsAskSummarizeForTheOperation) {
  const char kDtype[] = "testdata/gpu/dtype";
  const std::string first = TempPath("dtype1.ncclsummary"), second = TempPath("dtype2.ncclsummary");
  ASSERT_EQ(Nw({"summarize", "--window", "2", "-o", first, kDtype}).status, 0);
  const Result ask = Nw({"diagnose", "--refine-args", first});
  ASSERT_EQ(ask.status, 0) << ask.err;
  ASSERT_EQ(ask.out.rfind("--collectives=0x", 0), 0u) << ask.out;
  const std::string arg = ask.out.substr(0, ask.out.find('\n'));
  const Result s = Nw({"summarize", "--window", "2", arg, "-o", second, kDtype});
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_NE(s.out.find(" of them kept as asked by --collectives)"), std::string::npos) << s.out;
  // dump shows what was asked and kept, and the records themselves.
  const Result d = Nw({"dump", second});
  EXPECT_NE(d.out.find(" checkpoints, asked #"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find(" let-go collectives kept as asked\n"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("\n    asked #"), std::string::npos) << d.out;
  const Result full = Nw({"diagnose", kDtype}), refined = Nw({"diagnose", second});
  EXPECT_EQ(refined.out.substr(0, refined.out.find('\n')), full.out.substr(0, full.out.find('\n')));
  EXPECT_EQ(refined.status, full.status);
  // Nothing more to ask, nor of the traces themselves.
  const Result again = Nw({"diagnose", "--refine-args", second}), traces = Nw({"diagnose", "--refine-args", kDtype});
  EXPECT_EQ(again.status, 0);
  EXPECT_EQ(again.out, "");
  EXPECT_EQ(traces.status, 0);
  EXPECT_EQ(traces.out, "");
  EXPECT_EQ(Nw({"diagnose", "--refine-args", TempPath("no-such-folder")}).status, 2);
  // Bad values name the flag and the problem.
  const Result name = Nw({"summarize", "--collectives=world:1-64", "-o", second, kDtype});
  EXPECT_EQ(name.status, 2);
  EXPECT_NE(name.err.find("bad --collectives: 'world:1-64': the communicator is its hash in hex"), std::string::npos)
      << name.err;
  const Result wide = Nw({"summarize", "--collectives", "0x12:1-100", "-o", second, kDtype});
  EXPECT_EQ(wide.status, 2);
  EXPECT_NE(wide.err.find("at most 64 collectives per range"), std::string::npos) << wide.err;
  // A communicator no rank here has (another node's, or a typo): said.
  const Result other = Nw({"summarize", "--collectives=0x12:1-64", "-o", second, kDtype});
  EXPECT_EQ(other.status, 0) << other.err;
  EXPECT_NE(other.err.find("no rank here is a member of communicator 0x0000000000000012"), std::string::npos)
      << other.err;
}

TEST(Cli, BadValuesAndOtherCommandsFlagsAreUsageErrors) {
  const Result bad = Nw({"diagnose", "--min-wait=abc", kSkip});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("bad --min-wait 'abc'"), std::string::npos) << bad.err;
  const Result negative = Nw({"diagnose", "--min-wait=-1", kSkip});
  EXPECT_EQ(negative.status, 2);
  const Result foreign = Nw({"stats", "--baseline", "b.json", kSkip});
  EXPECT_EQ(foreign.status, 2);
  EXPECT_NE(foreign.err.find("unknown option '--baseline'"), std::string::npos) << foreign.err;
  const Result missing = Nw({"merge", "--format"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--format needs a value"), std::string::npos) << missing.err;
  const Result allow = Nw({"check", "--baseline", "b.json", "--allow-incomplete=all", kSkip});
  EXPECT_EQ(allow.status, 2);
  EXPECT_NE(allow.err.find("--allow-incomplete takes cuda-graphs"), std::string::npos) << allow.err;
  EXPECT_EQ(Nw({"frobnicate", kSkip}).status, 2);
  EXPECT_EQ(Nw({}).status, 2);
}

TEST(Cli, EveryRunStartsFromTheDefaults) {
  const Result json = Nw({"diagnose", "--json", kSkip});
  ASSERT_EQ(json.status, 1);
  EXPECT_EQ(json.out.rfind("{", 0), 0u);
  const Result text = Nw({"diagnose", kSkip});
  EXPECT_EQ(text.status, 1);
  EXPECT_EQ(text.out.rfind("HANG: ", 0), 0u) << text.out.substr(0, 80);
}

TEST(Cli, ARepeatableFlagAccumulates) {
  const std::string baseline = TempPath("base.json");
  const Result stats = Nw({"stats", "--format=json", "-o", baseline, kSkip});
  EXPECT_EQ(stats.status, 0) << stats.err;  // -o for every command with a report
  EXPECT_EQ(ReadFile(baseline), Nw({"stats", "--format=json", kSkip}).out);
  // The second --tolerance is read as well as the first: its bad metric is named.
  const Result r = Nw({"check", "--baseline", baseline, "--tolerance", "latency_p50=50", "--tolerance", "nope=1", kSkip});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nope"), std::string::npos) << r.err;
}

TEST(Cli, HelpForEachCommand) {
  for (const char* cmd : {"diagnose", "merge", "export", "stats", "check", "dump", "watch"}) {
    const Result h = Nw({cmd, "--help"});
    EXPECT_EQ(h.status, 0) << cmd;
    EXPECT_EQ(h.out.rfind(std::string("usage: ncclwatch ") + cmd, 0), 0u) << h.out;
  }
}

TEST(Cli, VersionFromTheTopAndFromEveryCommand) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--version"}, {"diagnose", "--version"}, {"dump", "--version"}}) {
    Result r = Nw(args);
    EXPECT_EQ(r.status, 0) << args.back();
    EXPECT_EQ(r.out.rfind("ncclwatch 0.", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("(trace schema 1)"), std::string::npos) << r.out;
  }
}

TEST(Cli, DumpSaysWhenAFileIsNotATrace) {
  // A folder: its files, found recursively, read whole.
  Result r = Nw({"dump", "--summary", kSkip});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("== testdata/gpu/skip/"), std::string::npos);
  // Random bytes are not a trace: exit 1, with the offset where it went wrong.
  const std::string junk = TempPath("junk.ncclwatch");
  {
    std::ofstream f(junk, std::ios::binary);
    unsigned x = 12345;
    for (int i = 0; i < 4096; ++i) {
      x = x * 1103515245u + 12345u;
      f.put(static_cast<char>(x >> 16));
    }
  }
  r = Nw({"dump", "--summary", junk});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("offset"), std::string::npos) << r.out;
  // Not a regular file: exit 2.
  r = Nw({"dump", "/dev/null"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("/dev/null: not a regular file (a character device)"), std::string::npos) << r.err;
}

TEST(Cli, JobPicksOneJobOfSeveral) {
  // The recordings carry no job id: --job names none of them.
  Result r = Nw({"diagnose", "--job", "4242", kSkip});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no file of job '4242' (the files record no job id)"), std::string::npos) << r.err;
  // Two recordings of different jobs in one list: refused, each named.
  r = Nw({"stats", kSkip, "testdata/gpu/healthy"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the files hold 2 jobs (processes that share no communicator)"), std::string::npos) << r.err;
}

TEST(Cli, CheckReadsARegularBaselineOnly) {
  // A FIFO would block the gate forever, /dev/zero grow it to gigabytes.
  const std::string fifo = TempPath("baseline.fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  Result r = Nw({"check", "--baseline", fifo, kSkip});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not a regular file (a FIFO)"), std::string::npos) << r.err;
  r = Nw({"check", "--baseline", "/dev/zero", kSkip});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not a regular file (a character device)"), std::string::npos) << r.err;
}

TEST(Cli, CheckOnAHangFailsOncePerRootCauseWithStableNames) {
  const std::string base = TempPath("healthy-base.json");
  Result s = Nw({"stats", "--format=json", "-o", base, "testdata/gpu/healthy"});
  ASSERT_EQ(s.status, 0) << s.err;
  const std::string junit = TempPath("skip.xml");
  Result r = Nw({"check", "--baseline", base, "--junit", junit, kSkip});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out.rfind("FAIL: ", 0), 0u) << r.out;  // the verdict is the first line
  const std::string xml = ReadFile(junit);
  size_t failures = 0;
  for (size_t at = xml.find("<failure"); at != std::string::npos; at = xml.find("<failure", at + 1))
    failures += xml.compare(xml.rfind("<testcase", at), 30, "<testcase classname=\"diagnose.") == 0;
  EXPECT_EQ(failures, 1u) << xml;  // one hang, one failure: what it blocked is not a case
  EXPECT_NE(xml.find("name=\"MISSING_RANK AllReduce #4 on &apos;world&apos; (4 ranks) by rank 3\""),
            std::string::npos)
      << xml;
}

// A recording whose files are all finalized: watch's first poll has the
// verdict, and it is diagnose's, word for word, in either format.
TEST(Cli, WatchOnAFinishedJobIsDiagnose) {
  for (const char* format : {"--format=text", "--format=json"}) {
    const Result w = Nw({"watch", format, kSkip});
    const Result d = Nw({"diagnose", format, kSkip});
    EXPECT_EQ(w.status, 1) << w.err;
    EXPECT_EQ(w.status, d.status);
    EXPECT_EQ(w.out, d.out);
  }
}

// Files still being written (each cut mid-record): --timeout ends the
// watch with the verdict on what was read, as diagnose gives it, and that
// is never OK: no process finished.
TEST(Cli, WatchTimeoutGivesTheVerdictOnWhatWasRead) {
  const std::string dir = TempPath("watch_live");
  mkdir(dir.c_str(), 0755);
  int n = 0;
  for (const char* name : {"vm-868-1795300948894", "vm-869-1795300948895", "vm-871-1795300948895",
                           "vm-872-1795300948893"}) {
    const std::string bytes = ReadFile(std::string("testdata/gpu/healthy/") + name + ".ncclwatch");
    ASSERT_GT(bytes.size(), 1500u);
    std::ofstream(dir + "/" + name + ".ncclwatch", std::ios::binary) << bytes.substr(0, 1500 - 7 * n++);
  }
  const Result w = Nw({"watch", "--timeout", "0.2", "--interval", "0.05", dir});
  const Result d = Nw({"diagnose", dir});
  EXPECT_EQ(w.status, d.status) << w.err;
  EXPECT_EQ(w.out, d.out);
  EXPECT_EQ(w.status, 3) << w.out;
  EXPECT_EQ(w.out.rfind("INCOMPLETE: no problem found in the 4 processes given, but the files of ranks 0-3 end "
                        "mid-record without a finalize",
                        0),
            0u)
      << w.out;
  EXPECT_NE(w.err.find("ncclwatch watch: watching 4 files (4 processes)"), std::string::npos) << w.err;
  EXPECT_NE(w.err.find("--timeout 0.2 s: the verdict on what was read"), std::string::npos) << w.err;
}

// One name for one operation: export's stuck-report instants give a p2p
// op the number the findings and merge give it (its order between the
// pair), never the report's NCCL counter (#0).
TEST(Cli, ExportNamesStuckOperationsAsDiagnoseDoes) {
  const Result e = Nw({"export", "testdata/gpu/send-no-recv"});
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_NE(e.out.find("Send on world #5: in flight"), std::string::npos);
  EXPECT_EQ(e.out.find("Send on world #0:"), std::string::npos);
  EXPECT_EQ(e.out.find("Recv on world #0:"), std::string::npos);
}

TEST(Cli, WatchRefusesBadFlagsAndPaths) {
  Result r = Nw({"watch", "--interval", "0", kSkip});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--interval must be above 0 s"), std::string::npos) << r.err;
  r = Nw({"watch", "--settle=0", kSkip});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--settle must be 1 or more"), std::string::npos) << r.err;
  r = Nw({"watch", "--window-ops=-5", kSkip});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad --window-ops '-5'"), std::string::npos) << r.err;
  r = Nw({"watch", "--format=xml", kSkip});
  EXPECT_EQ(r.status, 2);
  r = Nw({"watch", "--baseline", "b.json", kSkip});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown option '--baseline'"), std::string::npos) << r.err;
  // A path that is not there is a mistake, said at once; in JSON too.
  r = Nw({"watch", "/nonexistent/traces"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "ncclwatch watch: cannot open /nonexistent/traces: No such file or directory\n");
  r = Nw({"watch", "--json", "/nonexistent/traces"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("UNUSABLE INPUT: cannot open /nonexistent/traces"), std::string::npos) << r.out;
  // Files that will never make one job: said at once when they are all
  // finalized, as diagnose says it.
  r = Nw({"watch", kSkip, "testdata/gpu/healthy"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the files hold 2 jobs (processes that share no communicator)"), std::string::npos) << r.err;
  r = Nw({"watch", "/dev/null"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("/dev/null: not a regular file (a character device)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ncclwatch::tools

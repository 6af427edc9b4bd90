// ModelLoader fed records one at a time: the same model as the files read
// whole, a file ended mid-way, two files of one job, a file without its
// header, and windows of files.

#include "tools/model/loader.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tools/model/model.h"
#include "tools/reader/reader.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

// A 4-rank job whose rank 3 skips AllReduce #30 (the others hang in it):
// completions folded and separate, heartbeats, stuck reports.
std::vector<std::pair<std::string, std::string>> HungJob() {
  testing::JobSpec spec;
  spec.nranks = 4;
  spec.ncolls = 40;
  spec.stuck_sec = 2;
  spec.op_hook = [](int r, int k, testing::OpPlan& p) {
    if (k % 3 == 0) p.opts.completion = testing::Completion::kSeparate;
    if (r == 3 && k == 30) p.skip = true;
  };
  std::vector<std::pair<std::string, std::string>> files;
  for (const testing::TraceBuilder& b : testing::BuildJob(spec)) files.push_back({b.FileName(), b.Bytes()});
  return files;
}

// Everything the loader sets, as text: two models that print the same are
// the same to every analysis.
std::string Describe(const Model& m) {
  std::string s;
  auto t = [](int64_t v) { return std::to_string(v); };
  for (const Proc& p : m.procs) {
    s += "proc " + p.path + " " + p.host + " pid " + t(p.pid) + " rank " + t(p.launcher_rank) + " " + t(p.first_ns) +
         ".." + t(p.last_ns) + " hb " + t(p.last_heartbeat_ns) + "/" + t(p.heartbeats) + " stucks " +
         t(static_cast<int64_t>(p.stucks.size())) + " ops " + t(static_cast<int64_t>(p.ops.size())) +
         (p.finalized ? " finalized" : "") + (p.clean ? " clean" : "") + (p.cut_tail ? " cut" : "") +
         (p.damaged ? " damaged@" + t(static_cast<int64_t>(p.damaged_at)) : "") + (p.damaged_end ? " end" : "") +
         " lost " + t(static_cast<int64_t>(p.drops.lost())) + "\n";
    for (const std::string& i : p.issues) s += "  issue " + i + "\n";
    for (uint32_t oi : p.ops) s += "  op " + t(oi) + "\n";
  }
  for (const Op& o : m.ops)
    s += "op " + t(o.proc) + "/" + t(o.comm) + "/" + t(o.rank) + " " + m.Str(o.func) + " " + m.Str(o.datatype) + " #" +
         t(static_cast<int64_t>(o.seq)) + " n " + t(static_cast<int64_t>(o.count)) + " state " +
         t(static_cast<int>(o.state)) + " " + t(o.start_ns) + " " + t(o.done_ns) + " gpu " + t(o.gpu_start_ns) + "+" +
         t(o.gpu_duration_ns) + " idx " + t(o.index) + (o.ended_by_abort ? " abort" : "") +
         (o.completion_lost ? " lost" : "") + (o.completion_maybe_lost ? " maybe" : "") +
         (o.suspect ? " suspect" : "") + "\n";
  for (const Comm& c : m.comms) {
    s += "comm " + c.Label() + " members";
    for (const CommMember& mem : c.members) s += " " + t(mem.proc) + ":" + t(mem.rank) + "@" + t(mem.finalize_ns);
    s += "\n";
  }
  for (const std::string& e : m.errors) s += "error " + e + "\n";
  for (const std::string& n : m.notes) s += "note " + n + "\n";
  for (const std::string& h : m.hosts) s += "host " + h + "\n";
  return s;
}

Model FromBytes(const std::vector<std::pair<std::string, std::string>>& files, const LoadOptions& opts = {}) {
  Model m;
  std::string error;
  EXPECT_TRUE(LoadModelFromBytes(files, opts, &m, &error)) << error;
  return m;
}

// Each file's records fed one at a time, as TraceReader reads them; `keep`
// says which of a file's records (by their index) are fed.
Model Fed(const std::vector<std::pair<std::string, std::string>>& files, const LoadOptions& opts = {},
          bool (*keep)(const trace::Record&, int) = nullptr) {
  ModelLoader loader(opts);
  for (const auto& [name, bytes] : files) {
    TraceReader reader;
    reader.OpenBytes(name, bytes);
    loader.BeginFile(name);
    trace::Record rec;
    uint64_t offset = 0;
    for (int i = 0; reader.Next(&rec, &offset); ++i)
      if (keep == nullptr || keep(rec, i)) loader.Add(rec, offset);
    EXPECT_TRUE(loader.EndFile(reader.cut_tail(), reader.issues()));
  }
  Model m;
  std::string error;
  EXPECT_TRUE(loader.Finish(&m, &error)) << error;
  return m;
}

TEST(ModelLoader, RecordsFedOneAtATimeMakeTheModelOfTheFiles) {
  const auto files = HungJob();
  const Model fed = Fed(files);
  ASSERT_EQ(fed.procs.size(), 4u);
  EXPECT_GT(fed.ops.size(), 150u);
  EXPECT_FALSE(fed.procs[0].stucks.empty());  // the hang's reports were read
  EXPECT_EQ(Describe(fed), Describe(FromBytes(files)));
}

TEST(ModelLoader, AFileEndedMidWayIsACutTail) {
  auto files = HungJob();
  // Rank 0's file cut in the middle of a record: what a killed process leaves.
  std::string& bytes = files[0].second;
  TraceReader probe;
  probe.OpenBytes("probe", bytes);
  trace::Record rec;
  uint64_t offset = 0, cut = 0;
  for (int i = 0; probe.Next(&rec, &offset) && i < 60; ++i) cut = offset;
  bytes.resize(cut + 3);

  ModelLoader loader{LoadOptions()};
  for (const auto& [name, data] : files) {
    TraceReader reader;
    reader.OpenBytes(name, data);
    ASSERT_TRUE(loader.Read(&reader));
  }
  Model m;
  std::string error;
  ASSERT_TRUE(loader.Finish(&m, &error)) << error;
  const Proc& p = m.procs[0];
  EXPECT_TRUE(p.cut_tail);
  EXPECT_FALSE(p.damaged);  // a cut tail is how a killed process's file ends
  EXPECT_LT(p.ops.size(), m.procs[1].ops.size());
  ASSERT_FALSE(p.issues.empty());
  EXPECT_NE(p.issues.back().find("offset " + std::to_string(cut) + ": cut tail"), std::string::npos) << p.issues.back();
  EXPECT_EQ(Describe(m), Describe(FromBytes(files)));
}

TEST(ModelLoader, TwoFilesOfOneJobShareTheirCommunicator) {
  auto files = HungJob();
  files.resize(2);
  Model m = Fed(files);
  ASSERT_EQ(m.procs.size(), 2u);
  ASSERT_EQ(m.comms.size(), 1u);
  EXPECT_EQ(m.comms[0].members.size(), 2u);
  EXPECT_EQ(m.comms[0].nranks, 4);
  MatchOps(&m);
  size_t both = 0;
  for (const Match& mt : m.matches)
    both += mt.ops.size() >= 2 && mt.ops[0] != kNone && mt.ops[1] != kNone;
  EXPECT_EQ(both, 40u);  // every collective, matched between ranks 0 and 1
}

TEST(ModelLoader, AFileWithoutItsHeaderIsNoTrace) {
  auto files = HungJob();
  // Rank 1's records without its header; the others whole.
  auto no_header = [](const trace::Record& r, int) { return !r.has_header(); };
  for (bool keep_going : {true, false}) {
    LoadOptions opts;
    opts.keep_going = keep_going;
    ModelLoader loader(opts);
    bool going = true;
    for (size_t f = 0; f < files.size() && going; ++f) {
      TraceReader reader;
      reader.OpenBytes(files[f].first, files[f].second);
      loader.BeginFile(files[f].first);
      trace::Record rec;
      uint64_t offset = 0;
      for (int i = 0; reader.Next(&rec, &offset); ++i)
        if (f != 1 || no_header(rec, i)) loader.Add(rec, offset);
      going = loader.EndFile(reader.cut_tail(), reader.issues());
      EXPECT_EQ(going, keep_going || f != 1) << f;
    }
    Model m;
    std::string error;
    EXPECT_EQ(loader.Finish(&m, &error), keep_going);
    ASSERT_EQ(m.errors.size(), 1u);
    EXPECT_EQ(m.errors[0], files[1].first + ": no process header; not an ncclwatch trace file");
    if (keep_going) {
      EXPECT_EQ(m.procs.size(), 3u);  // the file added nothing
      for (const Comm& c : m.comms)
        for (const CommMember& mem : c.members) EXPECT_LT(mem.proc, 3u);
    } else {
      EXPECT_EQ(error, m.errors[0]);
    }
  }
}

TEST(ModelLoader, AFileThatCannotBeReadStopsTheLoadOnlyWithoutKeepGoing) {
  for (bool keep_going : {true, false}) {
    LoadOptions opts;
    opts.keep_going = keep_going;
    ModelLoader loader(opts);
    loader.AddError("a listing error");  // never stops the load
    EXPECT_EQ(loader.FileError("cannot open x: gone"), keep_going);
    TraceReader reader;
    reader.OpenBytes(HungJob()[0].first, HungJob()[0].second);
    loader.Read(&reader);
    Model m;
    std::string error;
    EXPECT_EQ(loader.Finish(&m, &error), keep_going) << error;
    if (!keep_going) {
      EXPECT_EQ(error, "cannot open x: gone");
    }
    EXPECT_EQ(m.errors.size(), 2u);
  }
}

TEST(ModelLoader, WindowsOfFilesSkipTheChecksOfAWholeFile) {
  // Every rank's AllReduce #5 to #9 left out, as a window that let them go
  // keeps its other records: numbered out of line in a whole file.
  auto gap = [](const trace::Record& r, int) { return !r.has_op() || r.op().seq() < 5 || r.op().seq() > 9; };
  auto files = HungJob();
  LoadOptions windows;
  windows.windows = true;
  const Model window = Fed(files, windows, gap);
  const Model whole = Fed(files, LoadOptions(), gap);
  EXPECT_FALSE(window.procs[0].damaged);
  EXPECT_TRUE(whole.procs[0].damaged);
  EXPECT_EQ(window.ops.size(), whole.ops.size());
}

TEST(ModelLoader, FinishWithoutAFileSaysSo) {
  ModelLoader loader{LoadOptions()};
  Model m;
  std::string error;
  EXPECT_FALSE(loader.Finish(&m, &error));
  EXPECT_EQ(error, "no trace files given");
}

}  // namespace
}  // namespace ncclwatch::tools

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

// Where a process's completions come from: the header's CompletionSource,
// or, in files written before it, the word "events" in its completions.
TEST(ModelLoader, TheCompletionSourceIsTheHeadersEnumOrItsOlderWords) {
  struct Case {
    trace::CompletionSource source;
    const char* words;
    bool events;
  };
  const Case cases[] = {
      {trace::COMPLETION_SOURCE_CUDA_EVENTS, "", true},
      {trace::COMPLETION_SOURCE_KERNEL_CHANNELS, "events", false},
      {trace::COMPLETION_SOURCE_UNSPECIFIED, "events", true},
      {trace::COMPLETION_SOURCE_UNSPECIFIED, "channels (why)", false},
  };
  for (const Case& c : cases) {
    ModelLoader loader{LoadOptions()};
    loader.BeginFile("f.ncclwatch");
    trace::Record r;
    trace::ProcessHeader* h = r.mutable_header();
    h->set_hostname("h");
    h->set_pid(1);
    h->set_completion_source(c.source);
    h->set_completions(c.words);
    loader.Add(r, 0);
    r.Clear();
    trace::CommInit* ci = r.mutable_comm_init();
    ci->set_comm(1);
    ci->set_comm_hash(7);
    ci->set_nranks(1);
    loader.Add(r, 10);
    ASSERT_TRUE(loader.EndFile(false, {}));
    Model m;
    std::string error;
    ASSERT_TRUE(loader.Finish(&m, &error)) << error;
    ASSERT_EQ(m.procs.size(), 1u);
    EXPECT_EQ(m.procs[0].event_completions, c.events) << c.source << " " << c.words;
  }
}

TEST(ModelLoader, FinishWithoutAFileSaysSo) {
  ModelLoader loader{LoadOptions()};
  Model m;
  std::string error;
  EXPECT_FALSE(loader.Finish(&m, &error));
  EXPECT_EQ(error, "no trace files given");
}

// Profiler API v7 with kernelphase captured: each kernel channel's phases
// reach the model, with their op and their GPU times in its CPU clock, when
// asked for (export), and only then. A phase under a raw KernelCh event
// names that channel's op; one whose op the file lacks is left out.
TEST(Loader, KernelPhasesWhenAskedFor) {
  using testing::kSec;
  using testing::kUs;
  testing::ProcSpec spec;
  spec.api = 7;
  spec.raw_capture = true;
  spec.event_mask = 0x8046;  // coll, p2p, kernelch, kernelphase
  testing::TraceBuilder b(spec);
  const int world = b.AddComm(0xabc, "world", 2, 0, kSec);
  const uint64_t g = 2 * kSec;  // the op's enqueue
  testing::OpOpts o;
  o.gpu_start_ns = static_cast<int64_t>(g + 10 * kUs);
  o.gpu_stop_ns = static_cast<int64_t>(g + 90 * kUs);
  const uint64_t id = b.Coll(world, "AllReduce", 0, 1024, g, static_cast<int64_t>(g + 100 * kUs), o);
  b.KernelPhases(id, 0, g + 100 * kUs, {g + 10 * kUs, g + 40 * kUs, g + 60 * kUs, g + 90 * kUs});
  trace::Record kc;  // channel 1 captured raw
  trace::EventStart* e = kc.mutable_event_start();
  e->set_event_id((uint64_t{2} << 40) | 1000);
  e->set_type(trace::KERNEL_CH);
  e->set_parent_id(id);
  e->set_comm(1);
  e->set_time_ns(g + 100 * kUs);
  b.AddRecord(g + 100 * kUs, kc);
  // NCCL skips a phase of no length (here: no initial sync stamped).
  b.KernelPhases(e->event_id(), 1, g + 100 * kUs, {g + 12 * kUs, g + 12 * kUs, g + 70 * kUs, g + 88 * kUs});
  b.KernelPhases(12345, 2, g + 100 * kUs, {g + 10 * kUs, g + 20 * kUs, g + 30 * kUs, g + 40 * kUs});
  // A phase whose time is out of line with its write (a damaged varint) is
  // left out, and the file not called damaged for it: diagnose never reads
  // phases, and export's --around-finding must judge as it does.
  trace::Record far;
  trace::EventStart* f = far.mutable_event_start();
  f->set_event_id((uint64_t{2} << 40) | 1001);
  f->set_type(trace::KERNEL_PHASE);
  f->set_parent_id(id);
  f->set_time_ns(g + 50 * kSec);
  f->mutable_kernel_phase()->set_channel(3);
  b.AddRecord(g + 100 * kUs, far);
  // One whose stop lies past the file's end (a damaged GPU delta) too.
  trace::Record late_start, late_stop;
  trace::EventStart* ls = late_start.mutable_event_start();
  ls->set_event_id((uint64_t{2} << 40) | 1002);
  ls->set_type(trace::KERNEL_PHASE);
  ls->set_parent_id(id);
  ls->set_time_ns(g + 100 * kUs);
  ls->mutable_kernel_phase()->set_channel(4);
  ls->mutable_kernel_phase()->set_gpu_start_delta_ns(-static_cast<int64_t>(50 * kUs));
  ls->mutable_kernel_phase()->set_has_gpu_start(true);
  trace::EventState* lt = late_stop.mutable_event_state();
  lt->set_event_id(ls->event_id());
  lt->set_state(kStateKernelPhaseStop);
  lt->set_time_ns(g + 100 * kUs);
  lt->set_gpu_delta_ns(static_cast<int64_t>(100 * kSec));
  lt->set_has_gpu(true);
  b.AddRecord(g + 100 * kUs, late_start);
  b.AddRecord(g + 100 * kUs, late_stop);
  b.Finalize(3 * kSec);
  const std::vector<std::pair<std::string, std::string>> files = {{b.FileName(), b.Bytes()}};

  EXPECT_TRUE(FromBytes(files).procs.at(0).phases.empty());
  LoadOptions opts;
  opts.kernel_phases = true;
  const Model m = FromBytes(files, opts);
  ASSERT_EQ(m.procs.size(), 1u);
  const Proc& p = m.procs[0];
  EXPECT_FALSE(p.damaged) << p.issues.size();
  EXPECT_FALSE(FromBytes(files).procs.at(0).damaged);
  ASSERT_EQ(p.ops.size(), 1u);
  const Op& op = m.ops[p.ops[0]];
  // GPU times reach the CPU clock through the file's GpuClock, which the
  // writer anchors on the tightest pair it has seen; here the op's own
  // (its kernel's end, 10 us before its completion), so the phases compare
  // exactly with its GPU start.
  struct Want {
    uint32_t channel;
    uint8_t phase;
    uint64_t start, stop;  // after the kernel's start
  };
  const std::vector<Want> want = {{0, 0, 0, 30 * kUs}, {0, 1, 30 * kUs, 50 * kUs}, {0, 2, 50 * kUs, 80 * kUs},
                                  {1, 1, 2 * kUs, 60 * kUs}, {1, 2, 60 * kUs, 78 * kUs}};
  ASSERT_EQ(p.phases.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const KernelPhaseSpan& ph = p.phases[i];
    EXPECT_EQ(ph.op, p.ops[0]) << i;
    EXPECT_EQ(ph.channel, want[i].channel) << i;
    EXPECT_EQ(ph.phase, want[i].phase) << i;
    EXPECT_EQ(ph.start_ns - op.gpu_start_ns, static_cast<int64_t>(want[i].start)) << i;
    EXPECT_EQ(ph.stop_ns - op.gpu_start_ns, static_cast<int64_t>(want[i].stop)) << i;
  }
}

}  // namespace
}  // namespace ncclwatch::tools

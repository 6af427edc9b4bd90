// A trace file followed as it grows: read in pieces cut anywhere, it loads
// as the whole file does; damage, a replaced or truncated file and a
// bounded chunk are handled as file_window.h says.

#include "tools/model/file_window.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tools/model/loader.h"
#include "tools/model/model.h"
#include "tools/reader/reader.h"
#include "tools/testing/trace_builder.h"
#include "tools/testing/headerless.h"

namespace ncclwatch::tools {
namespace {

using testing::kMs;
using testing::kSec;

std::string TempDir() { return testing::NewTestDir("file_window"); }

void Write(const std::string& path, const std::string& bytes, bool append) {
  std::ofstream f(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  f << bytes;
}

// One rank of a small job with a hang: operations, completions (folded and
// separate), heartbeats, a stuck report, a finalize of one communicator.
std::string RankBytes(int rank = 0) {
  testing::JobSpec spec;
  spec.nranks = 2;
  spec.ncolls = 40;
  spec.stuck_sec = 2;
  spec.op_hook = [](int r, int k, testing::OpPlan& p) {
    if (k % 3 == 0) p.opts.completion = testing::Completion::kSeparate;
    if (r == 1 && k == 30) p.skip = true;
  };
  return testing::BuildJob(spec)[rank].Bytes();
}

Model Load(const std::string& name, const std::string& bytes, bool window = false) {
  Model m;
  std::string err;
  LoadOptions opts;
  opts.windows = window;
  EXPECT_TRUE(LoadModelFromBytes({{name, bytes}}, opts, &m, &err)) << err;
  return m;
}

// The window's records fed to a ModelLoader, as watch does.
Model Load(const FileWindow& w, bool window = false, uint64_t until = UINT64_MAX) {
  LoadOptions opts;
  opts.windows = window;
  ModelLoader loader(opts);
  EXPECT_TRUE(w.Feed(&loader, until));
  Model m;
  std::string err;
  EXPECT_TRUE(loader.Finish(&m, &err)) << err;
  return m;
}

// What the analyses read of a model, as text.
std::string Facts(const Model& m) {
  std::string s;
  for (const Proc& p : m.procs)
    s += "proc " + p.host + " " + std::to_string(p.first_ns) + ".." + std::to_string(p.last_ns) + " hb " +
         std::to_string(p.last_heartbeat_ns) + (p.heartbeats > 0 ? "+" : "-") + " stucks " +
         std::to_string(p.stucks.size()) + (p.finalized ? " finalized" : "") + (p.damaged ? " damaged" : "") + "\n";
  for (const Op& o : m.ops)
    s += m.Str(o.func) + " #" + std::to_string(o.seq) + " state " + std::to_string(static_cast<int>(o.state)) + " " +
         std::to_string(o.start_ns) + " " + std::to_string(o.done_ns) + " gpu " + std::to_string(o.gpu_start_ns) + "+" +
         std::to_string(o.gpu_duration_ns) + (o.ended_by_abort ? " abort" : "") + "\n";
  for (const Comm& c : m.comms) s += "comm " + c.name + " " + std::to_string(c.members.size()) + "\n";
  return s;
}

TEST(FileWindow, PiecesCutAnywhereLoadAsTheWholeFile) {
  const std::string bytes = RankBytes();
  const std::string want = Facts(Load("f.ncclwatch", bytes));
  const std::string dir = TempDir();
  const std::string path = dir + "/f.ncclwatch";
  // Cuts a prime number of bytes apart: every kind of record is cut somewhere.
  for (size_t step : {size_t{7}, size_t{61}, size_t{997}}) {
    SCOPED_TRACE(step);
    Write(path, "", false);
    FuncIds names;
    FileWindow w(path, &names);
    std::vector<std::string> notes;
    for (size_t at = 0; at < bytes.size(); at += step) {
      Write(path, bytes.substr(at, step), true);
      w.Follow(1 << 20, &notes);
      EXPECT_FALSE(w.stopped());
      if (w.has_records()) Load(w);  // every prefix loads
    }
    EXPECT_TRUE(notes.empty()) << notes[0];
    Model m = Load(w);
    w.Annotate(&m.procs[0], true);
    EXPECT_FALSE(m.procs[0].cut_tail);
    EXPECT_EQ(Facts(m), want);
    EXPECT_LT(w.bytes(), bytes.size());  // heartbeats, batches and GPU clocks are not kept
  }
}

// A window's records, each with its offset, serialized: comparable.
std::vector<std::pair<uint64_t, std::string>> Serialized(const FileWindow& w) {
  std::vector<std::pair<uint64_t, std::string>> out;
  for (const auto& [offset, r] : w.Records()) out.emplace_back(offset, r->SerializeAsString());
  return out;
}

// One read makes both the window and the whole file's model (summarize):
// the window holds what following the file gives, the model is LoadModel's.
TEST(FileWindow, ReadWholeGivesTheFollowedWindowAndTheWholeFileModel) {
  const std::string bytes = RankBytes();
  const std::string dir = TempDir();
  const std::string path = dir + "/f.ncclwatch";
  Write(path, bytes, false);
  FuncIds names;
  FileWindow followed(path, &names);
  std::vector<std::string> notes;
  followed.Follow(1 << 20, &notes);
  const std::vector<std::pair<uint64_t, std::string>> want = Serialized(followed);

  TraceReader reader;
  std::string err;
  ASSERT_TRUE(reader.Open(path, &err)) << err;
  FileWindow w(path, &names);
  ModelLoader loader{LoadOptions()};
  EXPECT_TRUE(w.ReadWhole(&reader, &loader, &notes));
  EXPECT_TRUE(notes.empty()) << notes[0];
  EXPECT_EQ(Serialized(w), want);
  EXPECT_EQ(w.header().size, followed.header().size);
  Model whole;
  ASSERT_TRUE(loader.Finish(&whole, &err)) << err;
  Model direct;
  ASSERT_TRUE(LoadModel({path}, LoadOptions(), &direct, &err)) << err;
  EXPECT_EQ(Facts(whole), Facts(direct));
  EXPECT_EQ(whole.ops.size(), direct.ops.size());

  // A file cut mid-record: the window says so, as the model does.
  Write(path, bytes.substr(0, bytes.size() - 3), false);
  TraceReader cut;
  ASSERT_TRUE(cut.Open(path, &err)) << err;
  FileWindow wc(path, &names);
  ModelLoader lc{LoadOptions()};
  EXPECT_TRUE(wc.ReadWhole(&cut, &lc, &notes));
  Model mc;
  ASSERT_TRUE(lc.Finish(&mc, &err)) << err;
  Proc seen;
  wc.Annotate(&seen, true);
  EXPECT_TRUE(seen.cut_tail);
  EXPECT_EQ(seen.cut_tail, mc.procs[0].cut_tail);
}

TEST(FileWindow, ACorruptLengthStopsTheFollowAndNamesTheOffset) {
  const std::string bytes = RankBytes();
  const std::string dir = TempDir();
  const std::string path = dir + "/rank0.ncclwatch";
  const size_t half = bytes.size() / 2;
  Write(path, bytes.substr(0, half), false);
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  w.Follow(1 << 20, &notes);
  ASSERT_TRUE(notes.empty());
  // From the first record the half cut short, the file is garbage: a
  // length of 2^63, then the rest of the records.
  TraceReader probe;
  probe.OpenBytes("probe", bytes.substr(0, half));
  trace::Record rec;
  uint64_t off = 0;
  while (probe.Next(&rec, &off)) {
  }
  const uint64_t damage_at = probe.resume().offset;
  Write(path, bytes.substr(0, damage_at) + std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x10", 9) + bytes.substr(half),
        false);
  w.Follow(1 << 20, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find(path + ": offset " + std::to_string(damage_at) + ": record length"), std::string::npos)
      << notes[0];
  EXPECT_TRUE(w.stopped());
  // Nothing after the damage is read, however the file grows.
  Write(path, bytes.substr(half), true);
  notes.clear();
  w.Follow(1 << 20, &notes);
  EXPECT_TRUE(notes.empty());
  Model m = Load(w);
  w.Annotate(&m.procs[0], false);
  EXPECT_TRUE(m.procs[0].damaged);
  EXPECT_TRUE(m.procs[0].damaged_end);
  EXPECT_EQ(m.procs[0].damaged_at, damage_at);
  EXPECT_FALSE(m.procs[0].ops.empty());  // what came before stands
}

TEST(FileWindow, ARecordThatDoesNotParseIsSkippedAndTheFollowGoesOn) {
  const std::string bytes = RankBytes();
  const std::string dir = TempDir();
  const std::string path = dir + "/rank0.ncclwatch";
  TraceReader probe;
  probe.OpenBytes("probe", bytes.substr(0, bytes.size() / 3));
  trace::Record rec;
  uint64_t off = 0;
  while (probe.Next(&rec, &off)) {
  }
  const uint64_t at = probe.resume().offset;
  // A well-framed record of 3 bytes that is no Record (field 0 is invalid).
  Write(path, bytes.substr(0, at) + std::string("\x03\x00\x00\x00", 4) + bytes.substr(at), false);
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  w.Follow(1 << 20, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("offset " + std::to_string(at) + ": record of 3 bytes does not parse"), std::string::npos)
      << notes[0];
  EXPECT_FALSE(w.stopped());
  Model m = Load(w);
  w.Annotate(&m.procs[0], true);
  EXPECT_TRUE(m.procs[0].damaged);
  EXPECT_FALSE(m.procs[0].damaged_end);
  EXPECT_EQ(m.procs[0].damaged_at, at);
  EXPECT_EQ(m.ops.size(), Load(path, bytes).ops.size());  // every operation, before and after
}

TEST(FileWindow, AReplacedOrTruncatedFileIsReadAgainFromItsStart) {
  const std::string a = RankBytes(0), b = RankBytes(1);
  const std::string dir = TempDir();
  const std::string path = dir + "/r.ncclwatch";
  Write(path, a, false);
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  w.Follow(1 << 20, &notes);
  const std::string facts_b = Facts(Load(path, b));
  // Replaced: another file renamed over it (another inode).
  Write(dir + "/new", b, false);
  ASSERT_EQ(rename((dir + "/new").c_str(), path.c_str()), 0);
  w.Follow(1 << 20, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], path + ": replaced by another file; read again from its start");
  EXPECT_EQ(Facts(Load(w)), facts_b);
  // Truncated in place, then written again.
  notes.clear();
  Write(path, a.substr(0, 100), false);
  w.Follow(1 << 20, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], path + ": shrank from " + std::to_string(b.size()) + " to 100 bytes; read again from its start");
  Write(path, a.substr(100), true);
  w.Follow(1 << 20, &notes);
  EXPECT_EQ(Facts(Load(w)), Facts(Load(path, a)));
}

TEST(FileWindow, AChunkBoundsOnePollAndALongRecordIsStillRead) {
  const std::string bytes = RankBytes();
  const std::string dir = TempDir();
  const std::string path = dir + "/r.ncclwatch";
  // A long record (a string definition of 5,000 bytes) early in the file.
  trace::Record big;
  big.mutable_string_def()->set_id(9999);
  big.mutable_string_def()->set_text(std::string(5000, 'x'));
  std::string framed;
  {
    const std::string body = big.SerializeAsString();
    uint64_t n = body.size();
    while (n >= 0x80) {
      framed.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    framed.push_back(static_cast<char>(n));
    framed += body;
  }
  TraceReader probe;
  probe.OpenBytes("probe", bytes.substr(0, 200));
  trace::Record rec;
  uint64_t off = 0;
  while (probe.Next(&rec, &off)) {
  }
  const uint64_t at = probe.resume().offset;
  const std::string file = bytes.substr(0, at) + framed + bytes.substr(at);
  Write(path, file, false);
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  int polls = 0;
  do {
    w.Follow(256, &notes);
    ++polls;
  } while (w.backlog() && polls < 10000);
  EXPECT_TRUE(notes.empty());
  // 256 bytes a poll, but for the long record (read whole, with what its
  // doubling reads after it).
  EXPECT_GE(polls, static_cast<int>((file.size() - 2 * framed.size()) / 256));
  // The inserted record is one more than the file's later batches count:
  // whole, the file reads as damaged (LoadModel); record by record, as the
  // window reads it, it is not.
  EXPECT_EQ(Facts(Load(w, true)), Facts(Load(path, file, true)));
}

// Records fed from the window carry their offsets in the file: a value
// the loader finds damaged is named where diagnose names it in the file.
TEST(FileWindow, DamageTheLoaderFindsIsNamedAtItsOffsetInTheFile) {
  const std::string bytes = RankBytes();
  // The 20th operation names a function the file never defines.
  TraceReader r;
  r.OpenBytes("f", bytes);
  trace::Record rec;
  uint64_t off = 0, damaged_at = 0;
  std::string file;
  int ops = 0;
  while (r.Next(&rec, &off)) {
    if (rec.has_op() && ++ops == 20) {
      rec.mutable_op()->set_func(9999);
      damaged_at = file.size();
    }
    if (rec.has_op()) rec.mutable_op()->clear_start_delta_ns();  // start_ns is resolved: framed again, no chain
    const std::string body = rec.SerializeAsString();
    uint64_t n = body.size();
    while (n >= 0x80) {
      file.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    file.push_back(static_cast<char>(n));
    file += body;
  }
  ASSERT_GT(damaged_at, 0u);
  const std::string dir = TempDir();
  const std::string path = dir + "/d.ncclwatch";
  Write(path, file, false);
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  w.Follow(1 << 20, &notes);
  const Model m = Load(w, true);
  const Model whole = Load(path, file, true);
  ASSERT_TRUE(m.procs[0].damaged);
  EXPECT_EQ(m.procs[0].damaged_at, damaged_at);
  EXPECT_EQ(whole.procs[0].damaged_at, damaged_at);
  ASSERT_FALSE(m.procs[0].issues.empty());
  EXPECT_EQ(m.procs[0].issues[0], whole.procs[0].issues[0]);
}

TEST(FileWindow, LettingGoAndCuttingOperations) {
  const std::string bytes = RankBytes();
  const std::string dir = TempDir();
  const std::string path = dir + "/r.ncclwatch";
  Write(path, bytes, false);
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  w.Follow(1 << 20, &notes);
  Model m = Load(w);
  const uint64_t n = w.ops();
  ASSERT_EQ(n, m.ops.size());
  std::unordered_map<OpKey, bool, OpKeyHash> settled;
  for (size_t i = 0; i < 10; ++i) {
    OpKey k;
    ASSERT_TRUE(OpKeyOf(m, m.ops[i], names, &k));
    settled[k] = true;
  }
  w.LetGo(settled);
  EXPECT_EQ(w.ops(), n - 10);
  EXPECT_EQ(w.let_go(), 10u);
  // The cut takes the oldest, those not unfinished first.
  std::unordered_set<OpKey, OpKeyHash> unfinished;
  OpKey first;
  ASSERT_TRUE(OpKeyOf(m, m.ops[10], names, &first));
  unfinished.insert(first);
  EXPECT_EQ(w.Cut(n - 12, unfinished), 2u);
  Model after = Load(w);
  w.Annotate(&after.procs[0], false);
  EXPECT_EQ(after.procs[0].settled_ops, 10u);
  EXPECT_EQ(after.procs[0].settled_completed, 10u);
  EXPECT_EQ(after.procs[0].cut_ops, 2u);
  ASSERT_EQ(after.ops.size(), n - 12);
  EXPECT_EQ(after.ops[0].seq, m.ops[10].seq);  // kept: unfinished
  EXPECT_EQ(after.ops[1].seq, m.ops[13].seq);
}


// NCCL 2.31's RAS changed the event mask mid-run: the MaskChange stays in
// the window when the operations around it are let go, and is left out of
// the window as of a time before it.
TEST(FileWindow, AMaskChangeIsKeptWhateverIsLetGo) {
  testing::TraceBuilder b;
  const int w0 = b.AddComm(0x3A5, "world", 2, 0, kSec);
  for (uint64_t k = 0; k < 10; ++k)
    b.Coll(w0, "AllReduce", k, 1024, 2 * kSec + k * 10 * kMs, static_cast<int64_t>(2 * kSec + k * 10 * kMs + kMs));
  b.MaskChange(3 * kSec, 0x46, 0x6, 3 * kSec - 10 * kMs, 0x40);
  for (uint64_t k = 10; k < 20; ++k)
    b.Coll(w0, "AllReduce", k, 1024, 3 * kSec + k * 10 * kMs, static_cast<int64_t>(3 * kSec + k * 10 * kMs + kMs));
  b.Heartbeat(5 * kSec);
  const std::string dir = TempDir();
  const std::string path = dir + "/m.ncclwatch";
  Write(path, b.Bytes(), false);
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  w.Follow(1 << 20, &notes);
  Model m = Load(w, true);
  ASSERT_EQ(m.procs[0].mask_changes.size(), 1u);
  std::unordered_map<OpKey, bool, OpKeyHash> settled;
  for (const Op& op : m.ops) {
    OpKey k;
    ASSERT_TRUE(OpKeyOf(m, op, names, &k));
    settled[k] = true;
  }
  w.LetGo(settled);
  EXPECT_EQ(w.ops(), 0u);
  Model after = Load(w, true);
  ASSERT_EQ(after.procs[0].mask_changes.size(), 1u);
  EXPECT_EQ(after.procs[0].mask_changes[0].old_mask, 0x46u);
  EXPECT_EQ(after.procs[0].mask_changes[0].new_mask, 0x6u);
  EXPECT_TRUE(after.procs[0].mask_changes[0].LostSource());
  // As of a time before it, the window has no change yet.
  Model before = Load(w, true, 3 * kSec - kMs);
  EXPECT_TRUE(before.procs[0].mask_changes.empty());
}

// A file without its header (a live trace truncated while the plugin
// appends) must not be kept whole, poll after poll. The model can
// read nothing of it, so nothing is kept; the follow ends and says why, and
// the window loads as diagnose loads such a file: no process header.
TEST(FileWindow, AFileWithoutItsHeaderKeepsNothingAndSaysWhy) {
  const std::string a = RankBytes(0);
  const std::string dir = TempDir();
  const std::string path = dir + "/r.ncclwatch";
  Write(path, a, false);
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  w.Follow(1 << 20, &notes);
  ASSERT_GT(w.ops(), 0u);
  // Truncated in place while the plugin goes on appending.
  const std::string body = Headerless(a);
  Write(path, "", false);
  w.Follow(1 << 20, &notes);
  Write(path, body, true);
  w.Follow(1 << 20, &notes);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], path + ": shrank from " + std::to_string(a.size()) + " to 0 bytes; read again from its start");
  EXPECT_NE(notes[1].find(": the first record is not a process header: not a trace file, or one truncated while "
                          "written; nothing of it is kept; the other files are still followed"),
            std::string::npos)
      << notes[1];
  EXPECT_TRUE(w.stopped());
  EXPECT_TRUE(w.has_records());
  EXPECT_EQ(w.ops(), 0u);
  EXPECT_EQ(w.bytes(), 0u);
  ModelLoader loader{LoadOptions()};
  EXPECT_TRUE(w.Feed(&loader));  // the file is named in the errors; the load goes on
  Model m;
  std::string err;
  EXPECT_FALSE(loader.Finish(&m, &err));
  EXPECT_EQ(err, path + ": no process header; not an ncclwatch trace file");
  // The file grows on: nothing more is read.
  Write(path, a, true);
  notes.clear();
  w.Follow(1 << 20, &notes);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(w.ops(), 0u);
}

// What the model does not read is not kept at full size: records the
// plugin writes small (operations, heartbeats) that come with large fields
// the reader does not know are trimmed to the fields it knows; stuck
// reports are kept within 16 MiB, definitions within 64 MiB (past them
// the follow ends, as for damage).
TEST(FileWindow, LargeRecordsAreKeptWithinBounds) {
  const std::string a = RankBytes(0);
  std::string file = a;
  auto add = [&file](const trace::Record& rec, const std::string& unknown) {
    std::string body = rec.SerializeAsString();
    if (!unknown.empty()) {
      // Field 1000, length-delimited: unknown to this reader.
      body += static_cast<char>(0xc2);
      body += static_cast<char>(0x3e);
      uint64_t n = unknown.size();
      while (n >= 0x80) {
        body.push_back(static_cast<char>((n & 0x7f) | 0x80));
        n >>= 7;
      }
      body.push_back(static_cast<char>(n));
      body += unknown;
    }
    uint64_t n = body.size();
    while (n >= 0x80) {
      file.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    file.push_back(static_cast<char>(n));
    file += body;
  };
  // Heartbeats with 1 MiB of unknown fields each.
  trace::Record hb;
  hb.mutable_heartbeat()->set_time_ns(1);
  const std::string mib(1 << 20, 'u');
  for (int i = 0; i < 4; ++i) add(hb, mib);
  // 20 stuck reports of 1 MiB each.
  trace::Record stuck;
  stuck.mutable_stuck()->set_time_ns(2);
  for (int i = 0; i < 20; ++i) add(stuck, mib);
  const std::string dir = TempDir();
  const std::string path = dir + "/r.ncclwatch";
  Write(path, file, false);
  FuncIds names;
  FileWindow w(path, &names);
  std::vector<std::string> notes;
  int polls = 0;
  do {
    w.Follow(8 << 20, &notes);
  } while (w.backlog() && ++polls < 1000);
  EXPECT_TRUE(notes.empty()) << notes[0];
  EXPECT_FALSE(w.stopped());
  // The window: the file's own records, one trimmed heartbeat, and the
  // stuck reports that fit 16 MiB.
  const uint64_t kept = w.bytes();
  EXPECT_LT(kept, a.size() + (16u << 20) + 4096) << kept;
  EXPECT_GT(kept, 15u << 20);
  Model m = Load(w);
  EXPECT_EQ(m.ops.size(), Load(path, a).ops.size());
  EXPECT_EQ(m.procs[0].stucks.size(), 15u);
  // Definitions past 64 MiB end the follow.
  trace::Record def;
  def.mutable_string_def()->set_id(77);
  def.mutable_string_def()->set_text(std::string(17 << 20, 's'));  // kept twice: record and text
  file = a;
  for (int i = 0; i < 2; ++i) add(def, "");
  Write(path, file, false);
  FileWindow d(path, &names);
  notes.clear();
  polls = 0;
  do {
    d.Follow(8 << 20, &notes);
  } while (d.backlog() && ++polls < 1000);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("64 MiB of them (strings, communicators), which no trace the plugin writes holds; stopped "
                          "following it"),
            std::string::npos)
      << notes[0];
  EXPECT_TRUE(d.stopped());
}

}  // namespace
}  // namespace ncclwatch::tools

// Flight Recorder dumps joined to NCCL records, on a real PyTorch hang
// (testdata/gpu/torch_skip: rank 3 skips an all_reduce; PyTorch's watchdog
// dumped Flight Recorder's buffers beside the traces).
#include "tools/fr/flight_recorder.h"

#include <gtest/gtest.h>

#include <stdio.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/inputs.h"
#include "tools/model/model.h"
#include "tools/testing/memory_limit.h"

namespace ncclwatch::tools {
namespace {

const char kDir[] = "testdata/gpu/torch_skip";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Joined {
  Model model;
  FrJoin join;
  report::Diagnosis d;
};

void Diagnosed(Joined* r, const std::vector<std::string>& explicit_files, bool beside) {
  std::string err;
  ASSERT_TRUE(BuildModel({kDir}, LoadOptions(), &r->model, &err)) << err;
  std::vector<std::string> candidates;
  if (beside) candidates = ListFiles({kDir}, &MayBeFrDumpName).files;
  r->join = JoinFlightRecorder(candidates, explicit_files, &r->model);
  r->d = Diagnose(r->model);
  AddFlightRecorderEvidence(r->model, r->join, &r->d);
}

TEST(FlightRecorder, ParsesAPyTorchDump) {
  const std::string path = std::string(kDir) + "/fr/nccl_trace_rank_3";
  FrDump dump;
  std::string error;
  ASSERT_TRUE(ParseFrDump(path, ReadAll(path), &dump, &error)) << error;
  EXPECT_EQ(dump.rank, 3);
  EXPECT_EQ(dump.version, "2.10");
  EXPECT_EQ(dump.nccl_version, "2.28.9");
  ASSERT_EQ(dump.groups.count("0"), 1u);
  EXPECT_EQ(dump.groups["0"].desc, "default_pg");
  EXPECT_EQ(dump.groups["0"].ranks, (std::vector<int64_t>{0, 1, 2, 3}));
  ASSERT_EQ(dump.entries.size(), 14u);
  const FrEntry& e = dump.entries[12];  // the all-gather rank 3 went to instead of the all-reduce
  EXPECT_EQ(e.collective_seq_id, 13);
  EXPECT_EQ(e.profiling_name, "nccl:_all_gather_base");
  EXPECT_EQ(e.state, "scheduled");
  EXPECT_EQ(e.pg_desc, "default_pg");
  ASSERT_GE(e.frames.size(), 3u);
  EXPECT_EQ(e.frames[2].name, "main");
  EXPECT_EQ(e.frames[2].line, 127);
}

TEST(FlightRecorder, TheVerdictNamesTheGroupAndThePythonLines) {
  Joined r;
  Diagnosed(&r, {}, /*beside=*/true);
  EXPECT_EQ(r.join.dumps.size(), 4u);
  EXPECT_TRUE(r.join.notes.empty()) << r.join.notes[0];
  EXPECT_EQ(r.d.verdict().find("HANG: rank 3 never joined AllReduce #4 on comm 0x4b4755f15b9950a8 "
                               "(process group 'default_pg', 4 ranks)"),
            0u)
      << r.d.verdict();
  ASSERT_GE(r.d.findings_size(), 1);
  const report::Finding& f = r.d.findings(0);
  EXPECT_EQ(f.process_group(), "default_pg");
  ASSERT_EQ(f.python_calls_size(), 4);
  for (const report::PythonCall& c : f.python_calls()) {
    SCOPED_TRACE(c.proc());
    ASSERT_GE(c.frames_size(), 3);
    EXPECT_EQ(c.frames(2).function(), "main");
    EXPECT_NE(c.frames(2).file().find("torch_allreduce.py"), std::string::npos);
    if (c.proc() == "rank 3") {
      // The culprit is not in the all-reduce: it is in the all-gather of line 127.
      EXPECT_FALSE(c.this_operation());
      EXPECT_EQ(c.call(), "nccl:_all_gather_base");
      EXPECT_EQ(c.collective_seq_id(), 13u);
      EXPECT_EQ(c.frames(2).line(), 127);
    } else {
      // The waiting ranks' all-reduce: Flight Recorder's #13, line 126.
      EXPECT_TRUE(c.this_operation());
      EXPECT_EQ(c.call(), "nccl:all_reduce");
      EXPECT_EQ(c.collective_seq_id(), 13u);
      EXPECT_EQ(c.frames(2).line(), 126);
      EXPECT_EQ(c.state(), "scheduled");
    }
  }
  const std::string text = FormatText(r.d);
  EXPECT_NE(text.find("rank 3: Python: not in it; in nccl:_all_gather_base #13 of group 'default_pg' (scheduled) "
                      "from main() at /work/main/tools/gpu/torch_allreduce.py:127"),
            std::string::npos)
      << text;
  EXPECT_NE(FormatJson(r.d).find("\"pythonCalls\""), std::string::npos);
}

// A send and a receive whose peers never met left no NCCL record on ranks
// 0,1 (testdata/torch/p2p-peer-events-4r): the join keeps the ones their
// dumps show after their last recorded collective, with PyTorch's peer,
// and none for ranks 2,3, whose records end in a later collective.
TEST(FlightRecorder, SendsAndReceivesAfterTheLastRecordedCollectiveAreKept) {
  const std::string dir = "testdata/torch/p2p-peer-events-4r";
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({dir}, LoadOptions(), &m, &err)) << err;
  const FrJoin join = JoinFlightRecorder(ListFiles({dir}, &MayBeFrDumpName).files, {dir + "/fr/nccl_trace_rank_1"}, &m);
  EXPECT_TRUE(join.notes.empty()) << join.notes[0];
  ASSERT_EQ(m.comms.size(), 1u);
  for (int32_t rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE(rank);
    const Proc& p = m.procs[m.comms[0].proc_of_rank[static_cast<size_t>(rank)]];
    EXPECT_TRUE(p.fr_joined);
    if (rank >= 2) {
      EXPECT_TRUE(p.fr_p2p.empty());
      continue;
    }
    // Named twice (found in the folder and named): kept once.
    ASSERT_EQ(p.fr_p2p.size(), 1u);
    const FrP2pCall& call = p.fr_p2p[0];
    EXPECT_EQ(call.comm, 0u);
    EXPECT_EQ(call.recv, rank == 1);
    EXPECT_EQ(call.peer, rank == 0 ? 1 : 2);
    EXPECT_EQ(call.text.rfind(rank == 0 ? "nccl:send 0->1 #24 of group 'default_pg'" : "nccl:recv 1<-2 #24", 0), 0u)
        << call.text;
  }
}

// The join reads the finding's operation from the finding (Finding.op),
// never looks it up again by communicator, function name and number: what
// a finding says of them in words changes nothing.
TEST(FlightRecorder, TheFindingsOperationIsTakenFromTheFinding) {
  Joined r;
  Diagnosed(&r, {}, /*beside=*/true);
  ASSERT_GE(r.d.findings_size(), 1);
  const report::Finding want = r.d.findings(0);
  ASSERT_GT(want.op(), 0u);
  const Op& op = r.model.ops[want.op() - 1];
  EXPECT_EQ(op.fn, Func::kAllReduce);
  EXPECT_EQ(op.seq, 4u);
  report::Diagnosis d = r.d;
  report::Finding* f = d.mutable_findings(0);
  f->clear_python_calls();
  f->clear_evidence();
  f->clear_process_group();
  f->set_func("all_reduce");  // another spelling, another number, no hash
  f->set_seq(13);
  f->set_comm_hash(0);
  d.mutable_consequences()->Clear();
  d.mutable_input_issues()->Clear();
  AddFlightRecorderEvidence(r.model, r.join, &d);
  ASSERT_EQ(f->python_calls_size(), want.python_calls_size());
  for (int i = 0; i < f->python_calls_size(); ++i) {
    EXPECT_EQ(f->python_calls(i).proc(), want.python_calls(i).proc());
    EXPECT_EQ(f->python_calls(i).this_operation(), want.python_calls(i).this_operation());
    EXPECT_EQ(f->python_calls(i).call(), want.python_calls(i).call());
  }
  EXPECT_EQ(f->process_group(), "default_pg");
  // Without an operation, nothing is joined to the finding.
  d = r.d;
  d.mutable_findings(0)->clear_python_calls();
  d.mutable_findings(0)->set_op(0);
  d.mutable_consequences()->Clear();
  AddFlightRecorderEvidence(r.model, r.join, &d);
  EXPECT_EQ(d.findings(0).python_calls_size(), 0);
}

TEST(FlightRecorder, WithoutDumpsNothingChanges) {
  Joined with_none;
  Diagnosed(&with_none, {}, /*beside=*/false);
  Model plain;
  std::string err;
  ASSERT_TRUE(BuildModel({kDir}, LoadOptions(), &plain, &err)) << err;
  const report::Diagnosis d = Diagnose(plain);
  EXPECT_EQ(FormatText(with_none.d), FormatText(d));
  EXPECT_EQ(with_none.d.verdict().find("HANG: rank 3 never joined AllReduce #4 on comm 0x4b4755f15b9950a8 (4 ranks)"),
            0u);
}

TEST(FlightRecorder, ADamagedOrForeignDumpIsANoteNeverACrash) {
  const std::string tmp = ::testing::TempDir();
  const std::string good = ReadAll(std::string(kDir) + "/fr/nccl_trace_rank_0");
  std::vector<std::string> files;
  // Cut short, a foreign pickle (Python objects), not a pickle at all.
  auto write = [&](const std::string& name, const std::string& bytes) {
    const std::string p = tmp + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    files.push_back(p);
  };
  write("cut_rank_0", good.substr(0, good.size() / 2));
  write("foreign_rank_1", std::string("\x80\x02" "ccollections\nOrderedDict\nq\x00)Rq\x01.", 34));
  write("text_rank_2", "not a pickle\n");
  Joined r;
  Diagnosed(&r, files, /*beside=*/false);
  EXPECT_TRUE(r.join.dumps.empty());
  ASSERT_EQ(r.join.notes.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.join.notes[i].find(files[i] + ": not used as a Flight Recorder dump: "), 0u) << r.join.notes[i];
  }
  EXPECT_NE(r.join.notes[0].find("offset"), std::string::npos) << r.join.notes[0];
  int issues = 0;
  for (const report::InputIssue& i : r.d.input_issues())
    if (i.kind() == report::InputIssue::FLIGHT_RECORDER) ++issues;
  EXPECT_EQ(issues, 3);
  // The verdict rests on the NCCL records alone, as without dumps.
  EXPECT_EQ(r.d.verdict().find("HANG: rank 3 never joined AllReduce #4 on comm 0x4b4755f15b9950a8 (4 ranks)"), 0u);
}

TEST(FlightRecorder, FilesFoundBesideThatAreNoPickleAreLeftAlone) {
  // A name ending in a number is only a candidate: found (not named), a file
  // that does not start as a pickle is skipped without a note.
  const std::string p = ::testing::TempDir() + "/core.12345";
  std::ofstream(p, std::ios::binary) << std::string(1 << 20, 'x');
  Model m;
  std::string err;
  ASSERT_TRUE(BuildModel({kDir}, LoadOptions(), &m, &err)) << err;
  FrJoin join = JoinFlightRecorder({p}, {}, &m);
  EXPECT_TRUE(join.dumps.empty());
  EXPECT_TRUE(join.notes.empty()) << join.notes[0];
}

TEST(FlightRecorder, AGroupThatLinesUpWithNothingIsNotJoined) {
  // Rank 0's dump under rank 2's name: its entries (an all-reduce #13 that
  // rank 2 issued too) line up, so it joins; but as rank 3's, the
  // all-reduce #13 disagrees with rank 3's all-gather: not joined.
  const std::string tmp = ::testing::TempDir();
  const std::string p = tmp + "/swapped_rank_3";
  std::ofstream(p, std::ios::binary) << ReadAll(std::string(kDir) + "/fr/nccl_trace_rank_0");
  Joined r;
  Diagnosed(&r, {p}, /*beside=*/false);
  ASSERT_EQ(r.join.notes.size(), 1u);
  EXPECT_NE(r.join.notes[0].find("process group 'default_pg' (4 ranks) lines up with no communicator of rank 3"),
            std::string::npos)
      << r.join.notes[0];
  EXPECT_TRUE(r.join.by_op.empty());
}

// Pickle opcodes, by hand (pickle.dumps writes these for such values).
std::string PickleStr(const std::string& v) {
  std::string s = "X";
  const uint32_t n = static_cast<uint32_t>(v.size());
  for (int i = 0; i < 4; ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
  return s + v;
}
std::string Get(int memo) { return std::string("h") + static_cast<char>(memo); }
std::string Put(int memo) { return std::string("q") + static_cast<char>(memo); }

// A hostile dump: 14 KB whose `entries` are 1,000 references to
// one memoized entry, whose `frames` are 1,000 references to one memoized
// frame with an 8 KB file name. Copied as the reader copies frames, 8 GB:
// it used to reach 6 GiB and abort in std::bad_alloc.
std::string SharedEntriesDump() {
  std::string s = "\x80\x02}(" + PickleStr("version") + PickleStr("2.10") + PickleStr("entries") + "](}(" +
                  PickleStr("collective_seq_id") + "K\x01" + PickleStr("profiling_name") +
                  PickleStr("nccl:all_reduce") + PickleStr("frames") + "](}(" + PickleStr("filename") +
                  PickleStr(std::string(8192, 'f')) + PickleStr("line") + "K\x07" + PickleStr("name") +
                  PickleStr("main") + "u" + Put(1);
  for (int i = 1; i < 1000; ++i) s += Get(1);
  s += "eu" + Put(2);
  for (int i = 1; i < 1000; ++i) s += Get(2);
  return s + "eu.";
}

// A dump whose process groups are `groups` references to one group whose
// ranks are a string of `ranks` numbers ("[0,0,...]"): the pickle holds it
// once, the reader's ints take 8 bytes for each 2 of the string at each
// reference.
std::string SharedRanksDump(int groups, size_t ranks) {
  std::string list = "[";
  for (size_t i = 0; i < ranks; ++i) list += i ? ",0" : "0";
  list += "]";
  std::string s = "\x80\x02}(" + PickleStr("version") + PickleStr("2.10") + PickleStr("entries") + "]" +
                  PickleStr("pg_config") + "}(" + PickleStr("g0") + "}(" + PickleStr("desc") + PickleStr("g") +
                  PickleStr("ranks") + PickleStr(list) + "u" + Put(1);
  for (int g = 1; g < groups; ++g) s += PickleStr("g" + std::to_string(g)) + Get(1);
  return s + "uu.";
}

// Under a memory limit (RLIMIT_AS, but under ASan), the hostile dump is
// refused at the offset where a copy passes the limit, before anything is
// copied; JoinFlightRecorder says so in its note and the verdict stands.
TEST(FlightRecorder, MemoSharingCannotMultiplyMemory) {
  const std::string bytes = SharedEntriesDump();
  ASSERT_LT(bytes.size(), 16u << 10);
  const std::string path = ::testing::TempDir() + "/hostile_rank_0";
  std::ofstream(path, std::ios::binary) << bytes;
  const testing::LimitedRun run = testing::RunWithMemoryLimit(256u << 20, [&] {
    FrDump dump;
    std::string error;
    if (ParseFrDump(path, bytes, &dump, &error)) return 1;
    fprintf(stderr, "%s\n", error.c_str());
    return error.rfind("offset " + std::to_string(bytes.size() - 3) + ": APPENDS makes a value that a copy", 0) == 0
               ? 0
               : 2;
  });
  EXPECT_TRUE(run.exited && run.status == 0) << run.how << (testing::MemoryLimitApplies() ? "" : " (no limit: ASan)");

  Joined r;
  Diagnosed(&r, {path}, /*beside=*/false);
  ASSERT_EQ(r.join.notes.size(), 1u);
  EXPECT_EQ(r.join.notes[0], path + ": not used as a Flight Recorder dump: offset " + std::to_string(bytes.size() - 3) +
                                 ": APPENDS makes a value that a copy would make more than 268435456 bytes of (a "
                                 "value the memo shares counts at each reference)");
  EXPECT_EQ(r.d.verdict().find("HANG: rank 3 never joined AllReduce #4"), 0u) << r.d.verdict();
}

// What the reader builds is counted too: a group's ranks as a string take
// four times the string's bytes, at each reference to it. 64 references
// to 1 M ranks pass the pickle's count (128 MB as copied strings) but
// would be 512 MB of ints: refused once they pass kMaxValueBytes.
TEST(FlightRecorder, SharedRanksCannotMultiplyMemory) {
  const std::string bytes = SharedRanksDump(64, 1u << 20);
  const testing::LimitedRun run = testing::RunWithMemoryLimit(512u << 20, [&] {
    FrDump dump;
    std::string error;
    if (ParseFrDump("/x/hostile_rank_0", bytes, &dump, &error)) return 1;
    fprintf(stderr, "%s\n", error.c_str());
    return error.rfind("the dump would take more than 256 MiB once read (at the ranks of process group 'g", 0) == 0 &&
                   dump.groups.empty()
               ? 0
               : 2;
  });
  EXPECT_TRUE(run.exited && run.status == 0) << run.how << (testing::MemoryLimitApplies() ? "" : " (no limit: ASan)");
  // 8 references are read.
  FrDump dump;
  std::string error;
  ASSERT_TRUE(ParseFrDump("/x/shared_rank_0", SharedRanksDump(8, 1u << 20), &dump, &error)) << error;
  ASSERT_EQ(dump.groups.size(), 8u);
  EXPECT_EQ(dump.groups["g7"].ranks.size(), 1u << 20);
}

}  // namespace
}  // namespace ncclwatch::tools

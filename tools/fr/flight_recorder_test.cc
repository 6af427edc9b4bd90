// Flight Recorder dumps joined to NCCL records, on a real PyTorch hang
// (testdata/gpu/torch_skip: rank 3 skips an all_reduce; PyTorch's watchdog
// dumped Flight Recorder's buffers beside the traces).
#include "tools/fr/flight_recorder.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/diagnose/diagnose.h"
#include "tools/model/inputs.h"
#include "tools/model/model.h"

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

}  // namespace
}  // namespace ncclwatch::tools

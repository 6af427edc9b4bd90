// The damage fuzzer's check (damage.h) on a fixed sample, in every build:
// every 7th byte of two real recordings (recordings.h), each changed two
// ways (one bit, turning with the offset, and all eight bits), and the
// bytes the issue reported (testdata/gpu/skip, offsets 633, 634 and 1020 of
// each file) set to every other value. No verdict may be confident on
// damage a consistency check could catch. Time is not asserted.

#include <stdio.h>

#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include "tools/fuzz/damage.h"
#include "tools/fuzz/recordings.h"

namespace ncclwatch::fuzz {
namespace {

// Damaged strings are invalid UTF-8, which libprotobuf logs on every parse.
const bool kQuiet = (google::protobuf::SetLogHandler(nullptr), true);

const Recording& Named(const std::string& name) {
  for (const Recording& r : Recordings())
    if (r.name == name) return r;
  static const Recording none;
  ADD_FAILURE() << name << " is not built in";
  return none;
}

// Each failure as a line; the first few are shown.
void ExpectNone(const std::vector<std::string>& failures, size_t checked) {
  std::string shown;
  for (size_t i = 0; i < failures.size() && i < 12; ++i) shown += failures[i] + "\n";
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << checked << " damaged bytes gave a confident verdict:\n"
                                << shown;
}

TEST(DamageRegression, TheRecordingsAreBuiltInAndTheirVerdictsAreTheRecorded) {
  ASSERT_EQ(Named("gpu/skip").files.size(), 4u);
  ASSERT_EQ(Named("torch/kill-channels-4r").files.size(), 4u);
  EXPECT_EQ(VerdictOf(Named("gpu/skip").files).rfind("HANG: rank 3 never joined AllReduce #4 on comm 'world'", 0), 0u);
  EXPECT_EQ(VerdictOf(Named("torch/kill-channels-4r").files).rfind("ENDED: rank 1 ended first", 0), 0u);
}

TEST(DamageRegression, EverySeventhByteOfTwoRecordings) {
  for (const char* name : {"gpu/skip", "torch/kill-channels-4r"}) {
    const Recording& rec = Named(name);
    const std::string intact = VerdictOf(rec.files);
    std::vector<std::string> failures;
    size_t checked = 0;
    for (size_t f = 0; f < rec.files.size(); ++f)
      for (size_t off = 0; off < rec.files[f].second.size(); off += 7) {
        const uint8_t old = static_cast<uint8_t>(rec.files[f].second[off]);
        for (uint8_t mask : {static_cast<uint8_t>(1u << (off / 7 % 8)), uint8_t{0xff}}) {
          ++checked;
          std::string line = CheckOneByte(rec.files, intact, f, off, old ^ mask);
          if (!line.empty()) failures.push_back(std::string(name) + "/" + line);
        }
      }
    ExpectNone(failures, checked);
  }
}

// One flipped byte gave "MISMATCH ... rank 3 called count 0" (offset 1020
// of one file of testdata/gpu/skip) or a DEADLOCK naming garbled functions
// (offsets 633 and 634), each with exit status 1.
TEST(DamageRegression, TheReportedBytesTakeAnyValue) {
  const Recording& rec = Named("gpu/skip");
  const std::string intact = VerdictOf(rec.files);
  std::vector<std::string> failures;
  size_t checked = 0;
  for (size_t f = 0; f < rec.files.size(); ++f)
    for (size_t off : {633, 634, 1020}) {
      const uint8_t old = static_cast<uint8_t>(rec.files[f].second[off]);
      for (int v = 0; v < 256; ++v) {
        if (v == old) continue;
        ++checked;
        std::string line = CheckOneByte(rec.files, intact, f, off, static_cast<uint8_t>(v));
        if (!line.empty()) failures.push_back(line);
      }
    }
  ExpectNone(failures, checked);
}

// Every file of testdata/gpu/skip cut at 2/7 to 5/7 of its length (a copy
// taken while the job wrote them) used to read as OK.
TEST(DamageRegression, EveryFileCutShortIsNeverOk) {
  const Recording& rec = Named("gpu/skip");
  for (int k = 2; k <= 5; ++k) {
    Files cut = rec.files;
    for (auto& f : cut) f.second.resize(f.second.size() * k / 7);
    const std::string v = VerdictOf(cut);
    EXPECT_TRUE(v.rfind("INCOMPLETE", 0) == 0) << k << "/7: " << v;
  }
}

// What the check lets pass is a value a real file could hold, and only that.
TEST(DamageRegression, OnlyValuesARealFileCouldHoldArePlausible) {
  const Recording& rec = Named("gpu/skip");
  const std::string& bytes = rec.files[3].second;  // vm-961: AllReduce #1 at offset 1011, count 2048
  // The varint 2048 (0x80 0x10) of AllReduce #1's count, found by value.
  const size_t op = bytes.find(std::string("\x30\x80\x10", 3), 1011);
  ASSERT_NE(op, std::string::npos);
  std::string why;
  auto with = [&](size_t off, uint8_t v) {
    std::string b = bytes;
    b[off] = static_cast<char>(v);
    return b;
  };
  EXPECT_TRUE(Plausible(bytes, with(op + 2, 0x11), &why)) << why;   // count 2176
  EXPECT_EQ(why, "op.count");
  EXPECT_FALSE(Plausible(bytes, with(op + 2, 0x00), &why)) << why;  // count 0
  EXPECT_FALSE(Plausible(bytes, with(op + 1, 0x00), &why)) << why;  // count 0, then a varint 0x10: framing
  // A changed function id, a changed communicator: no value a check accepts.
  const size_t func = bytes.find(std::string("\x28\x01", 2), 1011);  // func: 1 (AllReduce)
  ASSERT_NE(func, std::string::npos);
  EXPECT_FALSE(Plausible(bytes, with(func + 1, 0x08), &why)) << why;
  EXPECT_EQ(why, "op.func");
}

}  // namespace
}  // namespace ncclwatch::fuzz

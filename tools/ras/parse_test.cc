// The RAS answers in testdata/ are built from NCCL's own printf formats
// (src/ras/client_support.cc, 2.24 to 2.30): a 4-rank job with one rank
// behind in AllReduce launches (text and JSON), a dead process (the
// example of NCCL's RAS documentation), a communicator stuck in init with
// an unresponsive rank (JSON), and 2.24's older wording.
#include "tools/ras/parse.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ncclwatch::tools {
namespace {

std::string Read(const std::string& name) {
  std::ifstream f("tools/ras/testdata/" + name);
  std::stringstream s;
  s << f.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

std::vector<int> Ranks(const report::RasRanks& r) { return {r.ranks().begin(), r.ranks().end()}; }

// 1 + the number of the line that holds `needle`.
int LineOf(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
}

std::string Replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

std::string ErrorOf(const std::string& answer) {
  report::RasView v;
  std::string error;
  EXPECT_FALSE(ParseRasAnswer(answer, &v, &error)) << v.DebugString();
  return error;
}

TEST(RasParseTest, TextOneRankBehind) {
  report::RasView v;
  std::string error;
  ASSERT_TRUE(ParseRasAnswer(Read("idle_rank.txt"), &v, &error)) << error;
  EXPECT_EQ(v.format(), "text");
  EXPECT_EQ(v.nccl_version(), "2.29.7+cuda12.9");
  EXPECT_EQ(v.comms_total(), 1u);
  EXPECT_EQ(v.comms_ok(), 0u);
  EXPECT_EQ(v.peers_size(), 0);
  ASSERT_EQ(v.comms_size(), 1);
  const report::RasComm& c = v.comms(0);
  EXPECT_EQ(c.id(), "#0-0");
  EXPECT_EQ(c.hash(), 0x8a1c61f6e31e2b29ull);
  EXPECT_EQ(c.size(), 4u);
  EXPECT_EQ(c.status(), "RUNNING");
  ASSERT_EQ(c.launches_size(), 1);
  EXPECT_EQ(c.launches(0).func(), "AllReduce");
  ASSERT_EQ(c.launches(0).groups_size(), 2);
  EXPECT_EQ(c.launches(0).groups(0).launches(), 12u);
  EXPECT_EQ(c.launches(0).groups(0).ranks().count(), 3u);
  EXPECT_TRUE(Ranks(c.launches(0).groups(0).ranks()).empty());  // the majority is not named
  EXPECT_EQ(c.launches(0).groups(1).launches(), 11u);
  EXPECT_EQ(Ranks(c.launches(0).groups(1).ranks()), std::vector<int>({2}));
  ASSERT_GE(v.warnings_size(), 1);
  EXPECT_EQ(v.warnings(0), "#0-0 (8a1c61f6e31e2b29) MISMATCH");
  EXPECT_EQ(v.unparsed_size(), 0);
}

// Answers of a real RAS (NCCL 2.28.9 in PyTorch 2.11, one H100, 4 ranks
// over sockets), asked while ranks 0 and 1 hung connecting point-to-point
// peers that never meet and ranks 2 and 3 waited in Broadcast #4.
TEST(RasParseTest, RealAnswersOfAPointToPointHang) {
  for (const char* name : {"real_2.28.9_p2p_hang.status.txt", "real_2.28.9_p2p_hang.json.txt"}) {
    report::RasView v;
    std::string error;
    ASSERT_TRUE(ParseRasAnswer(Read(name), &v, &error)) << name << ": " << error;
    EXPECT_NE(v.nccl_version().find("2.28.9"), std::string::npos) << name;
    ASSERT_EQ(v.comms_size(), 1) << name;
    const report::RasComm& c = v.comms(0);
    EXPECT_EQ(c.hash(), 0x9f0812c7b4950c2full) << name;
    EXPECT_EQ(c.size(), 4u) << name;
    EXPECT_EQ(v.peers_size(), 0) << name;
  }
  report::RasView v;
  std::string error;
  ASSERT_TRUE(ParseRasAnswer(Read("real_2.28.9_p2p_hang.status.txt"), &v, &error)) << error;
  ASSERT_EQ(v.comms(0).launches_size(), 1);
  EXPECT_EQ(v.comms(0).launches(0).func(), "Broadcast");
  ASSERT_EQ(v.comms(0).launches(0).groups_size(), 2);
  EXPECT_EQ(v.comms(0).launches(0).groups(0).launches(), 5u);
  EXPECT_EQ(v.comms(0).launches(0).groups(0).ranks().count(), 2u);
  EXPECT_EQ(v.comms(0).launches(0).groups(1).launches(), 4u);
  EXPECT_EQ(v.unparsed_size(), 0);
}

TEST(RasParseTest, JsonOneRankBehind) {
  report::RasView v;
  std::string error;
  ASSERT_TRUE(ParseRasAnswer(Read("idle_rank.json"), &v, &error)) << error;
  EXPECT_EQ(v.format(), "json");
  EXPECT_EQ(v.nccl_version(), "2.29.7");
  EXPECT_EQ(v.comms_total(), 1u);
  EXPECT_EQ(v.comms_ok(), 0u);
  ASSERT_EQ(v.comms_size(), 1);
  const report::RasComm& c = v.comms(0);
  EXPECT_EQ(c.hash(), 0x8a1c61f6e31e2b29ull);
  EXPECT_EQ(c.size(), 4u);
  EXPECT_EQ(c.status(), "RUNNING");
  EXPECT_EQ(c.statuses_size(), 0);  // every rank running
  EXPECT_EQ(c.unresponsive().count(), 0u);
  // Every collective, sorted by name; AllReduce's counts differ.
  ASSERT_EQ(c.launches_size(), 5);
  const report::RasLaunches& ar = c.launches(0);
  EXPECT_EQ(ar.func(), "AllGather");
  const report::RasLaunches* allreduce = nullptr;
  for (const report::RasLaunches& l : c.launches())
    if (l.func() == "AllReduce") allreduce = &l;
  ASSERT_NE(allreduce, nullptr);
  ASSERT_EQ(allreduce->groups_size(), 2);
  EXPECT_EQ(allreduce->groups(0).launches(), 12u);
  EXPECT_EQ(Ranks(allreduce->groups(0).ranks()), std::vector<int>({0, 1, 3}));
  EXPECT_EQ(allreduce->groups(1).launches(), 11u);
  EXPECT_EQ(Ranks(allreduce->groups(1).ranks()), std::vector<int>({2}));
}

TEST(RasParseTest, TextDeadProcess) {
  report::RasView v;
  std::string error;
  ASSERT_TRUE(ParseRasAnswer(Read("dead.txt"), &v, &error)) << error;
  EXPECT_EQ(v.dead_processes(), 1u);
  ASSERT_EQ(v.peers_size(), 1);
  EXPECT_EQ(v.peers(0).pid(), 3487984);
  EXPECT_EQ(v.peers(0).host(), "172.16.64.213");
  EXPECT_EQ(v.peers(0).gpus(), "5");
  EXPECT_TRUE(v.peers(0).dead());
  EXPECT_EQ(v.timeouts(), 2u);
  EXPECT_EQ(v.comms_total(), 8u);
  EXPECT_EQ(v.comms_ok(), 7u);
  ASSERT_EQ(v.comms_size(), 1);
  EXPECT_EQ(v.comms(0).size(), 32u);
  EXPECT_EQ(v.comms(0).hash(), 0xcf264af53edbe986ull);
  EXPECT_EQ(v.comms(0).unresponsive().count(), 1u);
  EXPECT_EQ(Ranks(v.comms(0).unresponsive()), std::vector<int>({21}));
  EXPECT_EQ(v.errors(0), "DEAD");
}

TEST(RasParseTest, JsonInitIncompleteAndUnresponsive) {
  report::RasView v;
  std::string error;
  ASSERT_TRUE(ParseRasAnswer(Read("init.json"), &v, &error)) << error;
  EXPECT_EQ(v.comms_total(), 2u);
  EXPECT_EQ(v.comms_ok(), 1u);
  EXPECT_EQ(v.timeouts(), 1u);
  ASSERT_EQ(v.peers_size(), 1);
  EXPECT_EQ(v.peers(0).pid(), 41234);
  EXPECT_FALSE(v.peers(0).dead());
  EXPECT_EQ(v.unresponsive_processes(), 1u);
  const report::RasComm& c = v.comms(1);
  EXPECT_EQ(c.hash(), 0x3f00a9c1d2e4b5a6ull);
  EXPECT_EQ(c.status(), "RUNNING");
  ASSERT_EQ(c.statuses_size(), 2);
  EXPECT_EQ(c.statuses(0).status(), "INIT");
  EXPECT_EQ(Ranks(c.statuses(0).ranks()), std::vector<int>({2}));
  EXPECT_EQ(c.statuses(1).status(), "RUNNING");
  EXPECT_EQ(Ranks(c.statuses(1).ranks()), std::vector<int>({0, 1}));
  EXPECT_EQ(Ranks(c.unresponsive()), std::vector<int>({3}));
  EXPECT_EQ(c.dead().count(), 0u);
}

TEST(RasParseTest, Text224Wording) {
  report::RasView v;
  std::string error;
  ASSERT_TRUE(ParseRasAnswer(Read("v2.24_status.txt"), &v, &error)) << error;
  EXPECT_EQ(v.unresponsive_processes(), 1u);
  ASSERT_EQ(v.comms_size(), 1);  // three entries, one communicator
  const report::RasComm& c = v.comms(0);
  EXPECT_EQ(c.hash(), 0x3e7u);
  EXPECT_EQ(c.status(), "INIT");
  EXPECT_EQ(Ranks(c.unresponsive()), std::vector<int>({3}));
  ASSERT_EQ(c.errors_size(), 1);
  EXPECT_EQ(c.errors(0).kind(), "init");
  EXPECT_EQ(c.errors(0).error(), "Internal error");
  EXPECT_EQ(Ranks(c.errors(0).ranks()), std::vector<int>({1}));
  ASSERT_EQ(c.statuses_size(), 2);
  EXPECT_EQ(c.statuses(0).status(), "RUNNING");
  EXPECT_EQ(Ranks(c.statuses(0).ranks()), std::vector<int>({0, 2}));
  EXPECT_EQ(c.statuses(1).status(), "INIT");
  EXPECT_EQ(Ranks(c.statuses(1).ranks()), std::vector<int>({1}));
  ASSERT_EQ(c.launches_size(), 1);
  EXPECT_EQ(c.launches(0).func(), "collective");
  ASSERT_EQ(c.launches(0).groups_size(), 2);
  EXPECT_EQ(c.launches(0).groups(1).launches(), 0u);
  EXPECT_EQ(Ranks(c.launches(0).groups(1).ranks()), std::vector<int>({1}));
}

TEST(RasParseTest, NewerLinesAreNotedNotRefused) {
  const std::string text = Replaced(Read("idle_rank.txt"), "  3 ranks have launched",
                                    "  Communicator ranks have a property RAS learned later\n  3 ranks have launched");
  report::RasView v;
  std::string error;
  ASSERT_TRUE(ParseRasAnswer(text, &v, &error)) << error;
  ASSERT_EQ(v.unparsed_size(), 1);
  EXPECT_EQ(v.unparsed(0), "line " + std::to_string(LineOf(text, "a property RAS")) +
                               ": Communicator ranks have a property RAS learned later");
}

TEST(RasParseTest, TextThatIsNotRasOrIsCut) {
  EXPECT_EQ(ErrorOf(""), "empty answer");
  EXPECT_NE(ErrorOf("hello\nworld\n").find("not an answer of NCCL's RAS: it begins 'hello'"), std::string::npos);
  EXPECT_EQ(ErrorOf("ERROR: Unknown command bogus\n"), "line 1: RAS answered 'ERROR: Unknown command bogus'");
  const std::string full = Read("idle_rank.txt");
  EXPECT_EQ(ErrorOf(full.substr(0, full.find("Warnings"))), "the answer ends before its Warnings section (cut short?)");
  EXPECT_EQ(ErrorOf(full.substr(0, full.find("Errors"))), "the answer ends before its Errors section (cut short?)");
  EXPECT_EQ(ErrorOf(full.substr(0, full.find("Group "))),
            "the answer ends before RAS's table of communicators (cut short?)");
}

TEST(RasParseTest, DamagedTextNamesTheLine) {
  const std::string full = Read("idle_rank.txt");
  auto at = [&](const std::string& text, const std::string& needle) {
    return "line " + std::to_string(LineOf(text, needle)) + ": ";
  };
  std::string t = Replaced(full, "#0-0 (8a1c61f6e31e2b29)", "#0-0 (8a1c61zz)");
  EXPECT_EQ(ErrorOf(t), at(t, "8a1c61zz") +
                            "a communicator's heading is '#GROUP-COMM (HASH) KIND', not '#0-0 (8a1c61zz) MISMATCH'");
  t = Replaced(full, "  3 ranks have launched up to operation 12", "  3 ranks have launched up to operation x");
  EXPECT_EQ(ErrorOf(t), at(t, "operation x") + "expected a count: '3 ranks have launched up to operation x'");
  t = Replaced(full, "  3 ranks", "  99999999999999999999 ranks");
  EXPECT_EQ(ErrorOf(t), at(t, "9999") + "expected a count: '99999999999999999999 ranks have launched up to operation 12'");
  t = Replaced(full, "RUNNING  MISMATCH", "RUNNING");
  EXPECT_EQ(ErrorOf(t).rfind(at(t, "    0         1") + "a row of the communicators table needs 8 columns", 0), 0u)
      << ErrorOf(t);
  t = Replaced(full, "  Rank 2 has launched up to operation 11", "  Rank 2000000 has launched up to operation 11");
  EXPECT_EQ(ErrorOf(t), at(t, "Rank 2000000") + "rank 2000000 out of range");
  t = Replaced(full, "  Communicator ranks have different AllReduce operation counts\n", "");
  EXPECT_EQ(ErrorOf(t), at(t, "  3 ranks") + "launch counts before the line that names the collective");
}

TEST(RasParseTest, DamagedJsonNamesThePath) {
  const std::string full = Read("idle_rank.json");
  std::string j = Replaced(full, "\"size\": 4,", "\"size\" 4,");
  EXPECT_EQ(ErrorOf(j).rfind("JSON line " + std::to_string(LineOf(j, "\"size\" 4")) + ": ", 0), 0u) << ErrorOf(j);
  EXPECT_EQ(ErrorOf(Replaced(full, "\"rank\": 1,", "\"rank\": \"1\",")),
            "JSON communicators[0].ranks[1].rank: expected a number, got a string");
  EXPECT_EQ(ErrorOf(Replaced(full, "\"rank\": 1,", "\"rank\": 0,")),
            "JSON communicators[0].ranks[1].rank: rank 0 listed twice");
  EXPECT_EQ(ErrorOf(Replaced(full, "\"AllReduce\": 11", "\"AllReduce\": -11")),
            "JSON communicators[0].ranks[2].collective_counts.AllReduce: expected a whole number from 0 to "
            "9007199254740992, got -11");
  EXPECT_EQ(ErrorOf(Replaced(full, "\"hash\": \"0x8a1c61f6e31e2b29\"", "\"hash\": \"8a1c\"")),
            "JSON communicators[0].hash: expected a hexadecimal number '0x...', got '8a1c'");
  EXPECT_EQ(ErrorOf(Replaced(full, "\"init_state\": 0,", "\"init_state\": 0.5,")),
            "JSON communicators[0].ranks[0].status.init_state: expected a whole number from 0 to 1000000, got 0.5");
  EXPECT_EQ(ErrorOf("{\"nccl_version\": \"2.29.7\"}"),
            "JSON communicators: missing: not an answer of NCCL's RAS (its STATUS query in JSON)");
  EXPECT_EQ(ErrorOf("{\"communicators\": [3]}"), "JSON communicators[0]: expected an object, got a number");
  EXPECT_EQ(ErrorOf(full.substr(0, full.size() / 2)).rfind("JSON", 0), 0u);
}

}  // namespace
}  // namespace ncclwatch::tools

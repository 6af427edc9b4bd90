// NCCL's RAS through the command line: `diagnose --ras FILE`, `watch
// --ras[=HOST:PORT]` against a FakeRasServer replaying answers, and `ras`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tools/cli.h"
#include "tools/ras/fake_ras_server.h"

namespace ncclwatch::tools {
namespace {

constexpr char kJob[] = "testdata/gpu/skip";  // a 4-rank hang: rank 3 skipped AllReduce #4
constexpr char kJson[] = "tools/ras/testdata/idle_rank.json";
constexpr char kText[] = "tools/ras/testdata/idle_rank.txt";

struct Result {
  int status = 0;
  std::string out, err;
};

Result Cli(std::vector<std::string> args) {
  args.insert(args.begin(), "ncclwatch");
  std::ostringstream out, err;
  Result r;
  r.status = RunCli(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// A loopback port nothing listens on: bound, then released.
std::string ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

TEST(RasCliTest, DiagnoseWithASavedAnswer) {
  const Result plain = Cli({"diagnose", kJob});
  const Result ras = Cli({"diagnose", "--ras", kJson, kJob});
  EXPECT_EQ(ras.status, plain.status);
  EXPECT_EQ(FirstLine(ras.out), FirstLine(plain.out));
  EXPECT_NE(ras.out.find(std::string("\nRAS (") + kJson +
                         "):\n  communicator 0x8a1c61f6e31e2b29 (4 ranks): AllReduce launches: ranks 0,1,3 at 12, "
                         "rank 2 at 11\n"),
            std::string::npos)
      << ras.out;
  const Result json = Cli({"diagnose", "--format=json", std::string("--ras=") + kJson, kJob});
  EXPECT_EQ(json.status, plain.status);
  EXPECT_NE(json.out.find("\"ncclVersion\": \"2.29.7\""), std::string::npos) << json.out;
  // The text answer reads the same.
  const Result text = Cli({"diagnose", "--ras", kText, kJob});
  EXPECT_NE(text.out.find("AllReduce launches: 3 ranks at 12, rank 2 at 11"), std::string::npos) << text.out;
}

TEST(RasCliTest, DiagnoseWithAnAnswerItCannotRead) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/ras.txt";
  std::ofstream(path) << "hello\n";
  const Result plain = Cli({"diagnose", kJob});
  Result r = Cli({"diagnose", "--ras", path, kJob});
  EXPECT_EQ(r.status, plain.status);
  EXPECT_NE(r.out.find("\nRAS answer from " + path + ": not an answer of NCCL's RAS: it begins 'hello'"),
            std::string::npos)
      << r.out;
  r = Cli({"diagnose", "--ras", path + ".missing", kJob});
  EXPECT_EQ(r.status, plain.status);
  EXPECT_NE(r.out.find("\ncannot read RAS answer " + path + ".missing: "), std::string::npos) << r.out;
}

TEST(RasCliTest, WatchAsksRas) {
  FakeRasServer s(FakeRasServer::kJson, Read(kText), Read(kJson));
  const Result plain = Cli({"diagnose", kJob});
  const Result r = Cli({"watch", "--interval=0.05", "--timeout=30", "--ras=" + s.address(), kJob});
  EXPECT_EQ(r.status, plain.status) << r.err;
  EXPECT_EQ(FirstLine(r.out), FirstLine(plain.out));
  EXPECT_NE(r.out.find("\nRAS (" + s.address() +
                       "):\n  communicator 0x8a1c61f6e31e2b29 (4 ranks): AllReduce launches: ranks 0,1,3 at 12, rank "
                       "2 at 11\n"),
            std::string::npos)
      << r.out;
  EXPECT_GE(s.connections(), 1);
  const std::vector<std::string> heard = s.heard();
  ASSERT_GE(heard.size(), 4u);
  EXPECT_EQ(heard[2], "SET FORMAT json");
}

TEST(RasCliTest, WatchWithRasUnreachableJudgesAsBefore) {
  const std::string address = ClosedPort();
  const Result plain = Cli({"diagnose", kJob});
  const Result r = Cli({"watch", "--interval=0.05", "--timeout=30", "--ras=" + address, kJob});
  EXPECT_EQ(r.status, plain.status);
  EXPECT_EQ(FirstLine(r.out), FirstLine(plain.out));
  const std::string said = "RAS not reachable at " + address + ": Connection refused";
  EXPECT_NE(r.out.find("\n" + said + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("ncclwatch watch: " + said + "\n"), std::string::npos) << r.err;
}

TEST(RasCliTest, BareRasTakesNoArgument) {
  // Whatever answers (or not) at the default address, the trace folder
  // stays an input.
  const Result plain = Cli({"diagnose", kJob});
  const Result r = Cli({"watch", "--interval=0.05", "--timeout=30", "--ras", kJob});
  EXPECT_EQ(r.status, plain.status) << r.err;
  EXPECT_EQ(FirstLine(r.out), FirstLine(plain.out));
  EXPECT_TRUE(r.out.find("\nRAS not reachable at 127.0.0.1:28028: ") != std::string::npos ||
              r.out.find("\nRAS (127.0.0.1:28028):\n") != std::string::npos)
      << r.out;
  // --ras= is the bare --ras.
  const Result empty = Cli({"watch", "--interval=0.05", "--timeout=30", "--ras=", kJob});
  EXPECT_EQ(empty.status, plain.status) << empty.err;
  EXPECT_TRUE(empty.out.find("\nRAS not reachable at 127.0.0.1:28028: ") != std::string::npos ||
              empty.out.find("\nRAS (127.0.0.1:28028):\n") != std::string::npos)
      << empty.out;
  const Result none = Cli({"watch", "--ras"});
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("no trace file or directory given"), std::string::npos) << none.err;
}

TEST(RasCliTest, RasPrintsTheAnswerAsItCame) {
  FakeRasServer old(FakeRasServer::kTextOnly, Read(kText));
  Result r = Cli({"ras", old.address()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, Read(kText));
  EXPECT_EQ(r.err,
            "ncclwatch ras: SET FORMAT json refused (NCCL before 2.28.7): ERROR: Unknown command SET FORMAT json; its "
            "text follows\n");

  FakeRasServer s(FakeRasServer::kJson, Read(kText), Read(kJson));
  r = Cli({"ras", s.address()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, Read(kJson));
  EXPECT_EQ(r.err, "");
  r = Cli({"ras", "--format=text", s.address()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, Read(kText));
  const std::vector<std::string> heard = s.heard();
  EXPECT_EQ(heard.back(), "VERBOSE STATUS");
  EXPECT_EQ(heard[heard.size() - 2], "TIMEOUT 3");  // no SET FORMAT asked

  FakeRasServer odd(FakeRasServer::kJson, "a report of another kind\n", "{\"what\": 1}\n");
  r = Cli({"ras", odd.address()});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "{\"what\": 1}\n");
  EXPECT_EQ(r.err,
            "ncclwatch ras: note: diagnose --ras will not read this answer: JSON communicators: missing: not an "
            "answer of NCCL's RAS (its STATUS query in JSON)\n");
}

TEST(RasCliTest, RasUnreachableOrMisused) {
  const std::string address = ClosedPort();
  Result r = Cli({"ras", address});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "ncclwatch ras: RAS not reachable at " + address + ": Connection refused\n");
  r = Cli({"ras", "127.0.0.1:1", "127.0.0.1:2"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(FirstLine(r.err), "ncclwatch ras: one RAS address at most, not 2");
  r = Cli({"ras", "--format=xml"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(FirstLine(r.err), "ncclwatch ras: --format must be json or text, not 'xml'");
  r = Cli({"ras", "node7:28028"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err,
            "ncclwatch ras: RAS address 'node7:28028': give a numeric IP address (or localhost); names are not "
            "resolved\n");
  r = Cli({"diagnose", "--ras=", kJob});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(FirstLine(r.err), "ncclwatch diagnose: --ras needs the file of a saved RAS answer (ncclwatch ras > FILE)");
  r = Cli({"watch", "--ras=node7:28028", kJob});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(FirstLine(r.err),
            "ncclwatch watch: --ras: RAS address 'node7:28028': give a numeric IP address (or localhost); names are "
            "not resolved");
}

}  // namespace
}  // namespace ncclwatch::tools

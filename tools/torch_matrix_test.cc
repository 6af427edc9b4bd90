// The PyTorch fault matrix recorded on a GPU (testdata/torch/, one fault per
// run, see its README.md): every run's verdict as testdata/torch/expected.tsv
// states it (exit status, culprit ranks, fragments of the first line), and
// one answer for one job: `watch` on the finished files says what
// `diagnose` says, `check` fails with diagnose's verdict wherever diagnose
// finds an error, and `merge` marks the mismatched and swapped rows.

#include <ctype.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "tools/cli.h"

namespace ncclwatch::tools {
namespace {

struct Expected {
  std::string run;   // the folder, "testdata/torch/kill-events-4r"
  std::string name;  // its name, "kill-events-4r"
  int exit_status = 0;
  std::set<std::string> culprits;
  std::vector<std::string> fragments;
};

void ReadMatrix(const std::string& matrix, std::vector<Expected>* out) {
  std::ifstream f(matrix + "/expected.tsv");
  if (!f) ADD_FAILURE() << matrix << "/expected.tsv: cannot be read";
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols = absl::StrSplit(line, '\t');
    if (cols.size() != 4) {
      ADD_FAILURE() << matrix << "/expected.tsv: not 4 tab-separated columns: " << line;
      continue;
    }
    Expected e;
    e.run = matrix + "/" + cols[0];
    e.name = cols[0];
    e.exit_status = std::stoi(cols[1]);
    if (cols[2] != "-")
      for (absl::string_view c : absl::StrSplit(cols[2], ',')) e.culprits.insert("rank " + std::string(c));
    for (absl::string_view fr : absl::StrSplit(cols[3], " | ")) e.fragments.emplace_back(fr);
    out->push_back(e);
  }
}

// Both GPU matrices: PyTorch's faults (testdata/torch) and the network's
// (testdata/net, made with the faulty net plugin). `run` is the folder.
std::vector<Expected> ReadExpected() {
  std::vector<Expected> out;
  for (const char* matrix : {"testdata/torch", "testdata/net"}) ReadMatrix(matrix, &out);
  return out;
}

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

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// A verdict with its measured durations taken out ("waited 78.2 s" ->
// "waited # s"): watch judges a job whose killed processes never finalized
// as of the latest time every file covers, so its waits may end a little
// earlier than diagnose's on the same files; the answer is the same.
std::string Shape(std::string v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (isdigit(static_cast<unsigned char>(v[i]))) {
      size_t j = i;
      while (j < v.size() && (isdigit(static_cast<unsigned char>(v[j])) || v[j] == '.' || v[j] == ',')) ++j;
      if (v.compare(j, 2, " s") == 0 || v.compare(j, 3, " ms") == 0 || v.compare(j, 3, " us") == 0) {
        out += '#';
        i = j - 1;
        continue;
      }
    }
    out += v[i];
  }
  return out;
}

TEST(TorchMatrix, EveryRunHasItsVerdict) {
  const std::vector<Expected> all = ReadExpected();
  ASSERT_GE(all.size(), 30u);
  for (const Expected& e : all) {
    const std::string& dir = e.run;
    const Result d = Nw({"diagnose", "--format=json", dir});
    const Result t = Nw({"diagnose", dir});
    EXPECT_EQ(t.status, e.exit_status) << e.run << ": " << FirstLine(t.out);
    // A link that only turned slow lets the job finish: nothing to find
    // in what hung (a slowdown is the gate's, against a baseline).
    if (e.name.find("healthy-") == std::string::npos && e.name.rfind("net-slow-", 0) != 0) {
      EXPECT_NE(t.status, 0) << e.run << ": a fault gave exit 0";
    }
    const std::string verdict = FirstLine(t.out);
    size_t at = 0;
    for (const std::string& fr : e.fragments) {
      const size_t p = verdict.find(fr, at);
      EXPECT_NE(p, std::string::npos) << e.run << ": '" << fr << "' not in: " << verdict;
      if (p != std::string::npos) at = p + fr.size();
    }
    // Culprits of the findings (not of their consequences), from the JSON.
    std::set<std::string> culprits;
    const size_t findings = d.out.find("\"findings\"");
    const size_t consequences = d.out.find("\"consequences\"");
    for (size_t p = d.out.find("\"culprits\"", findings); p != std::string::npos && p < consequences;
         p = d.out.find("\"culprits\"", p + 1)) {
      const size_t end = d.out.find(']', p);
      for (size_t q = d.out.find("\"name\": \"", p); q != std::string::npos && q < end;
           q = d.out.find("\"name\": \"", q + 1)) {
        const size_t s = q + 9;
        culprits.insert(d.out.substr(s, d.out.find('"', s) - s));
      }
    }
    EXPECT_EQ(culprits, e.culprits) << e.run << ": " << verdict;
  }
}

TEST(TorchMatrix, EveryViewGivesOneAnswer) {
  for (const Expected& e : ReadExpected()) {
    const std::string& dir = e.run;
    const Result d = Nw({"diagnose", dir});
    // The job has ended: watch ends with diagnose's verdict and status.
    const Result w = Nw({"watch", "--timeout", "5", "--interval", "0.05", dir});
    EXPECT_EQ(Shape(FirstLine(w.out)), Shape(FirstLine(d.out))) << e.run;
    EXPECT_EQ(w.status, d.status) << e.run;
    // check fails, and says why in diagnose's words.
    const std::string base = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + e.name + ".json";
    ASSERT_EQ(Nw({"stats", "--format=json", "-o", base, dir}).status, 0) << e.run;
    const Result c = Nw({"check", "--baseline", base, dir});
    if (FirstLine(d.out).rfind("STRAGGLER: ", 0) == 0) {
      // A warning: the gate passes on it, and says it.
      EXPECT_NE(FirstLine(c.out).find("diagnose warns: " + FirstLine(d.out)), std::string::npos) << FirstLine(c.out);
    } else if (d.status != 0) {
      EXPECT_NE(c.status, 0) << e.run << ": " << FirstLine(c.out);
      EXPECT_EQ(FirstLine(c.out).rfind("FAIL: ", 0), 0u) << e.run;
    } else {
      EXPECT_EQ(c.status, 0) << e.run << ": " << FirstLine(c.out);  // a healthy run against itself
    }
    if (d.status == 1) {
      EXPECT_NE(c.out.find(FirstLine(d.out)), std::string::npos) << e.run << ": " << FirstLine(c.out);
    }
    // merge marks what diagnose calls a mismatch or an order mismatch.
    const std::string v = FirstLine(d.out);
    const Result m = Nw({"merge", dir});
    if (v.rfind("MISMATCH: ", 0) == 0) {
      EXPECT_NE(m.out.find(" mismatch]"), std::string::npos) << e.run;
    }
    if (v.rfind("ORDER MISMATCH: ", 0) == 0) {
      EXPECT_NE(m.out.find("[order mismatch]"), std::string::npos) << e.run;
    }
  }
}

}  // namespace
}  // namespace ncclwatch::tools

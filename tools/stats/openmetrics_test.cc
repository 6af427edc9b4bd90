#include "tools/stats/openmetrics.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <set>
#include <sstream>

namespace ncclwatch::tools {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Reads the text back as the OpenMetrics grammar has it: metadata lines
// "# TYPE|UNIT|HELP family ...", samples "name{label="value",...} number"
// of a family declared before them, and "# EOF" last.
bool Parse(const std::string& text, std::map<std::string, std::string>* types, std::vector<Sample>* samples,
           std::string* error) {
  std::istringstream in(text);
  std::string line;
  bool eof = false;
  while (std::getline(in, line)) {
    if (eof) return *error = "text after # EOF", false;
    if (line == "# EOF") {
      eof = true;
      continue;
    }
    if (line.rfind("# ", 0) == 0) {
      std::istringstream l(line.substr(2));
      std::string kind, family, rest;
      l >> kind >> family;
      std::getline(l, rest);
      if (kind == "TYPE") (*types)[family] = rest.substr(1);
      else if (kind == "UNIT" && family.size() < rest.size()) return *error = "unit not a suffix: " + line, false;
      else if (kind == "UNIT" && family.compare(family.size() - rest.size() + 1, std::string::npos, rest.substr(1)) != 0)
        return *error = "unit not a suffix: " + line, false;
      else if (kind != "UNIT" && kind != "HELP") return *error = "bad metadata: " + line, false;
      continue;
    }
    Sample s;
    size_t i = line.find('{');
    s.name = line.substr(0, i);
    if (i == std::string::npos) return *error = "no labels: " + line, false;
    ++i;
    while (line[i] != '}') {
      const size_t eq = line.find("=\"", i);
      if (eq == std::string::npos) return *error = "bad label: " + line, false;
      const std::string key = line.substr(i, eq - i);
      std::string value;
      for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\') {
          ++i;
          value += line[i] == 'n' ? '\n' : line[i];
        } else {
          value += line[i];
        }
      }
      if (i >= line.size()) return *error = "unterminated label: " + line, false;
      s.labels[key] = value;
      ++i;
      if (line[i] == ',') ++i;
    }
    char* end = nullptr;
    s.value = strtod(line.c_str() + i + 2, &end);
    if (line[i + 1] != ' ' || *end != '\0') return *error = "bad value: " + line, false;
    std::string family = s.name;
    if (!types->count(family) && family.size() > 6 && family.compare(family.size() - 6, 6, "_total") == 0)
      family.resize(family.size() - 6);
    if (!types->count(family)) return *error = "sample of an undeclared family: " + line, false;
    if ((*types)[family] == "counter" && family == s.name) return *error = "counter sample without _total", false;
    samples->push_back(s);
  }
  if (!eof) return *error = "no # EOF", false;
  return true;
}

TEST(OpenMetricsTest, ParsesBack) {
  stats::Stats s;
  stats::StatRow* r = s.add_rows();
  r->set_comm("tp \"a\\b\"\nc");
  r->set_nranks(4);
  r->set_func("AllReduce");
  r->set_bucket("1 MiB");
  r->set_calls(12);
  r->set_samples(44);
  r->set_latency_p50_us(6.5);
  r->set_busbw_gbps(81.25);
  stats::RankRow* k = s.add_ranks();
  k->set_comm("world");
  k->set_nranks(4);
  k->set_rank(3);
  k->set_lateness_p50_us(250);
  k->set_lateness_p99_us(900);
  std::ostringstream out;
  WriteOpenMetrics(s, out);
  std::map<std::string, std::string> types;
  std::vector<Sample> samples;
  std::string error;
  ASSERT_TRUE(Parse(out.str(), &types, &samples, &error)) << error << "\n" << out.str();
  EXPECT_EQ(types["ncclwatch_calls"], "counter");
  EXPECT_EQ(types["ncclwatch_latency_p50_seconds"], "gauge");
  std::map<std::string, const Sample*> by_name;
  for (const Sample& x : samples) by_name[x.name] = &x;
  ASSERT_TRUE(by_name.count("ncclwatch_latency_p50_seconds"));
  const Sample& lat = *by_name["ncclwatch_latency_p50_seconds"];
  EXPECT_DOUBLE_EQ(lat.value, 6.5e-6);
  EXPECT_EQ(lat.labels.at("comm"), "tp \"a\\b\"\nc");  // escaped, and back
  EXPECT_EQ(lat.labels.at("func"), "AllReduce");
  EXPECT_EQ(lat.labels.at("size"), "1 MiB");
  EXPECT_EQ(lat.labels.at("nranks"), "4");
  EXPECT_DOUBLE_EQ(by_name["ncclwatch_busbw_bytes_per_second"]->value, 81.25e9);
  EXPECT_DOUBLE_EQ(by_name["ncclwatch_calls_total"]->value, 12);
  EXPECT_EQ(by_name.count("ncclwatch_latency_p99_seconds"), 0u);  // the row has none: left out
  ASSERT_TRUE(by_name.count("ncclwatch_rank_lateness_p50_seconds"));
  EXPECT_EQ(by_name["ncclwatch_rank_lateness_p50_seconds"]->labels.at("rank"), "3");
  EXPECT_DOUBLE_EQ(by_name["ncclwatch_rank_lateness_p50_seconds"]->value, 250e-6);
  EXPECT_EQ(out.str().substr(out.str().size() - 6), "# EOF\n");
}

// The Prometheus text format: every sample's name has its own TYPE and HELP
// before it (a counter's is its _total name), no UNIT or EOF line, and the
// job id as a label of every sample.
TEST(OpenMetricsTest, PrometheusTextNamesEachSample) {
  stats::Stats s;
  stats::StatRow* r = s.add_rows();
  r->set_comm("world");
  r->set_nranks(2);
  r->set_func("AllGather");
  r->set_bucket("4 KiB");
  r->set_calls(3);
  r->set_latency_p50_us(2);
  stats::RankRow* k = s.add_ranks();
  k->set_comm("world");
  k->set_nranks(2);
  k->set_rank(1);
  k->set_lateness_p50_us(5);
  std::ostringstream out;
  WriteOpenMetrics(s, out, {MetricsText::kPrometheus, "job \"7\""});
  std::istringstream in(out.str());
  std::string line;
  std::set<std::string> helped, typed;
  int samples = 0;
  while (std::getline(in, line)) {
    ASSERT_FALSE(line.empty());
    if (line[0] == '#') {
      std::istringstream l(line);
      std::string hash, kind, name;
      l >> hash >> kind >> name;
      ASSERT_TRUE(kind == "HELP" || kind == "TYPE") << line;
      (kind == "HELP" ? helped : typed).insert(name);
      continue;
    }
    const std::string name = line.substr(0, line.find('{'));
    EXPECT_TRUE(helped.count(name)) << line;
    EXPECT_TRUE(typed.count(name)) << line;
    const std::string job = "{job_id=\"job \\\"7\\\"\",";
    EXPECT_EQ(line.compare(name.size(), job.size(), job), 0) << line;
    ++samples;
  }
  EXPECT_EQ(samples, 5);  // calls, samples, incomplete, latency p50, a rank's lateness p50
  EXPECT_NE(out.str().find("# TYPE ncclwatch_calls_total counter\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("# TYPE ncclwatch_latency_p50_seconds gauge\n"), std::string::npos);
}

}  // namespace
}  // namespace ncclwatch::tools

// The metrics `ncclwatch check` knows and its options (check.h):
// tolerances, --allow-incomplete.

#include <stdlib.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tools/stats/check.h"
#include "tools/stats/check_internal.h"

namespace ncclwatch::tools {
namespace check_internal {
namespace {

// --allow-incomplete's names, each with the kind it accepts.
constexpr std::pair<const char*, report::IncompleteKind> kAllowable[] = {
    {"cuda-graphs", report::INCOMPLETE_CUDA_GRAPHS},
};

}  // namespace

#define NCCLWATCH_METRIC(n, src, p, unit, bw, tail, timed, field)                                          \
  MetricDef {                                                                                               \
    n, src, p, unit, bw, tail, timed, [](const stats::StatRow& r) { return r.has_##field(); },              \
        [](const stats::StatRow& r) { return r.field(); }                                                   \
  }

const std::vector<MetricDef>& Metrics() {
  static const std::vector<MetricDef> kMetrics = {
      NCCLWATCH_METRIC("latency_p50", Source::kLatency, 50, "us", false, false, true, latency_p50_us),
      NCCLWATCH_METRIC("latency_p99", Source::kLatency, 99, "us", false, true, true, latency_p99_us),
      NCCLWATCH_METRIC("algbw", Source::kLatency, 50, "GB/s", true, false, true, algbw_gbps),
      NCCLWATCH_METRIC("busbw", Source::kLatency, 50, "GB/s", true, false, true, busbw_gbps),
      NCCLWATCH_METRIC("delay_p50", Source::kDelay, 50, "us", false, false, false, delay_p50_us),
      NCCLWATCH_METRIC("delay_p99", Source::kDelay, 99, "us", false, true, false, delay_p99_us),
      NCCLWATCH_METRIC("skew_p50", Source::kSkew, 50, "us", false, false, false, skew_p50_us),
      NCCLWATCH_METRIC("skew_p99", Source::kSkew, 99, "us", false, true, false, skew_p99_us),
  };
  return kMetrics;
}
#undef NCCLWATCH_METRIC

const MetricDef* FindMetric(const std::string& name) {
  for (const MetricDef& m : Metrics())
    if (name == m.name) return &m;
  return nullptr;
}

std::string AllowName(report::IncompleteKind kind) {
  for (const auto& [name, k] : kAllowable)
    if (k == kind) return name;
  return report::IncompleteKind_Name(kind);
}

}  // namespace check_internal

using namespace check_internal;  // NOLINT: the implementation's own parts

CheckOptions DefaultCheckOptions() {
  CheckOptions o;
  o.tolerance_pct = {{"latency_p50", 10.0}, {"latency_p99", 20.0}, {"busbw", 10.0}, {kArrival, 10000.0}};
  return o;
}

std::vector<std::string> CheckMetrics() {
  std::vector<std::string> v;
  for (const MetricDef& m : Metrics()) v.push_back(m.name);
  v.push_back(kArrival);
  return v;
}


bool ParseAllowIncomplete(const std::vector<std::string>& args, CheckOptions* opts, std::string* error) {
  for (const std::string& arg : args) {
    std::stringstream ss(arg);
    std::string part;
    while (std::getline(ss, part, ',')) {
      if (part.empty()) continue;
      bool known = false;
      for (const auto& [name, kind] : kAllowable)
        if (part == name) {
          opts->allow_incomplete.insert(kind);
          known = true;
        }
      if (!known) {
        std::string names;
        for (const auto& [name, kind] : kAllowable) names += (names.empty() ? "" : ", ") + std::string(name);
        *error = "--allow-incomplete takes " + names +
                 " (operations captured into CUDA graphs, which cannot be matched across ranks); got '" + part + "'";
        return false;
      }
    }
  }
  return true;
}

bool ParseTolerance(const std::string& arg, CheckOptions* opts, std::string* error) {
  std::stringstream ss(arg);
  std::string part;
  bool any = false;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    any = true;
    const size_t eq = part.find('=');
    const std::string metric = part.substr(0, eq);
    const bool arrival = metric == kArrival;
    const MetricDef* def = FindMetric(metric);
    if (eq == std::string::npos || (def == nullptr && !arrival)) {
      std::string names;
      for (const std::string& n : CheckMetrics()) names += (names.empty() ? "" : ", ") + n;
      *error = "--tolerance wants METRIC=PCT (arrival=TIME) with METRIC one of " + names + "; got '" + part + "'";
      return false;
    }
    std::string v = part.substr(eq + 1);
    if (v == "off") {
      opts->tolerance_pct.erase(metric);
      continue;
    }
    // Arrival is a time (a rank's lateness is about 0 in a healthy job, so a
    // percent of it means nothing): "500us", "5ms", or us.
    double unit = 1;
    if (arrival && v.size() > 2 && v.compare(v.size() - 2, 2, "ms") == 0) {
      unit = 1000;
      v.resize(v.size() - 2);
    } else if (arrival && v.size() > 2 && v.compare(v.size() - 2, 2, "us") == 0) {
      v.resize(v.size() - 2);
    } else if (!arrival && !v.empty() && v.back() == '%') {
      v.pop_back();
    }
    char* end = nullptr;
    const double value = v.empty() ? NAN : strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(value) || value < 0) {
      *error = "--tolerance " + metric + ": '" + part.substr(eq + 1) + "' is not " +
               (arrival ? "a time >= 0 ('500us', '5ms')" : "a percentage >= 0") + " (or 'off')";
      return false;
    }
    if (def != nullptr && def->bandwidth && value >= 100) {
      *error = "--tolerance " + metric + ": a bandwidth cannot drop by " + part.substr(eq + 1) +
               " (a limit of 100% or more never fails); give less than 100";
      return false;
    }
    opts->tolerance_pct[metric] = value * unit;
  }
  if (!any) {
    *error = "--tolerance wants METRIC=PCT";
    return false;
  }
  return true;
}

}  // namespace ncclwatch::tools

#include "tools/stats/openmetrics.h"

#include <stdio.h>

#include <functional>
#include <vector>

#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace {

struct Family {
  const char* name;  // without the unit or _total
  const char* type;  // "gauge" or "counter"
  const char* unit;  // "" for none
  const char* help;
  double scale;      // from the StatRow's unit to the family's
  std::function<bool(const stats::StatRow&)> has;
  std::function<double(const stats::StatRow&)> get;
};

#define NCCLWATCH_OPTIONAL(field) \
  [](const stats::StatRow& r) { return r.has_##field(); }, [](const stats::StatRow& r) { return r.field(); }
#define NCCLWATCH_COUNT(field) \
  [](const stats::StatRow&) { return true; }, [](const stats::StatRow& r) { return static_cast<double>(r.field()); }

const std::vector<Family>& Families() {
  static const std::vector<Family> kFamilies = {
      {"ncclwatch_calls", "counter", "", "Operations of the row (a collective counts once).", 1, NCCLWATCH_COUNT(calls)},
      {"ncclwatch_samples", "counter", "", "Rank operations timed (a collective on N ranks gives up to N).", 1,
       NCCLWATCH_COUNT(samples)},
      {"ncclwatch_incomplete", "counter", "", "Rank operations never seen completing.", 1, NCCLWATCH_COUNT(incomplete)},
      {"ncclwatch_latency_p50", "gauge", "seconds", "Median latency of a rank operation.", 1e-6,
       NCCLWATCH_OPTIONAL(latency_p50_us)},
      {"ncclwatch_latency_p99", "gauge", "seconds", "99th percentile latency of a rank operation.", 1e-6,
       NCCLWATCH_OPTIONAL(latency_p99_us)},
      {"ncclwatch_algbw", "gauge", "bytes_per_second", "Algorithm bandwidth at the median latency (nccl-tests).", 1e9,
       NCCLWATCH_OPTIONAL(algbw_gbps)},
      {"ncclwatch_busbw", "gauge", "bytes_per_second", "Bus bandwidth at the median latency (nccl-tests).", 1e9,
       NCCLWATCH_OPTIONAL(busbw_gbps)},
      {"ncclwatch_delay_p50", "gauge", "seconds", "Median enqueue-to-kernel delay.", 1e-6,
       NCCLWATCH_OPTIONAL(delay_p50_us)},
      {"ncclwatch_delay_p99", "gauge", "seconds", "99th percentile enqueue-to-kernel delay.", 1e-6,
       NCCLWATCH_OPTIONAL(delay_p99_us)},
      {"ncclwatch_skew_p50", "gauge", "seconds", "Median arrival skew of a collective across its ranks.", 1e-6,
       NCCLWATCH_OPTIONAL(skew_p50_us)},
      {"ncclwatch_skew_p99", "gauge", "seconds", "99th percentile arrival skew of a collective across its ranks.", 1e-6,
       NCCLWATCH_OPTIONAL(skew_p99_us)},
  };
  return kFamilies;
}
#undef NCCLWATCH_OPTIONAL
#undef NCCLWATCH_COUNT

std::string Number(double v) {
  char buf[40];
  snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string FullName(const char* name, const char* unit) {
  return *unit ? std::string(name) + "_" + unit : std::string(name);
}

// A family's metadata. OpenMetrics names a counter's family without the
// `_total` its samples carry; the Prometheus text format has no families
// apart from sample names, so there TYPE and HELP name the sample itself
// (else its parsers, promtool and node_exporter's textfile collector, see a
// second, untyped metric without help).
void Header(std::ostream& out, const std::string& family, const std::string& sample, const char* type,
            const char* unit, const char* help, MetricsText text) {
  const std::string& named = text == MetricsText::kPrometheus ? sample : family;
  out << "# TYPE " << named << " " << type << "\n";
  if (*unit && text == MetricsText::kOpenMetrics) out << "# UNIT " << named << " " << unit << "\n";
  out << "# HELP " << named << " " << help << "\n";
}

// `job_id="..."` and a comma, or nothing without a job id.
std::string JobLabel(const std::string& job_id) {
  return job_id.empty() ? std::string() : "job_id=\"" + OpenMetricsLabel(job_id) + "\",";
}

}  // namespace

void WriteOpenMetrics(const stats::Stats& s, std::ostream& out, const MetricsOptions& opts) {
  const std::string job = JobLabel(opts.job_id);
  for (const Family& f : Families()) {
    const std::string family = FullName(f.name, f.unit);
    const std::string sample = family + (std::string(f.type) == "counter" ? "_total" : "");
    Header(out, family, sample, f.type, f.unit, f.help, opts.text);
    for (const stats::StatRow& r : s.rows()) {
      if (!f.has(r)) continue;
      out << sample << "{" << job << "comm=\"" << OpenMetricsLabel(r.comm()) << "\",nranks=\"" << r.nranks() << "\",func=\""
          << OpenMetricsLabel(r.func()) << "\",size=\"" << OpenMetricsLabel(r.bucket()) << "\"} "
          << Number(f.get(r) * f.scale) << "\n";
    }
  }
  for (int p : {50, 99}) {
    const std::string family = "ncclwatch_rank_lateness_p" + std::to_string(p) + "_seconds";
    Header(out, family, family, "gauge", "seconds",
           p == 50 ? "Median lateness of a rank at collectives: its start minus the median start of their ranks."
                   : "99th percentile lateness of a rank at collectives.",
           opts.text);
    for (const stats::RankRow& r : s.ranks()) {
      const bool has = p == 50 ? r.has_lateness_p50_us() : r.has_lateness_p99_us();
      if (!has) continue;
      out << family << "{" << job << "comm=\"" << OpenMetricsLabel(r.comm()) << "\",nranks=\"" << r.nranks() << "\",rank=\""
          << r.rank() << "\"} " << Number((p == 50 ? r.lateness_p50_us() : r.lateness_p99_us()) * 1e-6) << "\n";
    }
  }
  if (opts.text == MetricsText::kOpenMetrics) out << "# EOF\n";
}

}  // namespace ncclwatch::tools

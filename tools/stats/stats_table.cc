// PrintStatsTable (stats.h): the rows of `ncclwatch stats` as an aligned
// table, and the ranks held on their GPUs.

#include <stdio.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "tools/stats/stats.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace {

std::string Num(double v, int decimals) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

// A table with aligned columns: text columns left, numbers right.
class Table {
 public:
  explicit Table(std::vector<std::pair<std::string, bool>> cols) : cols_(std::move(cols)) {
    std::vector<std::string> h;
    for (auto& c : cols_) h.push_back(c.first);
    rows_.push_back(std::move(h));
  }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const {
    std::vector<size_t> w(cols_.size(), 0);
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], DisplayWidth(r[i]));
    for (const auto& r : rows_) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) {
        const std::string pad(w[i] - DisplayWidth(r[i]), ' ');
        if (i > 0) line += "  ";
        line += cols_[i].second ? pad + r[i] : r[i] + (i + 1 < r.size() ? pad : "");
      }
      out << line << "\n";
    }
  }

 private:
  std::vector<std::pair<std::string, bool>> cols_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace

// Ranks whose kernels wait on their GPU behind other work (RankRow's
// gpu_lateness), at the median: the ranks the others wait for in a job that
// is slow but not hung, though every host enqueues in time, which no
// host-side view shows. The GPU's side is only known to a polling interval
// (~10 ms), so less than kGpuLateUs is not named. Ranks late on the host are
// diagnose's STRAGGLER, which weighs them against the clocks' error.
constexpr double kGpuLateUs = 20000;

void PrintLateRanks(const stats::Stats& s, std::ostream& out) {
  std::vector<const stats::RankRow*> late;
  for (const stats::RankRow& r : s.ranks())
    if (r.has_gpu_lateness_p50_us() && r.gpu_lateness_p50_us() >= kGpuLateUs) late.push_back(&r);
  std::stable_sort(late.begin(), late.end(), [](const stats::RankRow* a, const stats::RankRow* b) {
    return a->gpu_lateness_p50_us() > b->gpu_lateness_p50_us();
  });
  for (const stats::RankRow* r : late) {
    out << "held on its GPU: rank " << r->rank() << " of '" << Printable(r->comm()) << "' (" << r->nranks()
        << " ranks)";
    if (r->procs_size() > 0) out << " [" << Printable(absl::StrJoin(r->procs(), ", ")) << "]";
    out << ": its " << Printable(r->gpu_func()) << " kernels waited " << Num(r->gpu_lateness_p50_us() / 1000, 1)
        << " ms longer than the median rank's behind other work on its GPU (p50 of " << r->gpu_samples()
        << "; CUDA events polled every ~10 ms); its host enqueued its collectives "
        << Num(r->lateness_p50_us() / 1000, 1) << " ms after the median rank\n";
  }
}

void PrintStatsTable(const stats::Stats& s, std::ostream& out) {
  out << s.processes() << " process(es); clocks: " << (s.alignment_method().empty() ? "not aligned" : s.alignment_method())
      << "\n";
  if (s.rows().empty()) {
    out << "no operations\n";
    return;
  }
  Table t({{"comm", false},
           {"func", false},
           {"size", true},
           {"calls", true},
           {"samples", true},
           {"timing", false},
           {"p50 us", true},
           {"p99 us", true},
           {"algbw GB/s", true},
           {"busbw GB/s", true},
           {"delay p50 us", true},
           {"delay p99 us", true},
           {"skew p50 us", true},
           {"skew p99 us", true},
           {"incomplete", true}});
  bool any_cpu = false, any_polled = false;
  for (const stats::StatRow& r : s.rows()) {
    any_cpu |= r.timing() == "cpu";
    any_polled |= r.timing() == "polled";
    // '~': quantiles from sketches (within 1%).
    const std::string q = r.sketched() ? "~" : "";
    auto qopt = [&](bool has, double v, int decimals) { return has ? q + Num(v, decimals) : std::string("-"); };
    t.Add({Printable(r.comm()), Printable(r.func()), r.bucket(), std::to_string(r.calls()), std::to_string(r.samples()),
           r.timing(), qopt(r.has_latency_p50_us(), r.latency_p50_us(), 1),
           qopt(r.has_latency_p99_us(), r.latency_p99_us(), 1), qopt(r.has_algbw_gbps(), r.algbw_gbps(), 2),
           qopt(r.has_busbw_gbps(), r.busbw_gbps(), 2), qopt(r.has_delay_p50_us(), r.delay_p50_us(), 1),
           qopt(r.has_delay_p99_us(), r.delay_p99_us(), 1), qopt(r.has_skew_p50_us(), r.skew_p50_us(), 1),
           qopt(r.has_skew_p99_us(), r.skew_p99_us(), 1), std::to_string(r.incomplete())});
  }
  t.Print(out);
  out << "size: bytes as nccl-tests counts them (AllGather, ReduceScatter: the whole array), bucket [size, 2 x size);"
         " bandwidths at the p50 latency\n"
         "samples: one per rank and operation (a collective on 4 ranks is 1 call and up to 4 samples); each rank's"
         " first of a row is warm-up, not a sample\n";
  if (any_cpu)
    out << "timing 'cpu': no GPU kernel timestamps for that row; latency is enqueue start to completion as the"
           " plugin saw it (includes queueing behind earlier work)\n";
  for (const std::string& n : s.notes()) out << Printable(n) << "\n";
  if (any_polled)
    out << "timing 'polled': completions from CUDA events, seen by the plugin's writer every ~10 ms: latency is an"
           " upper bound and no bandwidth is given (NCCLWATCH_COMPLETIONS=channels times the GPU)\n";
  PrintLateRanks(s, out);
}

}  // namespace ncclwatch::tools

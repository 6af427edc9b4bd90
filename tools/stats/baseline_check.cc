#include "tools/stats/baseline_check.h"

#include <google/protobuf/repeated_field.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "tools/stats/compare.h"
#include "tools/stats/stats.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace {

// Each range a number may hold, said as the error says it.
enum class Range { kPositive, kNonNegative, kAny };

const char* RangeText(Range r) {
  switch (r) {
    case Range::kPositive: return "a finite number > 0";
    case Range::kNonNegative: return "a finite number >= 0";
    default: return "a finite number";
  }
}

bool InRange(double v, Range r) {
  if (!std::isfinite(v)) return false;
  return r == Range::kAny || (r == Range::kPositive ? v > 0 : v >= 0);
}

std::string ValueText(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return absl::StrCat(v);
}

// As the file has it, cut to the tools' name length: every output escapes
// what it prints (tools/text), so escaping here would show twice.
std::string Quoted(const std::string& s) { return "'" + CutName(s) + "'"; }

// Collects the problems of one baseline: the first is said in full, the
// rest counted. `where_` is the row being looked at ("row 3 (...)").
class Problems {
 public:
  void At(std::string where) { where_ = std::move(where); }
  void Add(const std::string& what) {
    if (count_++ == 0) first_ = where_.empty() ? what : where_ + ": " + what;
  }
  // A number of the row: `field` as the file names it.
  void Number(const char* field, double v, Range r) {
    if (!InRange(v, r)) Add(absl::StrCat(field, " is ", ValueText(v), "; it must be ", RangeText(r)));
  }
  // An optional number: checked when present.
  void Optional(const char* field, bool has, double v, Range r) {
    if (has) Number(field, v, r);
  }
  // A percentile is given exactly when its row has samples.
  void Percentile(const char* field, bool has, double v, Range r, uint64_t samples, const char* count_field) {
    if (has && samples == 0)
      Add(absl::StrCat(field, " is given but ", count_field, " is 0"));
    else if (!has && samples > 0)
      Add(absl::StrCat(field, " is missing though ", count_field, " is ", samples));
    Optional(field, has, v, r);
  }
  // A sample list: every value in range, sorted, and no longer than
  // `count`; when `exact` (the list of that count's own samples), as long
  // as it says: all of them up to kMaxRowSamples, at least that many above.
  void Samples(const char* field, const google::protobuf::RepeatedField<double>& v, Range r, uint64_t count,
               const char* count_field, bool exact = true) {
    int bad = 0, unsorted = 0;
    int first_bad = -1, first_unsorted = -1;
    for (int i = 0; i < v.size(); ++i) {
      if (!InRange(v[i], r) && bad++ == 0) first_bad = i;
      // NaN compares false either way: counted above, not here.
      if (i > 0 && v[i] < v[i - 1] && unsorted++ == 0) first_unsorted = i;
    }
    if (bad > 0)
      Add(absl::StrCat(field, "[", first_bad, "] is ", ValueText(v[first_bad]), "; every value must be ", RangeText(r),
                       bad > 1 ? absl::StrCat(" (", bad, " values are not)") : ""));
    if (unsorted > 0)
      Add(absl::StrCat(field, "[", first_unsorted, "] is ", ValueText(v[first_unsorted]), ", less than the value before"
                       " it; the samples are written sorted"));
    const uint64_t n = static_cast<uint64_t>(v.size());
    if (n > count)
      Add(absl::StrCat(field, " holds ", n, " values, more than ", count_field, " (", count, ")"));
    else if (!exact)
      return;
    else if (count <= kMaxRowSamples && n != count)
      Add(absl::StrCat(field, " holds ", n, " values where ", count_field, " is ", count,
                       " (every sample is kept up to ", kMaxRowSamples, ")"));
    else if (count > kMaxRowSamples && n < kMaxRowSamples)
      Add(absl::StrCat(field, " holds ", n, " values where ", count_field, " is ", count, " (at least ",
                       kMaxRowSamples, " are kept)"));
  }
  // A percentile given beside every one of its samples (a list of
  // `count` values, not a sketch's): the nearest-rank one of them, the
  // same double (stats derives both from one nanosecond count).
  void Matches(const char* field, bool has, double v, const google::protobuf::RepeatedField<double>& samples,
               double p, uint64_t count, bool sketched) {
    const uint64_t n = static_cast<uint64_t>(samples.size());
    if (!has || !std::isfinite(v) || sketched || n == 0 || n != count ||
        !std::is_sorted(samples.begin(), samples.end()))
      return;
    const uint64_t rank = std::min(n, std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(p / 100.0 * n))));
    if (v != samples[static_cast<int>(rank - 1)])
      Add(absl::StrCat(field, " is ", ValueText(v), " where the nearest-rank p", p, " of its ", n, " samples is ",
                       ValueText(samples[static_cast<int>(rank - 1)])));
  }
  bool ok() const { return count_ == 0; }
  std::string Message() const {
    return count_ <= 1 ? first_ : absl::StrCat(first_, " (and ", count_ - 1, " more problem", count_ > 2 ? "s" : "", ")");
  }

 private:
  std::string where_, first_;
  uint64_t count_ = 0;
};

bool KnownTiming(const std::string& t) { return t == "gpu" || t == "cpu" || t == "polled" || t == "none"; }

void CheckRow(const stats::StatRow& r, int index, Problems* p) {
  p->At(absl::StrCat("row ", index, " (comm ", Quoted(r.comm()), ", ", r.nranks(), " ranks, ", Quoted(r.func()), ", ",
                     Quoted(r.bucket()), ")"));
  if (r.comm().empty()) p->Add("comm is missing or empty; every row names its communicator");
  if (r.func().empty()) p->Add("func is missing or empty; every row names its function");
  if (r.nranks() < 1) p->Add(absl::StrCat("nranks is ", r.nranks(), "; a communicator has at least 1 rank"));
  if (r.bucket_log2() < -2 || r.bucket_log2() > 63)
    p->Add(absl::StrCat("bucketLog2 is ", r.bucket_log2(), "; it must be -2 (unknown), -1 (0 bytes) or 0 to 63"));
  else if (r.bucket() != BucketLabel(r.bucket_log2()))
    p->Add(absl::StrCat("bucket is ", Quoted(r.bucket()), " where bucketLog2 ", r.bucket_log2(), " is ",
                        Quoted(BucketLabel(r.bucket_log2()))));
  if (!KnownTiming(r.timing()))
    p->Add(absl::StrCat("timing is ", Quoted(r.timing()), "; it must be 'gpu', 'cpu', 'polled' or 'none'"));
  else if ((r.timing() == "none") != (r.samples() == 0))
    p->Add(absl::StrCat("timing is ", Quoted(r.timing()), " with samples ", r.samples(),
                        "; a row has samples exactly when it has a timing"));
  p->Optional("bytes", r.has_bytes(), r.bytes(), Range::kNonNegative);
  p->Percentile("latencyP50Us", r.has_latency_p50_us(), r.latency_p50_us(), Range::kPositive, r.samples(), "samples");
  p->Percentile("latencyP99Us", r.has_latency_p99_us(), r.latency_p99_us(), Range::kPositive, r.samples(), "samples");
  if (r.has_latency_p50_us() && r.has_latency_p99_us() && r.latency_p99_us() < r.latency_p50_us())
    p->Add(absl::StrCat("latencyP99Us (", ValueText(r.latency_p99_us()), ") is less than latencyP50Us (",
                        ValueText(r.latency_p50_us()), ")"));
  p->Optional("algbwGbps", r.has_algbw_gbps(), r.algbw_gbps(), Range::kNonNegative);
  p->Optional("busbwGbps", r.has_busbw_gbps(), r.busbw_gbps(), Range::kNonNegative);
  p->Optional("busbwFactor", r.has_busbw_factor(), r.busbw_factor(), Range::kPositive);
  // A sample of 0 is a kernel shorter than the clock's tick; a percentile
  // of 0 is no latency to hold a run to.
  p->Samples("latencyUs", r.latency_us(), Range::kNonNegative, r.samples(), "samples");
  p->Matches("latencyP50Us", r.has_latency_p50_us(), r.latency_p50_us(), r.latency_us(), 50, r.samples(),
             r.sketched());
  p->Matches("latencyP99Us", r.has_latency_p99_us(), r.latency_p99_us(), r.latency_us(), 99, r.samples(),
             r.sketched());
  // Enqueue to kernel start: on two clocks (CPU and GPU), so any sign.
  // The delayed operations are some of the timed ones; no count of their own.
  p->Samples("delayUs", r.delay_us(), Range::kAny, r.samples(), "samples", false);
  p->Percentile("delayP50Us", r.has_delay_p50_us(), r.delay_p50_us(), Range::kAny, r.delay_us_size(), "delayUs");
  p->Percentile("delayP99Us", r.has_delay_p99_us(), r.delay_p99_us(), Range::kAny, r.delay_us_size(), "delayUs");
  p->Samples("skewUs", r.skew_us(), Range::kNonNegative, r.skew_samples(), "skewSamples");
  p->Percentile("skewP50Us", r.has_skew_p50_us(), r.skew_p50_us(), Range::kNonNegative, r.skew_samples(),
                "skewSamples");
  p->Percentile("skewP99Us", r.has_skew_p99_us(), r.skew_p99_us(), Range::kNonNegative, r.skew_samples(),
                "skewSamples");
  p->Matches("skewP50Us", r.has_skew_p50_us(), r.skew_p50_us(), r.skew_us(), 50, r.skew_samples(), r.sketched());
}

void CheckRank(const stats::RankRow& r, int index, Problems* p) {
  p->At(absl::StrCat("ranks[", index, "] (comm ", Quoted(r.comm()), ", ", r.nranks(), " ranks, rank ", r.rank(), ")"));
  if (r.comm().empty()) p->Add("comm is missing or empty; every rank row names its communicator");
  if (r.nranks() < 1) p->Add(absl::StrCat("nranks is ", r.nranks(), "; a communicator has at least 1 rank"));
  if (r.rank() < 0 || (r.nranks() >= 1 && r.rank() >= r.nranks()))
    p->Add(absl::StrCat("rank is ", r.rank(), "; it must be 0 to nranks - 1"));
  // Lateness is against the median rank: early ranks are negative.
  p->Samples("latenessUs", r.lateness_us(), Range::kAny, r.samples(), "samples");
  p->Percentile("latenessP50Us", r.has_lateness_p50_us(), r.lateness_p50_us(), Range::kAny, r.samples(), "samples");
  p->Percentile("latenessP99Us", r.has_lateness_p99_us(), r.lateness_p99_us(), Range::kAny, r.samples(), "samples");
  p->Matches("latenessP50Us", r.has_lateness_p50_us(), r.lateness_p50_us(), r.lateness_us(), 50, r.samples(),
             r.sketched());
  p->Percentile("gpuLatenessP50Us", r.has_gpu_lateness_p50_us(), r.gpu_lateness_p50_us(), Range::kAny,
                r.gpu_samples(), "gpuSamples");
  p->Percentile("gpuLatenessP99Us", r.has_gpu_lateness_p99_us(), r.gpu_lateness_p99_us(), Range::kAny,
                r.gpu_samples(), "gpuSamples");
}

// Where byte `offset` of `bytes` is, for a person with an editor.
std::string Position(std::string_view bytes, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (bytes[i] == '\n') ++line, column = 0;
    ++column;
  }
  return absl::StrCat("byte ", offset, " (line ", line, ", column ", column, ")");
}

}  // namespace

bool ValidateBaseline(const stats::Stats& s, std::string* error) {
  Problems p;
  p.Number("alignmentErrorUs", s.alignment_error_us(), Range::kNonNegative);
  if (s.processes() == 0 && (s.rows_size() > 0 || s.ranks_size() > 0))
    p.Add("processes is 0, yet the baseline has rows: stats of no process have none");
  // The keys `check` matches rows by (check.cc KeyOf): a second row of a
  // key would be compared in place of the first, unseen.
  std::set<std::tuple<std::string, int32_t, std::string, int32_t>> rows;
  for (int i = 0; i < s.rows_size(); ++i) {
    const stats::StatRow& r = s.rows(i);
    CheckRow(r, i, &p);
    if (!rows.emplace(r.comm(), r.nranks(), r.func(), r.bucket_log2()).second)
      p.Add("a second row of this communicator, size, function and bucket; each is one row");
  }
  std::set<std::tuple<std::string, int32_t, int32_t>> ranks;
  for (int i = 0; i < s.ranks_size(); ++i) {
    const stats::RankRow& r = s.ranks(i);
    CheckRank(r, i, &p);
    if (!ranks.emplace(r.comm(), r.nranks(), r.rank()).second)
      p.Add("a second row of this communicator, size and rank; each is one row");
  }
  if (p.ok()) return true;
  *error = p.Message();
  return false;
}

bool ParseBaseline(std::string_view bytes, stats::Stats* s, std::string* error) {
  // JSON holds no raw control byte (RFC 8259: only space, tab, LF and CR
  // between tokens; others escaped inside strings). Protobuf's parser stops
  // quietly at some of them (a NUL): what follows would go unread.
  for (size_t i = 0; i < bytes.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      *error = absl::StrCat(Position(bytes, i), ": a control byte (0x", absl::Hex(c, absl::kZeroPad2),
                            ") where JSON has none; the file is damaged or not a stats baseline");
      return false;
    }
  }
  if (!StatsFromJson(std::string(bytes), s, error)) return false;
  return ValidateBaseline(*s, error);
}

}  // namespace ncclwatch::tools

// A mergeable quantile sketch of int64 values (nanoseconds), so that a
// per-node summary (tools/summary/) can carry the timings of every
// operation of a rank in bounded room and `stats`, `check` and diagnose
// read quantiles of the whole job from summaries.
//
// How: DDSketch (Masson, Rim, Lee, VLDB 2019). A value v > 0 falls in the
// bucket i = ceil(log_gamma(v)), gamma = (1 + a) / (1 - a), which holds
// (gamma^(i-1), gamma^i]; a quantile answers the bucket's 2 gamma^i /
// (gamma + 1), within a relative error a of every value of the bucket, so of
// the exact nearest-rank quantile (stats.h Percentile). Negative values go
// to a mirror set of buckets, zero to its own count. Count, sum, min and max
// are exact; a quantile is clamped to [min, max], and the first and last
// ranks are min and max exactly.
//
// Merging adds bucket counts: it is exact, associative and commutative, so
// the summaries of a job merge in any order to the sketch of all its
// values. Bounded: at most kMaxBuckets buckets per sign (values from 1 ns to
// 10^4 s need about 1,500 at a = 1%); past it the buckets nearest zero are
// folded into one, whose values then lose the bound (never seen with
// timings, whose spread within a row is a few decades).
//
// Not for: values needing an absolute error (a 1% bound on a 10 s value is
// 100 ms), or exact ranks other than the first and last. Allocation: one
// array per sign, 12 to 16 bytes a bucket used (a merge of 16,384 summaries
// holds about 2 million sketches: a map node per bucket was most of its
// memory). Thread safety: none; one thread per sketch.

#ifndef TOOLS_MODEL_SKETCH_H_
#define TOOLS_MODEL_SKETCH_H_

#include <stddef.h>
#include <stdint.h>

#include <utility>
#include <vector>

namespace ncclwatch::tools {

class Sketch {
 public:
  // The relative error of every quantile: 1%.
  static constexpr double kRelativeError = 0.01;
  static constexpr size_t kMaxBuckets = 2048;
  // Bucket index of |v| -> count, ascending by index, no count zero.
  using Buckets = std::vector<std::pair<int32_t, uint64_t>>;

  void Add(int64_t v, uint64_t n = 1);
  void Merge(const Sketch& o);

  uint64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  double sum() const { return sum_; }
  int64_t min() const { return min_; }
  int64_t max() const { return max_; }

  // The nearest-rank quantile (p in (0, 100], as stats.h Percentile) within
  // kRelativeError; the sketch is not empty.
  int64_t Quantile(double p) const;

  // `n` values spread as the sketch's (each bucket's value, repeated its
  // share of n; min and max included): what `check` bootstraps when the
  // values themselves are gone.
  std::vector<int64_t> Representatives(size_t n) const;

  // The buckets, for a serializer: index -> count, per sign; zeros apart.
  const Buckets& positive() const { return pos_; }
  const Buckets& negative() const { return neg_; }
  uint64_t zeros() const { return zeros_; }
  // The inverse: a sketch from its buckets and exact facts. False when they
  // disagree (counts that do not add up, min above max, indexes out of
  // order): a damaged input.
  static bool FromParts(Buckets pos, Buckets neg, uint64_t zeros, double sum, int64_t min, int64_t max, Sketch* out);

  // The bucket of |v| > 0 and its value.
  static int32_t Index(uint64_t magnitude);
  static double Value(int32_t index);

  bool operator==(const Sketch& o) const;

 private:
  static void Fold(Buckets* buckets);
  // The value at 1-based rank r (1 <= r <= count_).
  int64_t AtRank(uint64_t r) const;

  Buckets pos_, neg_;
  uint64_t zeros_ = 0;
  uint64_t count_ = 0;
  double sum_ = 0;
  int64_t min_ = 0, max_ = 0;
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_SKETCH_H_

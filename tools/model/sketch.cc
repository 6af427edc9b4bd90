#include "tools/model/sketch.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace ncclwatch::tools {
namespace {

const double kGamma = (1 + Sketch::kRelativeError) / (1 - Sketch::kRelativeError);
const double kLogGamma = std::log(kGamma);

uint64_t Magnitude(int64_t v) { return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

uint64_t Total(const Sketch::Buckets& b) {
  uint64_t n = 0;
  for (const auto& [i, c] : b) n += c;
  return n;
}

// `o`'s counts added to `b`'s.
void AddBuckets(const Sketch::Buckets& o, Sketch::Buckets* b) {
  if (o.empty()) return;
  Sketch::Buckets sum;
  sum.reserve(b->size() + o.size());
  auto x = b->cbegin();
  auto y = o.cbegin();
  while (x != b->cend() || y != o.cend()) {
    if (y == o.cend() || (x != b->cend() && x->first < y->first)) sum.push_back(*x++);
    else if (x == b->cend() || y->first < x->first) sum.push_back(*y++);
    else sum.push_back({x->first, x->second + y->second}), ++x, ++y;
  }
  *b = std::move(sum);
}

}  // namespace

int32_t Sketch::Index(uint64_t magnitude) {
  return static_cast<int32_t>(std::ceil(std::log(static_cast<double>(magnitude)) / kLogGamma));
}

double Sketch::Value(int32_t index) { return 2 * std::pow(kGamma, index) / (kGamma + 1); }

void Sketch::Add(int64_t v, uint64_t n) {
  if (n == 0) return;
  if (count_ == 0) {
    min_ = max_ = v;
  } else {
    min_ = std::min(min_, v);
    max_ = std::max(max_, v);
  }
  count_ += n;
  sum_ += static_cast<double>(v) * static_cast<double>(n);
  if (v == 0) {
    zeros_ += n;
    return;
  }
  Buckets* b = v > 0 ? &pos_ : &neg_;
  const int32_t i = Index(Magnitude(v));
  auto it = std::lower_bound(b->begin(), b->end(), i, [](const auto& x, int32_t k) { return x.first < k; });
  if (it != b->end() && it->first == i) {
    it->second += n;
    return;
  }
  b->insert(it, {i, n});
  if (b->size() > kMaxBuckets) Fold(b);
}

void Sketch::Merge(const Sketch& o) {
  if (o.count_ == 0) return;
  if (count_ == 0) {
    min_ = o.min_;
    max_ = o.max_;
  } else {
    min_ = std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
  }
  count_ += o.count_;
  sum_ += o.sum_;
  zeros_ += o.zeros_;
  AddBuckets(o.pos_, &pos_);
  AddBuckets(o.neg_, &neg_);
  Fold(&pos_);
  Fold(&neg_);
}

void Sketch::Fold(Buckets* b) {
  if (b->size() <= kMaxBuckets) return;
  // The buckets nearest zero into the lowest one kept.
  const size_t gone = b->size() - (kMaxBuckets - 1);
  uint64_t folded = 0;
  for (size_t k = 0; k < gone; ++k) folded += (*b)[k].second;
  b->erase(b->begin(), b->begin() + static_cast<std::ptrdiff_t>(gone));
  b->begin()->second += folded;
}

int64_t Sketch::AtRank(uint64_t r) const {
  if (r <= 1) return min_;
  if (r >= count_) return max_;
  double v = 0;
  uint64_t seen = 0;
  bool found = false;
  // Most negative first: the negative buckets by falling magnitude.
  for (auto it = neg_.rbegin(); it != neg_.rend() && !found; ++it) {
    seen += it->second;
    if (seen >= r) v = -Value(it->first), found = true;
  }
  if (!found) {
    seen += zeros_;
    if (seen >= r) v = 0, found = true;
  }
  for (auto it = pos_.begin(); it != pos_.end() && !found; ++it) {
    seen += it->second;
    if (seen >= r) v = Value(it->first), found = true;
  }
  // Clamped before rounding: a bucket index read from a damaged file may
  // stand for a value past int64.
  if (v >= static_cast<double>(max_)) return max_;
  if (v <= static_cast<double>(min_)) return min_;
  return std::min(std::max(static_cast<int64_t>(std::llround(v)), min_), max_);
}

int64_t Sketch::Quantile(double p) const {
  // Nearest rank: ceil(p/100 * n), 1-based, as Percentile.
  uint64_t rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::min(std::max<uint64_t>(rank, 1), count_);
  return AtRank(rank);
}

std::vector<int64_t> Sketch::Representatives(size_t n) const {
  std::vector<int64_t> out;
  if (count_ == 0 || n == 0) return out;
  // Every value's estimate when they fit, else `n` evenly spaced ranks (as
  // compare.h SketchSamples picks from exact samples).
  const uint64_t k = std::min<uint64_t>(count_, n);
  out.reserve(k);
  for (uint64_t i = 0; i < k; ++i) {
    const uint64_t rank = count_ <= n ? i + 1
                                      : static_cast<uint64_t>((static_cast<double>(i) + 0.5) *
                                                              static_cast<double>(count_) / static_cast<double>(n)) + 1;
    out.push_back(AtRank(std::min(rank, count_)));
  }
  return out;
}

bool Sketch::FromParts(Buckets pos, Buckets neg, uint64_t zeros, double sum, int64_t min, int64_t max,
                       Sketch* out) {
  const uint64_t n = Total(pos) + Total(neg) + zeros;
  if (n > 0 && min > max) return false;
  if (pos.size() > kMaxBuckets || neg.size() > kMaxBuckets) return false;
  // Indexes of |v| >= 1 lie in [0, Index(2^64)]: any other is damage.
  const int32_t top = Index(UINT64_MAX);
  for (const auto* b : {&pos, &neg})
    if (!b->empty() && (b->begin()->first < 0 || b->rbegin()->first > top)) return false;
  for (const auto* b : {&pos, &neg})
    for (size_t k = 0; k < b->size(); ++k)
      if ((*b)[k].second == 0 || (k > 0 && (*b)[k - 1].first >= (*b)[k].first)) return false;
  *out = Sketch();
  out->pos_ = std::move(pos);
  out->neg_ = std::move(neg);
  out->zeros_ = zeros;
  out->count_ = n;
  out->sum_ = n == 0 ? 0 : sum;
  out->min_ = n == 0 ? 0 : min;
  out->max_ = n == 0 ? 0 : max;
  return true;
}

bool Sketch::operator==(const Sketch& o) const {
  return pos_ == o.pos_ && neg_ == o.neg_ && zeros_ == o.zeros_ && count_ == o.count_ && min_ == o.min_ &&
         max_ == o.max_ && sum_ == o.sum_;
}

}  // namespace ncclwatch::tools

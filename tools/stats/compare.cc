#include "tools/stats/compare.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace ncclwatch::tools {
namespace {

// Uniform in [0, 1) from the top 53 bits of one draw.
double Uniform(std::mt19937_64* rng) { return static_cast<double>((*rng)() >> 11) * 0x1.0p-53; }

// A standard normal (Box-Muller). Our own, with Gamma below, rather than
// <random>'s distributions, whose algorithms are each library's: the
// stream, and so every interval, is the same on every machine.
double Normal(std::mt19937_64* rng) {
  const double u1 = 1.0 - Uniform(rng), u2 = Uniform(rng);  // u1 in (0, 1]
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Gamma(a, 1) for a >= 1: Marsaglia and Tsang, "A simple method for
// generating gamma variables" (2000).
double Gamma(double a, std::mt19937_64* rng) {
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = Normal(rng);
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    const double u = Uniform(rng);
    if (u < 1.0 - 0.0331 * x * x * x * x || std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

// The nearest-rank `p`-th percentile of a resample (n draws with
// replacement) of `sorted`, drawn directly. The resample's k-th smallest
// value is sorted[J], J the k-th smallest of n indices uniform on
// [0, n): floor(n U) for n uniforms U in [0, 1), so J = floor(n U(k)), and
// the k-th smallest of n uniforms is Beta(k, n - k + 1), G1 / (G1 + G2)
// for independent Gamma(k) and Gamma(n - k + 1). The bootstrap's law
// exactly, in constant time where a resample costs n draws and a
// selection.
// With `m` draws instead of n (m-out-of-n), k is the rank among the m: the
// k-th smallest of m uniforms picks the index, as above.
double ResampledPercentile(const std::vector<double>& sorted, size_t m, size_t k, std::mt19937_64* rng) {
  const size_t n = sorted.size();
  const double g1 = Gamma(static_cast<double>(k), rng), g2 = Gamma(static_cast<double>(m - k + 1), rng);
  const size_t j = static_cast<size_t>(static_cast<double>(n) * (g1 / (g1 + g2)));
  return sorted[std::min(j, n - 1)];
}

// The nearest rank (1-based) of the p-th percentile of n values.
size_t RankOf(size_t n, double p) {
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(n)));
  return std::min(std::max<size_t>(rank, 1), n);
}

}  // namespace

double PercentileOf(std::vector<double>* v, double p) {
  const size_t rank = RankOf(v->size(), p);
  auto nth = v->begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(v->begin(), nth, v->end());
  return *nth;
}

bool CompareSamples(const std::vector<double>& baseline, const std::vector<double>& current, double p, Effect effect,
                    const BootstrapOptions& opts, SampleComparison* out, size_t baseline_units,
                    size_t current_units) {
  if (baseline.empty() || current.empty() || opts.resamples < 1) return false;
  auto effect_of = [effect](double b, double c) { return effect == Effect::kRatio ? c / b - 1.0 : c - b; };
  std::vector<double> b = baseline, c = current;
  std::sort(b.begin(), b.end());
  std::sort(c.begin(), c.end());
  const size_t kb = RankOf(b.size(), p), kc = RankOf(c.size(), p);
  out->baseline = b[kb - 1];
  out->current = c[kc - 1];
  if (effect == Effect::kRatio && !(out->baseline > 0 && out->current > 0)) return false;
  out->effect = effect_of(out->baseline, out->current);
  // Draws per resample: the independent units, never more than the samples.
  const size_t mb = baseline_units == 0 ? b.size() : std::min(baseline_units, b.size());
  const size_t mc = current_units == 0 ? c.size() : std::min(current_units, c.size());
  const size_t rb = RankOf(mb, p), rc = RankOf(mc, p);
  std::mt19937_64 rng(opts.seed);
  std::vector<double> effects;
  effects.reserve(static_cast<size_t>(opts.resamples));
  for (int i = 0; i < opts.resamples; ++i) {
    const double sb = ResampledPercentile(b, mb, rb, &rng), sc = ResampledPercentile(c, mc, rc, &rng);
    // Positive samples give positive statistics; a zero one (a 0 us latency)
    // makes the ratio unbounded, which is what it is.
    effects.push_back(effect == Effect::kRatio && !(sb > 0) ? HUGE_VAL : effect_of(sb, sc));
  }
  std::sort(effects.begin(), effects.end());
  const double n = static_cast<double>(effects.size());
  auto at = [&](double q) {
    const size_t i = static_cast<size_t>(std::min(n - 1, std::max(0.0, std::floor(q * n))));
    return effects[i];
  };
  out->low = at(opts.alpha);
  out->high = at(1.0 - opts.alpha);
  return true;
}

double IndependentShare(const std::vector<std::vector<double>>& series) {
  size_t shortest = SIZE_MAX;
  for (const auto& x : series)
    if (!x.empty()) shortest = std::min(shortest, x.size());
  if (shortest == SIZE_MAX) return 1.0;
  // Fewer than 8 blocks of 8 say little of the blocks' variance: the
  // calls are taken as they are.
  if (shortest < 64) return 1.0;
  const size_t b = static_cast<size_t>(std::sqrt(static_cast<double>(shortest)));
  double ss = 0, ss_blocks = 0;
  size_t df = 0, df_blocks = 0;
  for (const auto& x : series) {
    if (x.empty()) continue;
    double mean = 0;
    for (double v : x) mean += v;
    mean /= static_cast<double>(x.size());
    for (double v : x) ss += (v - mean) * (v - mean);
    df += x.size() - 1;
    const size_t blocks = x.size() / b;
    for (size_t k = 0; k < blocks; ++k) {
      double m = 0;
      for (size_t i = k * b; i < (k + 1) * b; ++i) m += x[i];
      m /= static_cast<double>(b);
      ss_blocks += (m - mean) * (m - mean);
    }
    df_blocks += blocks - 1;
  }
  if (ss <= 0 || df == 0 || df_blocks == 0) return 1.0;
  const double inflation = static_cast<double>(b) * (ss_blocks / static_cast<double>(df_blocks)) /
                           (ss / static_cast<double>(df));
  return inflation <= 1.0 ? 1.0 : 1.0 / inflation;
}

std::vector<double> SketchSamples(std::vector<double> samples, size_t max) {
  std::sort(samples.begin(), samples.end());
  if (samples.size() <= max || max == 0) return samples;
  std::vector<double> out(max);
  const double n = static_cast<double>(samples.size());
  for (size_t i = 0; i < max; ++i)
    out[i] = samples[static_cast<size_t>((static_cast<double>(i) + 0.5) * n / static_cast<double>(max))];
  return out;
}

}  // namespace ncclwatch::tools

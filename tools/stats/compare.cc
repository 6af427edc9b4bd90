#include "tools/stats/compare.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace ncclwatch::tools {
namespace {

// A resample of `from` into `to` (same size), drawn with `rng`. The modulo
// bias is below 2^-50 for the sizes a row holds.
void Resample(const std::vector<double>& from, std::mt19937_64* rng, std::vector<double>* to) {
  to->resize(from.size());
  for (double& x : *to) x = from[(*rng)() % from.size()];
}

}  // namespace

double PercentileOf(std::vector<double>* v, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v->size())));
  rank = std::min(std::max<size_t>(rank, 1), v->size());
  auto nth = v->begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(v->begin(), nth, v->end());
  return *nth;
}

bool CompareSamples(const std::vector<double>& baseline, const std::vector<double>& current, double p, Effect effect,
                    const BootstrapOptions& opts, SampleComparison* out) {
  if (baseline.empty() || current.empty() || opts.resamples < 1) return false;
  auto effect_of = [effect](double b, double c) { return effect == Effect::kRatio ? c / b - 1.0 : c - b; };
  std::vector<double> b = baseline, c = current;
  out->baseline = PercentileOf(&b, p);
  out->current = PercentileOf(&c, p);
  if (effect == Effect::kRatio && !(out->baseline > 0 && out->current > 0)) return false;
  out->effect = effect_of(out->baseline, out->current);
  std::mt19937_64 rng(opts.seed);
  std::vector<double> effects;
  effects.reserve(static_cast<size_t>(opts.resamples));
  for (int i = 0; i < opts.resamples; ++i) {
    Resample(baseline, &rng, &b);
    Resample(current, &rng, &c);
    const double sb = PercentileOf(&b, p), sc = PercentileOf(&c, p);
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

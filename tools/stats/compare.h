// Compares two sets of samples of one quantity (a row's latencies in a
// baseline and in a run) with a percentile bootstrap: how much did the
// median (or the p99) change, and within what interval.
//
// The method, which README.md ("The CI gate") states with its measured
// false-alarm rate: each side is resampled with replacement, independently,
// `resamples` times; each time the statistic (nearest-rank percentile) is
// taken on both resamples and their effect (ratio minus one, or difference)
// noted. A resample's percentile is drawn directly from its law (an order
// statistic of uniform draws: a Beta variate, compare.cc), so a comparison
// costs a sort of each side and `resamples` constant-time draws, not
// `resamples` times the samples. The interval is the alpha and 1 - alpha quantiles of those effects;
// a change is significant at one-sided level alpha when the interval does
// not hold zero. The random numbers come from std::mt19937_64 (its output
// is fixed by the C++ standard) with a fixed seed, turned into variates by
// our own code, not <random>'s distributions (each library's own): the
// same samples give the same interval on every machine (libm's log, cos
// and sqrt aside, which differ by an ulp at most), so a gate never flips
// on a rerun of the same data.
//
// Not for samples that are not independent draws of one quantity (the
// samples of several runs of different speeds, pooled, understate the
// spread between runs: the caller raises its floor to that spread).
//
// Allocation: two sorted copies of the samples per call. No shared state.

#ifndef TOOLS_STATS_COMPARE_H_
#define TOOLS_STATS_COMPARE_H_

#include <stddef.h>
#include <stdint.h>

#include <vector>

namespace ncclwatch::tools {

struct BootstrapOptions {
  double alpha = 0.01;           // one side: the interval is 1 - 2 alpha
  int resamples = 1000;
  uint64_t seed = 0x6e63636c77617463;  // "ncclwatc"
};

enum class Effect {
  kRatio,       // current / baseline - 1 (statistics must be positive)
  kDifference,  // current - baseline
};

struct SampleComparison {
  double baseline = 0, current = 0;  // the statistic of each side
  double effect = 0;                 // of the statistics themselves
  double low = 0, high = 0;          // the bootstrap interval of the effect
};

// Nearest-rank percentile (p in (0, 100]) of `v`, which it reorders; v non-empty.
double PercentileOf(std::vector<double>* v, double p);

// Compares the p-th percentile of `current` with that of `baseline`. False
// when either side is empty, or for kRatio when a statistic is not positive.
// `baseline_units`, `current_units`: how many independent draws each side's
// samples hold (0: one per sample). A collective on N ranks gives N samples
// that move together (its ranks end it together), so the samples of C
// collectives hold C draws: each resample then takes C values, not N x C,
// which is the bootstrap over collectives where a collective's samples are
// alike, and wider where they differ.
bool CompareSamples(const std::vector<double>& baseline, const std::vector<double>& current, double p, Effect effect,
                    const BootstrapOptions& opts, SampleComparison* out, size_t baseline_units = 0,
                    size_t current_units = 0);

// The share of `series`' samples that are independent draws, in (0, 1]:
// each series is one rank's samples of a row in the order it made them,
// and neighbours in it may move together (a loop's iterations, a
// synchronization every few calls, a stretch where the machine ran slow).
// Batch means: each series, less its own mean (a rank's steady offset is
// not a correlation between calls), is cut into blocks of b = sqrt of the
// shortest series; the block means' variance times b over the samples'
// variance is how much the correlation widens a mean's spread, the
// share's reciprocal. 1 where the shortest series is under 64 samples
// (fewer than 8 blocks of 8 say little of the blocks' spread), or every
// sample is alike. A resampling of `calls` x share calls is
// then as wide as a block bootstrap of the calls.
double IndependentShare(const std::vector<std::vector<double>>& series);

// Samples kept per row of a baseline (stats.proto StatRow.latency_us):
// enough for the bootstrap to see a p99, small enough for a baseline of
// hundreds of rows to stay in megabytes. More are kept as that many
// evenly spaced quantiles (SketchSamples), and `check` compares no more.
inline constexpr size_t kMaxRowSamples = 1024;

// At most `max` of `samples`, sorted, in the unit they are given: all of
// them, or `max` evenly spaced quantiles (the i-th is the sample of rank
// floor((i + 0.5) x n / max)), which keep the distribution's shape.
std::vector<double> SketchSamples(std::vector<double> samples, size_t max);

}  // namespace ncclwatch::tools

#endif  // TOOLS_STATS_COMPARE_H_

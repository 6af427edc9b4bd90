// Two sets of samples compared by a bootstrap (compare.h), and the
// samples a row keeps.

#include "tools/stats/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace ncclwatch::tools {
namespace {

TEST(CompareTest, PercentileIsNearestRank) {
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(PercentileOf(&v, 50), 3);
  EXPECT_DOUBLE_EQ(PercentileOf(&v, 100), 5);
  EXPECT_DOUBLE_EQ(PercentileOf(&v, 1), 1);
}

// A run twice as slow on every sample: the median's ratio is +100%, and
// the interval holds it and excludes no change.
TEST(CompareTest, ARatioAndItsInterval) {
  std::vector<double> base, run;
  for (int i = 1; i <= 200; ++i) {
    base.push_back(100 + i % 10);
    run.push_back(2 * (100 + i % 10));
  }
  SampleComparison c;
  ASSERT_TRUE(CompareSamples(base, run, 50, Effect::kRatio, BootstrapOptions(), &c));
  EXPECT_DOUBLE_EQ(c.effect, 1.0);
  EXPECT_LE(c.low, c.effect);
  EXPECT_GE(c.high, c.effect);
  EXPECT_GT(c.low, 0);
}

// The same samples on both sides: no change, and an interval around it.
TEST(CompareTest, NoChangeHoldsZero) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  SampleComparison c;
  ASSERT_TRUE(CompareSamples(v, v, 50, Effect::kDifference, BootstrapOptions(), &c));
  EXPECT_DOUBLE_EQ(c.effect, 0);
  EXPECT_LE(c.low, 0);
  EXPECT_GE(c.high, 0);
}

// A fixed seed: the same samples give the same interval every time.
TEST(CompareTest, TheSameSamplesGiveTheSameInterval) {
  std::vector<double> a, b;
  for (int i = 1; i <= 50; ++i) {
    a.push_back(i * 1.5);
    b.push_back(i * 1.7 + (i % 3));
  }
  SampleComparison x, y;
  ASSERT_TRUE(CompareSamples(a, b, 99, Effect::kRatio, BootstrapOptions(), &x));
  ASSERT_TRUE(CompareSamples(a, b, 99, Effect::kRatio, BootstrapOptions(), &y));
  EXPECT_EQ(x.low, y.low);
  EXPECT_EQ(x.high, y.high);
}

// Each collective's 4 ranks give 4 alike samples: bootstrapped over the 50
// collectives (units), the interval is the one of the 50 values alone, and
// wider than the one that takes the 200 samples for independent draws.
TEST(CompareTest, SamplesOfOneCollectiveCountAsOneDraw) {
  std::vector<double> base, run, base_one, run_one;
  for (int i = 0; i < 50; ++i) {
    const double b = 100 + (i * 37) % 23, r = 104 + (i * 53) % 29;
    base_one.push_back(b);
    run_one.push_back(r);
    for (int rank = 0; rank < 4; ++rank) {
      base.push_back(b);
      run.push_back(r);
    }
  }
  SampleComparison samples, units, alone;
  ASSERT_TRUE(CompareSamples(base, run, 50, Effect::kRatio, BootstrapOptions(), &samples));
  ASSERT_TRUE(CompareSamples(base, run, 50, Effect::kRatio, BootstrapOptions(), &units, 50, 50));
  ASSERT_TRUE(CompareSamples(base_one, run_one, 50, Effect::kRatio, BootstrapOptions(), &alone));
  EXPECT_DOUBLE_EQ(units.effect, samples.effect);
  EXPECT_GT(units.high - units.low, 1.5 * (samples.high - samples.low));
  // The same law as the 50 values' own bootstrap: within a tenth of its width.
  const double width = alone.high - alone.low;
  EXPECT_NEAR(units.low, alone.low, 0.1 * width);
  EXPECT_NEAR(units.high, alone.high, 0.1 * width);
}

// Independent draws: samples that alternate as a loop's would count in
// full; runs of ten alike (a slow stretch, a synchronization every ten
// calls) count about one in ten; a rank's steady offset is no
// correlation; too few samples to tell count in full.
TEST(CompareTest, NeighboursThatMoveTogetherCountLess) {
  std::vector<std::vector<double>> alternating(4), stretches(4), offset(4), few(4);
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 400; ++i) {
      const double jitter = ((i * 7919 + r * 104729) % 101) / 100.0;  // fixed, uncorrelated between neighbours
      alternating[r].push_back(100 + jitter);
      stretches[r].push_back(100 + 50 * ((i / 10 + r) % 3) + jitter);
      offset[r].push_back(100 + 1000 * r + jitter);
      if (i < 40) few[r].push_back(100 + 50 * ((i / 10) % 2));
    }
  EXPECT_GT(IndependentShare(alternating), 0.5);
  const double share = IndependentShare(stretches);
  EXPECT_GT(share, 0.05);
  EXPECT_LT(share, 0.2);
  EXPECT_GT(IndependentShare(offset), 0.5);
  EXPECT_EQ(IndependentShare(few), 1.0);
  EXPECT_EQ(IndependentShare({}), 1.0);
  EXPECT_EQ(IndependentShare({std::vector<double>(100, 5.0)}), 1.0);
}

TEST(CompareTest, NothingToCompare) {
  SampleComparison c;
  EXPECT_FALSE(CompareSamples({}, {1.0}, 50, Effect::kRatio, BootstrapOptions(), &c));
  EXPECT_FALSE(CompareSamples({1.0}, {}, 50, Effect::kRatio, BootstrapOptions(), &c));
  // A ratio needs positive statistics.
  EXPECT_FALSE(CompareSamples({0.0}, {1.0}, 50, Effect::kRatio, BootstrapOptions(), &c));
  EXPECT_TRUE(CompareSamples({0.0}, {1.0}, 50, Effect::kDifference, BootstrapOptions(), &c));
}

TEST(CompareTest, SketchKeepsEvenlySpacedQuantiles) {
  std::vector<double> v;
  for (int i = 4000; i > 0; --i) v.push_back(i);
  const std::vector<double> k = SketchSamples(v, 1000);
  ASSERT_EQ(k.size(), 1000u);
  EXPECT_TRUE(std::is_sorted(k.begin(), k.end()));
  EXPECT_EQ(k.front(), 3.0);     // rank floor(0.5 x 4) = 2: the value 3
  EXPECT_EQ(k[500], 2003.0);
  EXPECT_EQ(SketchSamples({3, 1, 2}, 10), (std::vector<double>{1, 2, 3}));
}

}  // namespace
}  // namespace ncclwatch::tools

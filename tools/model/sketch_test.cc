#include "tools/model/sketch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace ncclwatch::tools {
namespace {

// The exact nearest-rank percentile (stats.h Percentile).
int64_t Exact(std::vector<int64_t> v, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  rank = std::min(std::max<size_t>(rank, 1), v.size());
  std::sort(v.begin(), v.end());
  return v[rank - 1];
}

std::vector<int64_t> Values(uint64_t seed, size_t n, bool signed_values) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> lat(std::log(50000.0), 1.5);  // ns: 50 us, wide
  std::vector<int64_t> v;
  for (size_t i = 0; i < n; ++i) {
    int64_t x = static_cast<int64_t>(lat(rng));
    if (signed_values && rng() % 3 == 0) x = -x;
    if (rng() % 50 == 0) x = 0;
    v.push_back(x);
  }
  return v;
}

TEST(SketchTest, EveryQuantileWithinTheStatedRelativeError) {
  for (bool sign : {false, true}) {
    const std::vector<int64_t> v = Values(sign ? 7 : 3, 20000, sign);
    Sketch s;
    for (int64_t x : v) s.Add(x);
    ASSERT_EQ(s.count(), v.size());
    EXPECT_EQ(s.min(), *std::min_element(v.begin(), v.end()));
    EXPECT_EQ(s.max(), *std::max_element(v.begin(), v.end()));
    for (double p : {0.01, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 100.0}) {
      const double exact = static_cast<double>(Exact(v, p));
      const double got = static_cast<double>(s.Quantile(p));
      // 1% of the value, and half a nanosecond of rounding.
      EXPECT_LE(std::fabs(got - exact), Sketch::kRelativeError * std::fabs(exact) + 1) << "p" << p << " sign " << sign;
    }
  }
}

TEST(SketchTest, FirstAndLastRanksAreExact) {
  Sketch s;
  for (int64_t x : std::vector<int64_t>{1234567, 89, 4000000001LL}) s.Add(x);
  EXPECT_EQ(s.Quantile(1), 89);
  EXPECT_EQ(s.Quantile(100), 4000000001LL);
  EXPECT_EQ(s.sum(), 1234567.0 + 89 + 4000000001.0);
}

TEST(SketchTest, BucketsBoundTheirValues) {
  // A value exactly on a bucket's edge is still within the bound.
  for (uint64_t v : {1ull, 2ull, 3ull, 100ull, 101ull, 1000000ull, 999999999999ull}) {
    const double got = Sketch::Value(Sketch::Index(v));
    EXPECT_LE(std::fabs(got - static_cast<double>(v)), Sketch::kRelativeError * static_cast<double>(v) * (1 + 1e-9))
        << v;
  }
}

TEST(SketchTest, MergeIsAssociativeAndCommutativeAndEqualsTheUnion) {
  const std::vector<int64_t> a = Values(11, 3000, true), b = Values(12, 500, true), c = Values(13, 7000, false);
  Sketch sa, sb, sc, all;
  for (int64_t x : a) sa.Add(x), all.Add(x);
  for (int64_t x : b) sb.Add(x), all.Add(x);
  for (int64_t x : c) sc.Add(x), all.Add(x);
  Sketch left = sa;  // (a + b) + c
  left.Merge(sb);
  left.Merge(sc);
  Sketch bc = sb;  // a + (b + c)
  bc.Merge(sc);
  Sketch right = sa;
  right.Merge(bc);
  Sketch rev = sc;  // c + b + a
  rev.Merge(sb);
  rev.Merge(sa);
  EXPECT_TRUE(left == right);
  EXPECT_TRUE(left == rev);
  EXPECT_TRUE(left == all);
  for (double p : {50.0, 99.0}) EXPECT_EQ(left.Quantile(p), all.Quantile(p));
  Sketch empty;
  Sketch with_empty = sa;
  with_empty.Merge(empty);
  EXPECT_TRUE(with_empty == sa);
  empty.Merge(sa);
  EXPECT_TRUE(empty == sa);
}

TEST(SketchTest, RepresentativesKeepTheShape) {
  const std::vector<int64_t> v = Values(5, 10000, false);
  Sketch s;
  for (int64_t x : v) s.Add(x);
  const std::vector<int64_t> r = s.Representatives(1024);
  ASSERT_EQ(r.size(), 1024u);
  EXPECT_TRUE(std::is_sorted(r.begin(), r.end()));
  const double exact = static_cast<double>(Exact(v, 50));
  EXPECT_NEAR(static_cast<double>(Exact(r, 50)), exact, 0.02 * exact);
  Sketch few;
  for (int64_t x : {5, 500, 50000}) few.Add(x);
  // Every value, the inner ones as their bucket's estimate.
  const std::vector<int64_t> f = few.Representatives(1024);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0], 5);
  EXPECT_NEAR(static_cast<double>(f[1]), 500, 5);
  EXPECT_EQ(f[2], 50000);
}

TEST(SketchTest, FromPartsRoundTripsAndRefusesDamage) {
  Sketch s;
  for (int64_t x : Values(9, 1000, true)) s.Add(x);
  Sketch back;
  ASSERT_TRUE(Sketch::FromParts(s.positive(), s.negative(), s.zeros(), s.sum(), s.min(), s.max(), &back));
  EXPECT_TRUE(back == s);
  EXPECT_FALSE(Sketch::FromParts(s.positive(), s.negative(), s.zeros(), s.sum(), s.max(), s.min(), &back));
  EXPECT_FALSE(Sketch::FromParts({{3, 0}}, {}, 0, 0, 0, 0, &back));
  // Indexes out of order, or twice: no serializer writes them.
  EXPECT_FALSE(Sketch::FromParts({{5, 1}, {3, 1}}, {}, 0, 0, 1, 2, &back));
  EXPECT_FALSE(Sketch::FromParts({}, {{3, 1}, {3, 1}}, 0, 0, -2, -1, &back));
  // A bucket no int64 value falls in.
  EXPECT_FALSE(Sketch::FromParts({{-1, 1}}, {}, 0, 0, 0, 0, &back));
  EXPECT_FALSE(Sketch::FromParts({{Sketch::Index(UINT64_MAX) + 1, 1}}, {}, 0, 0, 0, 0, &back));
  // The highest one with a value past its max: answered within [min, max].
  Sketch top;
  ASSERT_TRUE(Sketch::FromParts({{1, 1}, {Sketch::Index(UINT64_MAX), 2}}, {}, 0, 0, 1, INT64_MAX, &top));
  EXPECT_EQ(top.Quantile(60), INT64_MAX);
}

TEST(SketchTest, BucketsStayBounded) {
  Sketch s;
  // Every decade from 1 ns to 10^4 s, densely.
  for (double v = 1; v < 1e13; v *= 1.001) s.Add(static_cast<int64_t>(v));
  EXPECT_LE(s.positive().size(), Sketch::kMaxBuckets);
  EXPECT_EQ(s.Quantile(100), s.max());
}

}  // namespace
}  // namespace ncclwatch::tools

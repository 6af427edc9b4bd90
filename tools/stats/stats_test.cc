#include "tools/stats/stats.h"
#include "tools/stats/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

namespace ncclwatch::tools {
namespace {

// These tests check the arithmetic on every sample; warm-up has its own.
const StatsOptions kNoWarmup{0};

constexpr int64_t kT0 = 1'700'000'000'000'000'000;  // aligned ns (CLOCK_REALTIME-like)

// A hand-built job: `nranks` processes, one per rank, on one communicator.
struct Job {
  Model m;
  uint32_t comm = 0;

  Job(int nranks, const std::string& name, uint64_t hash = 0x1234) {
    Comm c;
    c.hash = hash;
    c.name = name;
    c.nranks = nranks;
    for (int r = 0; r < nranks; ++r) {
      Proc p;
      p.host = "node0";
      p.pid = 100 + r;
      p.launcher_rank = r;
      p.first_ns = kT0;
      m.procs.push_back(p);
      c.members.push_back({static_cast<uint32_t>(r), r, kT0, kNoTime});
      c.proc_of_rank.push_back(static_cast<uint32_t>(r));
    }
    m.comms.push_back(c);
    m.alignment_method = "one host: its processes share one clock";
  }

  uint32_t AddComm(const std::string& name, uint64_t hash, int nranks) {
    Comm c;
    c.hash = hash;
    c.name = name;
    c.nranks = nranks;
    for (int r = 0; r < nranks; ++r) {
      c.members.push_back({static_cast<uint32_t>(r), r, kT0, kNoTime});
      c.proc_of_rank.push_back(static_cast<uint32_t>(r));
    }
    m.comms.push_back(c);
    return static_cast<uint32_t>(m.comms.size() - 1);
  }

  // One op on rank `r`; gpu_dur 0: no GPU timing; done < 0: in flight.
  uint32_t AddOp(uint32_t ci, int r, const std::string& func, uint64_t seq, uint64_t count, const std::string& dtype,
                 int64_t start, int64_t done, int64_t gpu_start = 0, uint32_t gpu_dur = 0) {
    Op o;
    o.proc = static_cast<uint32_t>(r);
    o.comm = ci;
    o.rank = r;
    o.kind = (func == "Send" || func == "Recv") ? OpKind::kP2p : OpKind::kColl;
    m.SetFunc(&o, func);
    o.datatype = m.Intern(dtype);
    o.seq = seq;
    o.count = count;
    o.start_ns = kT0 + start;
    if (done >= 0) {
      o.state = OpState::kCompleted;
      o.done_ns = kT0 + done;
    } else {
      o.state = OpState::kInFlight;
    }
    if (gpu_dur > 0) {
      o.has_gpu = true;
      o.gpu_start_ns = kT0 + gpu_start;
      o.gpu_duration_ns = gpu_dur;
    }
    const uint32_t oi = static_cast<uint32_t>(m.ops.size());
    m.ops.push_back(o);
    m.procs[static_cast<size_t>(r)].ops.push_back(oi);
    return oi;
  }

  void Match() {
    // Collectives by (comm, seq).
    std::map<std::pair<uint32_t, uint64_t>, uint32_t> idx;
    for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
      Op& o = m.ops[oi];
      if (o.kind != OpKind::kColl) continue;
      auto key = std::make_pair(o.comm, o.seq);
      auto it = idx.find(key);
      if (it == idx.end()) {
        ::ncclwatch::tools::Match mt;
        mt.comm = o.comm;
        mt.seq = o.seq;
        mt.ops.assign(static_cast<size_t>(m.comms[o.comm].nranks), kNone);
        it = idx.emplace(key, static_cast<uint32_t>(m.matches.size())).first;
        m.matches.push_back(mt);
      }
      m.matches[it->second].ops[static_cast<size_t>(o.rank)] = oi;
      o.match = it->second;
    }
  }
};

const stats::StatRow* FindRow(const stats::Stats& s, const std::string& comm, const std::string& func, int bucket) {
  for (const auto& r : s.rows())
    if (r.comm() == comm && r.func() == func && r.bucket_log2() == bucket) return &r;
  return nullptr;
}

TEST(StatsTest, PercentileIsNearestRank) {
  std::vector<int64_t> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(Percentile(&v, 50), 50);
  EXPECT_EQ(Percentile(&v, 99), 99);
  EXPECT_EQ(Percentile(&v, 100), 100);
  std::vector<int64_t> one{7};
  EXPECT_EQ(Percentile(&one, 50), 7);
  EXPECT_EQ(Percentile(&one, 99), 7);
  std::vector<int64_t> two{20, 10};
  EXPECT_EQ(Percentile(&two, 50), 10);
  EXPECT_EQ(Percentile(&two, 99), 20);
}

TEST(StatsTest, BucketLabels) {
  EXPECT_EQ(BucketLabel(-2), "unknown");
  EXPECT_EQ(BucketLabel(-1), "0 B");
  EXPECT_EQ(BucketLabel(0), "1 B");
  EXPECT_EQ(BucketLabel(9), "512 B");
  EXPECT_EQ(BucketLabel(10), "1 KiB");
  EXPECT_EQ(BucketLabel(26), "64 MiB");
  EXPECT_EQ(BucketLabel(31), "2 GiB");
}

TEST(StatsTest, GpuLatencyBandwidthSkewAndDelay) {
  Job j(4, "world");
  // Two AllReduces of 1 MiB (262144 floats) on 4 ranks. GPU durations
  // 100..103 us and 200..203 us; rank r arrives r us late; kernel starts 5 us
  // after enqueue.
  for (int seq = 0; seq < 2; ++seq)
    for (int r = 0; r < 4; ++r) {
      const int64_t start = seq * 1'000'000 + r * 1000;
      const uint32_t dur = static_cast<uint32_t>((seq + 1) * 100'000 + r * 1000);
      j.AddOp(0, r, "AllReduce", seq, 262144, "ncclFloat32", start, start + 300'000, start + 5000, dur);
    }
  j.Match();
  stats::Stats s = ComputeStats(j.m, kNoWarmup);
  ASSERT_EQ(s.rows_size(), 1);
  const stats::StatRow& r = s.rows(0);
  EXPECT_EQ(r.comm(), "world");
  EXPECT_EQ(r.func(), "AllReduce");
  EXPECT_EQ(r.nranks(), 4);
  EXPECT_EQ(r.bucket_log2(), 20);
  EXPECT_EQ(r.bucket(), "1 MiB");
  EXPECT_EQ(r.bytes(), 1048576);
  EXPECT_EQ(r.calls(), 2u);
  EXPECT_EQ(r.samples(), 8u);
  EXPECT_EQ(r.incomplete(), 0u);
  EXPECT_EQ(r.timing(), "gpu");
  // Samples 100,101,102,103,200,201,202,203 us: nearest-rank p50 = 4th = 103, p99 = 203.
  EXPECT_DOUBLE_EQ(r.latency_p50_us(), 103.0);
  EXPECT_DOUBLE_EQ(r.latency_p99_us(), 203.0);
  // algbw = 1048576 B / 103 us; busbw = algbw x 2(n-1)/n = x 1.5.
  EXPECT_NEAR(r.algbw_gbps(), 1048576.0 / 103000.0, 1e-9);
  EXPECT_NEAR(r.busbw_gbps(), 1048576.0 / 103000.0 * 1.5, 1e-9);
  EXPECT_DOUBLE_EQ(r.busbw_factor(), 1.5);
  EXPECT_DOUBLE_EQ(r.delay_p50_us(), 5.0);
  EXPECT_DOUBLE_EQ(r.delay_p99_us(), 5.0);
  EXPECT_EQ(r.skew_samples(), 2u);
  EXPECT_DOUBLE_EQ(r.skew_p50_us(), 3.0);
  EXPECT_DOUBLE_EQ(r.skew_p99_us(), 3.0);
}

TEST(StatsTest, EachRanksFirstTimedOpOfARowIsWarmUp) {
  Job j(2, "world");
  // Rank r's first AllReduce takes 900 us (connection setup), the next ones 100 us.
  for (int seq = 0; seq < 3; ++seq)
    for (int r = 0; r < 2; ++r) {
      const int64_t start = seq * 1'000'000;
      j.AddOp(0, r, "AllReduce", seq, 1024, "ncclFloat32", start, start + (seq == 0 ? 900'000 : 100'000));
    }
  j.Match();
  const stats::Stats s = ComputeStats(j.m);
  ASSERT_EQ(s.rows_size(), 1);
  const stats::StatRow& r = s.rows(0);
  EXPECT_EQ(r.warmup(), 2u);
  EXPECT_EQ(r.samples(), 4u);
  EXPECT_DOUBLE_EQ(r.latency_p99_us(), 100.0);  // the 900 us first calls are not in it
  EXPECT_EQ(r.skew_samples(), 3u);               // arrival skew keeps every collective
}

TEST(StatsTest, CpuOnlyRowsSayCpu) {
  Job j(2, "world");
  for (int r = 0; r < 2; ++r) {
    j.AddOp(0, r, "AllGather", 0, 1024, "ncclFloat16", 0, 50'000);  // 1024 x 2 B x 2 ranks = 4 KiB
    j.AddOp(0, r, "AllGather", 1, 1024, "ncclFloat16", 100'000, -1);  // never completes
  }
  j.Match();
  stats::Stats s = ComputeStats(j.m, kNoWarmup);
  const stats::StatRow* r = FindRow(s, "world", "AllGather", 12);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->timing(), "cpu");
  EXPECT_EQ(r->samples(), 2u);
  EXPECT_EQ(r->incomplete(), 2u);
  EXPECT_EQ(r->calls(), 2u);
  EXPECT_DOUBLE_EQ(r->latency_p50_us(), 50.0);
  EXPECT_NEAR(r->busbw_gbps(), 4096.0 / 50000.0 * 0.5, 1e-12);
  EXPECT_FALSE(r->has_delay_p50_us());

  std::ostringstream table;
  PrintStatsTable(s, table);
  EXPECT_NE(table.str().find("timing 'cpu'"), std::string::npos) << table.str();
}

// Completions from CUDA events time the writer's poll, not the kernel: the
// row says so and gives no bandwidth (testdata/gpu-events/healthy printed
// 0.08 GB/s of polling delay as a bus bandwidth).
TEST(StatsTest, PolledCompletionsGiveNoBandwidth) {
  Job j(2, "world");
  for (int r = 0; r < 2; ++r) j.AddOp(0, r, "AllReduce", 0, 1 << 20, "ncclFloat32", 0, 9'000'000);
  for (Op& o : j.m.ops) o.polled = true;
  j.Match();
  stats::Stats s = ComputeStats(j.m, kNoWarmup);
  const stats::StatRow* r = FindRow(s, "world", "AllReduce", 22);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->timing(), "polled");
  EXPECT_EQ(r->samples(), 2u);
  EXPECT_DOUBLE_EQ(r->latency_p50_us(), 9000.0);
  EXPECT_FALSE(r->has_algbw_gbps());
  EXPECT_FALSE(r->has_busbw_gbps());
  std::ostringstream table;
  PrintStatsTable(s, table);
  EXPECT_NE(table.str().find("timing 'polled'"), std::string::npos) << table.str();
}

// The slow-not-hung job users compare with nccl-tests: every host enqueues
// the all-reduce in time, but rank 2's GPU is busy with other work first
// (its default stream), so its kernel starts 60 ms late and the others'
// kernels wait for it. Only the CUDA events' "started" times show it.
TEST(StatsTest, NamesTheRankHeldByOtherWorkOnItsGpu) {
  Job j(4, "world");
  for (int seq = 0; seq < 6; ++seq) {
    const int64_t t = seq * 200'000'000;  // a step every 200 ms
    for (int r = 0; r < 4; ++r) {
      const int64_t done = t + 70'000'000;  // all end together, after rank 2's GPU joined
      const uint32_t oi = j.AddOp(0, r, "AllReduce", seq, 16384, "ncclFloat32", t + r * 100'000, done);
      Op& o = j.m.ops[oi];
      o.polled = true;
      // The writer saw ranks 0, 1 and 3 reach the kernel at the first look
      // after the enqueue; rank 2's start and end at one look (0: unseen).
      o.polled_held_ns = r == 2 ? 0 : 60'000'000;
      // Then an all-gather, queued behind the all-reduce on every rank:
      // nobody is held there (Job::Match keys by seq alone: #100 on), so
      // rank 2 is held at half of the
      // communicator's collectives, and named all the same.
      const uint32_t ag = j.AddOp(0, r, "AllGather", 100 + seq, 16384, "ncclFloat32", t + 1'000'000 + r * 100'000,
                                  done + 2'000'000);
      j.m.ops[ag].polled = true;
    }
  }
  j.Match();
  stats::Stats s = ComputeStats(j.m, kNoWarmup);
  ASSERT_EQ(s.ranks_size(), 4);
  EXPECT_EQ(s.ranks(2).gpu_func(), "AllReduce");
  EXPECT_EQ(s.ranks(2).gpu_samples(), 5u);  // #0 is warm-up
  EXPECT_NEAR(s.ranks(2).gpu_lateness_p50_us(), 60'000, 1000);
  EXPECT_NEAR(s.ranks(0).gpu_lateness_p50_us(), 0, 1000);
  EXPECT_LT(s.ranks(2).lateness_p50_us(), 1000);  // the host was in time
  std::ostringstream table;
  PrintStatsTable(s, table);
  EXPECT_NE(table.str().find("held on its GPU: rank 2 of 'world' (4 ranks) [rank 2]: its AllReduce kernels waited 59.9 ms"),
            std::string::npos)
      << table.str();
  EXPECT_EQ(table.str().find("held on its GPU: rank 0"), std::string::npos) << table.str();
  EXPECT_EQ(table.str().find("held on its GPU: rank 3"), std::string::npos) << table.str();
}

// A rank whose kernel waits for its own previous collective, which every
// rank was in, is not held by other work: a host straggler's collectives
// make the others' next kernels start late too, and none is named.
TEST(StatsTest, WaitingForItsOwnPreviousCollectiveIsNotHeld) {
  Job j(3, "world");
  for (int seq = 0; seq < 6; ++seq) {
    const int64_t t = seq * 100'000'000;
    for (int r = 0; r < 3; ++r) {
      // Rank 1 enqueues #seq 40 ms after the others, who wait for it; the
      // next collective's kernels start when this one ends, everywhere.
      const int64_t start = t + (r == 1 ? 40'000'000 : 0);
      const uint32_t oi = j.AddOp(0, r, "AllReduce", seq, 16384, "ncclFloat32", start, t + 45'000'000);
      Op& o = j.m.ops[oi];
      o.polled = true;
      o.polled_held_ns = r == 1 ? 0 : 45'000'000;
      if (r == 2 && seq > 0) {
        // Rank 2 enqueued it during the previous one, so its kernel started
        // when the previous ended, 55 ms before this step.
        o.start_ns -= 90'000'000;
        o.polled_held_ns = 100'000'000;
      }
    }
  }
  j.Match();
  stats::Stats s = ComputeStats(j.m, kNoWarmup);
  std::ostringstream table;
  PrintStatsTable(s, table);
  EXPECT_EQ(table.str().find("held on its GPU"), std::string::npos) << table.str();
  for (const stats::RankRow& r : s.ranks()) EXPECT_LT(r.gpu_lateness_p50_us(), 20'000) << r.DebugString();
}

TEST(StatsTest, GpuSamplesWinOverCpuOnes) {
  Job j(2, "world");
  j.AddOp(0, 0, "AllReduce", 0, 256, "ncclFloat32", 0, 900'000, 1000, 10'000);
  j.AddOp(0, 1, "AllReduce", 0, 256, "ncclFloat32", 0, 800'000);  // no GPU timing: not mixed in
  j.Match();
  stats::Stats s = ComputeStats(j.m, kNoWarmup);
  ASSERT_EQ(s.rows_size(), 1);
  EXPECT_EQ(s.rows(0).timing(), "gpu");
  EXPECT_EQ(s.rows(0).samples(), 1u);
  EXPECT_DOUBLE_EQ(s.rows(0).latency_p50_us(), 10.0);
}

TEST(StatsTest, RowsByCommFuncAndBucket) {
  Job j(2, "world");
  const uint32_t anon = j.AddComm("", 0xfeed, 2);
  for (int r = 0; r < 2; ++r) {
    j.AddOp(0, r, "AllReduce", 0, 1000, "ncclFloat32", 0, 10'000);      // 4000 B -> 2 KiB bucket
    j.AddOp(0, r, "AllReduce", 1, 1024, "ncclFloat32", 20'000, 30'000);  // 4096 B -> 4 KiB bucket
    j.AddOp(0, r, "AllReduce", 2, 0, "ncclFloat32", 40'000, 41'000);     // 0 B
    j.AddOp(0, r, "AllReduce", 3, 10, "ncclWeird", 50'000, 51'000);      // unknown size
    j.AddOp(anon, r, "Broadcast", 0, 10, "ncclInt8", 60'000, 61'000);
  }
  j.AddOp(0, 0, "Send", 1, 100, "ncclInt8", 70'000, 71'000);
  j.AddOp(0, 1, "Recv", 1, 100, "ncclInt8", 70'000, 72'000);
  j.Match();
  stats::Stats s = ComputeStats(j.m, kNoWarmup);
  EXPECT_NE(FindRow(s, "world", "AllReduce", 11), nullptr);
  EXPECT_NE(FindRow(s, "world", "AllReduce", 12), nullptr);
  ASSERT_NE(FindRow(s, "world", "AllReduce", -1), nullptr);
  EXPECT_EQ(FindRow(s, "world", "AllReduce", -1)->bucket(), "0 B");
  const stats::StatRow* unknown = FindRow(s, "world", "AllReduce", -2);
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->bucket(), "unknown");
  EXPECT_FALSE(unknown->has_bytes());
  EXPECT_FALSE(unknown->has_algbw_gbps());
  EXPECT_TRUE(unknown->has_latency_p50_us());
  EXPECT_NE(FindRow(s, "(unnamed, 2 ranks)", "Broadcast", 3), nullptr);
  const stats::StatRow* send = FindRow(s, "world", "Send", 6);
  ASSERT_NE(send, nullptr);
  EXPECT_EQ(send->calls(), 1u);
  EXPECT_EQ(send->skew_samples(), 0u);  // p2p: no arrival skew
  EXPECT_DOUBLE_EQ(send->busbw_gbps(), send->algbw_gbps());
  // Sorted by comm, func, bucket.
  for (int i = 1; i < s.rows_size(); ++i) {
    const auto& a = s.rows(i - 1);
    const auto& b = s.rows(i);
    EXPECT_TRUE(std::make_tuple(a.comm(), a.func(), a.bucket_log2()) < std::make_tuple(b.comm(), b.func(), b.bucket_log2()));
  }
}

TEST(StatsTest, JsonRoundTripInTheProto3Mapping) {
  Job j(2, "we\"ird\\name\n\xC3\xA9");
  for (int r = 0; r < 2; ++r) j.AddOp(0, r, "AllReduce", 0, 256, "ncclFloat32", r * 1000, 50'000, 2000, 20'000);
  j.Match();
  stats::Stats s = ComputeStats(j.m, kNoWarmup);
  const std::string json = StatsToJson(s);
  EXPECT_NE(json.find("\"latencyP50Us\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"bucketLog2\""), std::string::npos);
  EXPECT_NE(json.find("\"format\": \"ncclwatch-stats/2\""), std::string::npos);
  EXPECT_NE(json.find("\"latencyUs\""), std::string::npos) << json;  // the samples check tests
  EXPECT_NE(json.find("we\\\"ird\\\\name\\n\xC3\xA9"), std::string::npos) << json;
  stats::Stats back;
  std::string error;
  ASSERT_TRUE(StatsFromJson(json, &back, &error)) << error;
  ASSERT_EQ(back.rows_size(), 1);
  EXPECT_EQ(back.rows(0).comm(), "we\"ird\\name\n\xC3\xA9");
  EXPECT_EQ(back.rows(0).SerializeAsString(), s.rows(0).SerializeAsString());

  EXPECT_FALSE(StatsFromJson("{\"rows\": 3}", &back, &error));
  EXPECT_FALSE(StatsFromJson("{}", &back, &error));
  EXPECT_NE(error.find("ncclwatch stats --format=json"), std::string::npos);
  // A baseline of an older ncclwatch has no samples: said, not misread.
  EXPECT_FALSE(StatsFromJson("{\"format\": \"ncclwatch-stats/1\", \"rows\": []}", &back, &error));
  EXPECT_NE(error.find("ncclwatch-stats/1"), std::string::npos) << error;
  EXPECT_NE(error.find("holds no samples"), std::string::npos) << error;
}

// The samples kept for check: every one up to 1024, sorted, in us; the
// arrival of each rank: start minus the median start of the collective.
TEST(StatsTest, SamplesAndRankArrival) {
  Job j(3, "world");
  // Collective #0 is warm-up; then rank 2 starts 30 us after the others.
  for (int seq = 0; seq < 4; ++seq)
    for (int r = 0; r < 3; ++r)
      j.AddOp(0, r, "AllReduce", seq, 256, "ncclFloat32", seq * 1'000'000 + (r == 2 ? 30'000 : 0), 50'000 + r * 1000);
  j.Match();
  stats::Stats s = ComputeStats(j.m, kNoWarmup);
  ASSERT_EQ(s.rows_size(), 1);
  EXPECT_EQ(s.rows(0).latency_us_size(), static_cast<int>(s.rows(0).samples()));
  EXPECT_TRUE(std::is_sorted(s.rows(0).latency_us().begin(), s.rows(0).latency_us().end()));
  ASSERT_EQ(s.ranks_size(), 3);
  EXPECT_EQ(s.ranks(2).rank(), 2);
  EXPECT_EQ(s.ranks(2).samples(), 3u);  // #1..#3
  EXPECT_NEAR(s.ranks(2).lateness_p50_us(), 30.0, 1e-9);
  EXPECT_NEAR(s.ranks(0).lateness_p50_us(), 0.0, 1e-9);
  ASSERT_EQ(s.ranks(2).procs_size(), 1);
}

TEST(StatsTest, InvalidUtf8NamesSurvive) {
  Job j(2, std::string("bad\xFF\xFEname"));
  for (int r = 0; r < 2; ++r) j.AddOp(0, r, "AllReduce", 0, 256, "ncclFloat32", 0, 50'000);
  j.Match();
  stats::Stats back;
  std::string error;
  ASSERT_TRUE(StatsFromJson(StatsToJson(ComputeStats(j.m, kNoWarmup)), &back, &error)) << error;
  ASSERT_EQ(back.rows_size(), 1);
  EXPECT_EQ(back.rows(0).comm(), "bad\xEF\xBF\xBD\xEF\xBF\xBDname");
}

TEST(StatsTest, TableColumnsAlign) {
  Job j(2, "world");
  const uint32_t tp = j.AddComm("tensor-parallel-\xC3\xA9", 0x77, 2);
  for (int r = 0; r < 2; ++r) {
    j.AddOp(0, r, "AllReduce", 0, 1 << 20, "ncclFloat32", 0, 500'000, 1000, 400'000);
    j.AddOp(tp, r, "AllGather", 0, 16, "ncclBfloat16", 600'000, 610'000, 601'000, 5'000);
  }
  j.Match();
  std::ostringstream out;
  PrintStatsTable(ComputeStats(j.m, kNoWarmup), out);
  std::istringstream in(out.str());
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_GE(lines.size(), 4u) << out.str();
  EXPECT_EQ(lines[1].rfind("comm", 0), 0u) << out.str();
  // The right edge of the "p50 us" column lines up on every row (display columns).
  auto col_end = [](const std::string& l, size_t byte_pos) {
    size_t w = 0;
    for (size_t i = 0; i < byte_pos; ++i)
      if ((static_cast<unsigned char>(l[i]) & 0xC0) != 0x80) ++w;
    return w;
  };
  const size_t h = lines[1].find("p50 us") + 6;
  const size_t want = col_end(lines[1], h);
  // Rows sorted by comm: "tensor-parallel-é" (AllGather, 5 us) before "world" (AllReduce, 400 us).
  ASSERT_NE(lines[2].find("AllGather"), std::string::npos) << out.str();
  ASSERT_NE(lines[3].find("400.0"), std::string::npos) << out.str();
  EXPECT_EQ(col_end(lines[2], lines[2].find("5.0") + 3), want) << out.str();
  EXPECT_EQ(col_end(lines[3], lines[3].find("400.0") + 5), want) << out.str();
}

}  // namespace
}  // namespace ncclwatch::tools

namespace ncclwatch::tools {
namespace {

// A job of 4 ranks whose latencies and arrivals spread over decades.
Job SpreadJob() {
  Job j(4, "world");
  for (int seq = 0; seq < 300; ++seq)
    for (int r = 0; r < 4; ++r) {
      const int64_t start = int64_t{seq} * 10'000'000 + (r == 3 && seq % 3 == 0 ? 40'000 + seq * 100 : r * 700);
      const uint32_t gpu = static_cast<uint32_t>(20'000 + (seq * 7919 + r * 104729) % 900'000);
      const bool big = seq % 5 == 0;
      j.AddOp(0, r, big ? "AllGather" : "AllReduce", seq, big ? 1 << 20 : 4096, "ncclFloat32", start,
              start + gpu + 3'000, start + 2'000 + r * 10, gpu);
    }
  // One in flight on rank 1.
  j.AddOp(0, 1, "AllReduce", 300, 4096, "ncclFloat32", 3'000'000'000, -1);
  j.Match();
  return j;
}

void ExpectSameWithinSketchError(const stats::Stats& exact, const stats::Stats& got) {
  auto near = [](double want, double have) {
    EXPECT_LE(std::fabs(want - have), Sketch::kRelativeError * std::fabs(want) * 1.000001 + 0.001) << want << " vs "
                                                                                                   << have;
  };
  ASSERT_EQ(exact.rows_size(), got.rows_size());
  for (int i = 0; i < exact.rows_size(); ++i) {
    const stats::StatRow& a = exact.rows(i);
    const stats::StatRow& b = got.rows(i);
    EXPECT_EQ(a.func(), b.func());
    EXPECT_EQ(a.bucket_log2(), b.bucket_log2());
    EXPECT_EQ(a.calls(), b.calls());
    EXPECT_EQ(a.samples(), b.samples());
    EXPECT_EQ(a.incomplete(), b.incomplete());
    EXPECT_EQ(a.warmup(), b.warmup());
    EXPECT_EQ(a.skew_samples(), b.skew_samples());
    EXPECT_EQ(a.timing(), b.timing());
    EXPECT_DOUBLE_EQ(a.bytes(), b.bytes());
    EXPECT_TRUE(b.sketched());
    near(a.latency_p50_us(), b.latency_p50_us());
    near(a.latency_p99_us(), b.latency_p99_us());
    near(a.delay_p50_us(), b.delay_p50_us());
    near(a.delay_p99_us(), b.delay_p99_us());
    near(a.skew_p50_us(), b.skew_p50_us());
    near(a.skew_p99_us(), b.skew_p99_us());
    // A bandwidth is bytes over the p50: within the same bound, near enough.
    near(a.busbw_gbps(), b.busbw_gbps());
    EXPECT_EQ(a.latency_us_size(), b.latency_us_size());
  }
  ASSERT_EQ(exact.ranks_size(), got.ranks_size());
  for (int i = 0; i < exact.ranks_size(); ++i) {
    EXPECT_EQ(exact.ranks(i).rank(), got.ranks(i).rank());
    EXPECT_EQ(exact.ranks(i).samples(), got.ranks(i).samples());
    EXPECT_EQ(exact.ranks(i).procs_size(), got.ranks(i).procs_size());
    near(exact.ranks(i).lateness_p50_us(), got.ranks(i).lateness_p50_us());
    near(exact.ranks(i).lateness_p99_us(), got.ranks(i).lateness_p99_us());
  }
}

// What a summary does: digests of the whole file, and a window of its last ops.
void Digest(Model* m, const std::vector<ProcDigest>& d, uint32_t pi, size_t window) {
  Proc& p = m->procs[pi];
  p.digested = true;
  p.row_digests = d[pi].rows;
  p.rank_digests = d[pi].ranks;
  p.whole_comms = d[pi].whole_comms;
  if (p.ops.size() > window) p.ops.erase(p.ops.begin(), p.ops.end() - static_cast<std::ptrdiff_t>(window));
}

TEST(StatsDigestTest, EveryProcessDigestedGivesTheRowsWithinTheSketchError) {
  Job j = SpreadJob();
  const stats::Stats exact = ComputeStats(j.m);
  const std::vector<ProcDigest> d = DigestProcesses(j.m);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].whole_comms, std::vector<std::string>{"world"});
  for (uint32_t pi = 0; pi < 4; ++pi) Digest(&j.m, d, pi, 2);
  const stats::Stats got = ComputeStats(j.m);
  ExpectSameWithinSketchError(exact, got);
  for (const stats::RankRow& r : got.ranks()) EXPECT_TRUE(r.sketched());
  ASSERT_EQ(got.notes_size(), 1);
  std::ostringstream table;
  PrintStatsTable(got, table);
  EXPECT_NE(table.str().find("sketches"), std::string::npos);
  EXPECT_NE(table.str().find("~"), std::string::npos);
}

TEST(StatsDigestTest, SomeProcessesDigestedMixWithExactSamples) {
  Job j = SpreadJob();
  const stats::Stats exact = ComputeStats(j.m);
  const std::vector<ProcDigest> d = DigestProcesses(j.m);
  // Ranks 0 and 1 from a summary, 2 and 3 from their traces: the
  // communicator is not whole in summaries, so skew and lateness come from
  // the model's collectives (here every one; a real summary's window would
  // hold the last few, which a note says).
  Digest(&j.m, d, 0, SIZE_MAX);
  Digest(&j.m, d, 1, SIZE_MAX);
  const stats::Stats got = ComputeStats(j.m);
  ExpectSameWithinSketchError(exact, got);
  ASSERT_EQ(got.notes_size(), 2);
  EXPECT_NE(got.notes(1).find("windows only"), std::string::npos);
  for (const stats::RankRow& r : got.ranks()) EXPECT_FALSE(r.sketched());
}

TEST(StatsDigestTest, TheStragglersLatenessSurvivesTheWindow) {
  Job j = SpreadJob();
  const stats::Stats exact = ComputeStats(j.m);
  const std::vector<ProcDigest> d = DigestProcesses(j.m);
  for (uint32_t pi = 0; pi < 4; ++pi) Digest(&j.m, d, pi, 2);
  const stats::Stats got = ComputeStats(j.m);
  // Rank 3 is late at one collective in three: its p99 lateness says so,
  // though the last two operations of each rank were on time.
  ASSERT_EQ(got.ranks_size(), 4);
  EXPECT_GT(got.ranks(3).lateness_p99_us(), 40.0);
  EXPECT_NEAR(got.ranks(3).lateness_p99_us(), exact.ranks(3).lateness_p99_us(),
              0.01 * exact.ranks(3).lateness_p99_us());
}

}  // namespace
}  // namespace ncclwatch::tools

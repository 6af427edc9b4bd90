#include "plugin/writer/launches.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

namespace ncclwatch::plugin {
namespace {

// A driver whose events complete when the test says: each event is a
// position on its stream; the stream has run up to `done` positions.
struct FakeStream {
  uint64_t recorded = 0;  // positions handed out
  uint64_t done = 0;      // positions the "GPU" has passed
};
std::map<void*, FakeStream> g_streams;
std::map<void*, std::pair<void*, uint64_t>> g_events;  // event -> (stream, position)
bool g_context_gone = false;
void* const kS1 = reinterpret_cast<void*>(0x51);
void* const kS2 = reinterpret_cast<void*>(0x52);
uint64_t g_queries = 0;
uintptr_t g_next_event = 0x1000;

int FakeCreate(void** ev, unsigned) {
  *ev = reinterpret_cast<void*>(g_next_event += 16);
  return kCudaSuccess;
}
int FakeRecord(void* ev, void* stream) {
  g_events[ev] = {stream, ++g_streams[stream].recorded};
  return kCudaSuccess;
}
int FakeQuery(void* ev) {
  ++g_queries;
  if (g_context_gone) return 709;  // CUDA_ERROR_CONTEXT_IS_DESTROYED
  auto it = g_events.find(ev);
  if (it == g_events.end()) return 400;
  return g_streams[it->second.first].done >= it->second.second ? kCudaSuccess : kCudaNotReady;
}

class LaunchTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_streams.clear();
    g_events.clear();
    g_context_gone = false;
    g_queries = 0;
    cuda_.event_create = &FakeCreate;
    cuda_.event_record = &FakeRecord;
    cuda_.event_query = &FakeQuery;
    for (void* s : {kS1, kS2}) {
      rings_[s] = std::make_unique<StreamEvents>(&cuda_, reinterpret_cast<void*>(0xc0), s);
      ASSERT_TRUE(rings_[s]->Create());
    }
  }

  // What the hot path does for one launch on `stream` by thread `tid`: an
  // event before the kernel and one after. Returns the launch id.
  uint64_t Launch(void* stream, uint32_t tid) {
    const uint64_t id = ++next_id_;
    StreamEvents* ring = rings_[stream].get();
    const uint64_t n = ring->Next();
    FakeRecord(ring->before(n), stream);
    FakeRecord(ring->after(n), stream);
    table_.Launched(id, ring, n, tid);
    return id;
  }
  // A sampled-out launch (NCCLWATCH_EVENT_INTERVAL_US): no event of its own;
  // its place is before the stream's next launch with events.
  uint64_t Unsampled(void* stream, uint32_t tid) {
    const uint64_t id = ++next_id_;
    StreamEvents* ring = rings_[stream].get();
    table_.Launched(id, ring, ring->issued(), tid, true, false);
    return id;
  }
  // The GPU passes the first `n` positions of the stream (2 per launch).
  void Run(void* stream, uint64_t positions) { g_streams[stream].done = positions; }
  void Poll(uint64_t now) {
    table_.Poll(
        [now] { return now; },
        [&](uint64_t op, uint64_t t, uint64_t s, bool from_later) {
          done_[op] = t;
          started_[op] = s;
          if (from_later) from_later_.insert(op);
        },
        [&](uint64_t op) { gone_.insert(op); });
  }

  CudaDriver cuda_;
  std::map<void*, std::unique_ptr<StreamEvents>> rings_;
  LaunchTable table_;
  uint64_t next_id_ = 0;
  std::map<uint64_t, uint64_t> done_;
  std::map<uint64_t, uint64_t> started_;  // op -> when its launch was seen started (0: not before done)
  std::set<uint64_t> gone_;
  std::set<uint64_t> from_later_;
};

TEST_F(LaunchTableTest, OpsCompleteWithTheirLaunchInStreamOrder) {
  uint64_t done_ns = 0;
  const uint64_t a = Launch(kS1, 7);
  EXPECT_EQ(table_.Bind(a, 100, &done_ns), LaunchTable::Bound::kWatched);
  EXPECT_EQ(table_.Bind(a, 101, &done_ns), LaunchTable::Bound::kWatched);
  const uint64_t b = Launch(kS1, 7);
  EXPECT_EQ(table_.Bind(b, 102, &done_ns), LaunchTable::Bound::kWatched);
  EXPECT_EQ(table_.ProgressOf(100), GpuProgress::kNotStarted);

  Poll(1000);  // nothing has run
  EXPECT_TRUE(done_.empty());
  EXPECT_EQ(table_.ProgressOf(100), GpuProgress::kNotStarted);

  Run(kS1, 1);  // a's "before" passed: a started, not done
  Poll(2000);
  EXPECT_TRUE(done_.empty());
  EXPECT_EQ(table_.ProgressOf(100), GpuProgress::kStarted);
  EXPECT_EQ(table_.ProgressOf(102), GpuProgress::kNotStarted);

  Run(kS1, 2);  // a done
  Poll(3000);
  EXPECT_EQ(done_, (std::map<uint64_t, uint64_t>{{100, 3000}, {101, 3000}}));
  EXPECT_EQ(started_.at(100), 2000u) << "seen started one poll before it was seen done";
  EXPECT_EQ(table_.pending(), 1u);

  Run(kS1, 4);
  Poll(4000);
  EXPECT_EQ(done_.at(102), 4000u);
  EXPECT_EQ(started_.at(102), 0u) << "started and done within one poll";
  EXPECT_EQ(table_.pending(), 0u);
}

TEST_F(LaunchTableTest, AnOpArrivingAfterItsLaunchCompletedIsDoneAtOnce) {
  const uint64_t a = Launch(kS1, 7);
  Run(kS1, 2);
  Poll(500);
  uint64_t done_ns = 0;
  // The launch is kept for the ops of its plan until the thread launches again.
  EXPECT_EQ(table_.Bind(a, 100, &done_ns), LaunchTable::Bound::kDone);
  EXPECT_EQ(done_ns, 500u);
  Launch(kS1, 7);
  EXPECT_EQ(table_.Bind(a, 101, &done_ns), LaunchTable::Bound::kUnknown);
  EXPECT_EQ(table_.Bind(999, 102, &done_ns), LaunchTable::Bound::kUnknown);
}

TEST_F(LaunchTableTest, FewQueriesPerStreamHoweverManyLaunchesWait) {
  std::vector<uint64_t> ids;
  uint64_t done_ns = 0;
  for (int i = 0; i < 24; ++i) {
    ids.push_back(Launch(kS1, 7));
    table_.Bind(ids.back(), 1000 + i, &done_ns);
  }
  Run(kS1, 2 * 13);  // 13 launches done
  g_queries = 0;
  Poll(10);
  EXPECT_EQ(done_.size(), 13u);
  EXPECT_TRUE(done_.count(1012));
  EXPECT_FALSE(done_.count(1013));
  // The newest, then a binary search (done and started): not one per launch.
  EXPECT_LE(g_queries, 12u);
  EXPECT_GE(g_queries, 2u);
}

TEST_F(LaunchTableTest, StreamsAreIndependent) {
  uint64_t done_ns = 0;
  const uint64_t a = Launch(kS1, 7);
  const uint64_t b = Launch(kS2, 8);
  table_.Bind(a, 1, &done_ns);
  table_.Bind(b, 2, &done_ns);
  Run(kS2, 2);
  Poll(10);
  EXPECT_EQ(done_.count(1), 0u);
  EXPECT_EQ(done_.count(2), 1u);
}

TEST_F(LaunchTableTest, ADestroyedContextEndsTheWatchWithoutCallingItAgain) {
  uint64_t done_ns = 0;
  const uint64_t a = Launch(kS1, 7);
  table_.Bind(a, 1, &done_ns);
  g_context_gone = true;
  Poll(10);
  EXPECT_TRUE(done_.empty());
  EXPECT_EQ(gone_, (std::set<uint64_t>{1}));
  EXPECT_TRUE(rings_[kS1]->dead());
  EXPECT_EQ(table_.pending(), 0u);
  g_queries = 0;
  Launch(kS1, 7);  // a launch recorded before the pool was seen dead
  Poll(20);
  EXPECT_EQ(g_queries, 0u);
}

// More launches wait than a stream's ring has pairs: the oldest launches'
// pairs serve newer ones. A newer completion still proves them done; until
// then nothing is claimed about them (not "not started").
TEST_F(LaunchTableTest, ARingTakenOverProvesOnlyWhatCompleted) {
  uint64_t done_ns = 0;
  const uint32_t total = StreamEvents::kRing + 10;
  std::vector<uint64_t> ids;
  for (uint32_t i = 0; i < total; ++i) {
    ids.push_back(Launch(kS1, 7));
    table_.Bind(ids.back(), 1000 + i, &done_ns);
  }
  Poll(10);
  EXPECT_TRUE(done_.empty());
  EXPECT_EQ(table_.ProgressOf(1000), GpuProgress::kUnknown) << "its pair now serves launch kRing";
  EXPECT_EQ(table_.ProgressOf(1000 + total - 1), GpuProgress::kNotStarted);
  Run(kS1, 2 * 5);  // the first 5 launches done: their own records are gone
  Poll(20);
  EXPECT_TRUE(done_.empty()) << "nothing to prove them done yet";
  Run(kS1, 2 * total);
  Poll(30);
  EXPECT_EQ(done_.size(), total);
  EXPECT_EQ(table_.pending(), 0u);
}

// Sampled events: launches without events of their own complete with the
// next launch that has them, from its "before" (the stream reached it) or
// its "after"; until then their progress is the window they belong to.
TEST_F(LaunchTableTest, LaunchesWithoutEventsCompleteWithALaterOne) {
  uint64_t done_ns = 0;
  bool without = false;
  const uint64_t s0 = Launch(kS1, 7);
  table_.Bind(s0, 1, &done_ns, nullptr, &without);
  EXPECT_FALSE(without);
  const uint64_t u1 = Unsampled(kS1, 7);
  table_.Bind(u1, 2, &done_ns, nullptr, &without);
  EXPECT_TRUE(without);
  const uint64_t u2 = Unsampled(kS1, 7);
  table_.Bind(u2, 3, &done_ns);
  const uint64_t s3 = Launch(kS1, 7);
  table_.Bind(s3, 4, &done_ns);
  Poll(10);
  EXPECT_TRUE(done_.empty());
  EXPECT_EQ(table_.ProgressOf(1), GpuProgress::kNotStarted);
  EXPECT_EQ(table_.ProgressOf(2), GpuProgress::kInWindow);
  EXPECT_EQ(table_.ProgressOf(4), GpuProgress::kNotStarted) << "its own event says so";
  uint64_t first = 0, last = 0;
  EXPECT_FALSE(table_.WindowOf(1, &first, &last));
  ASSERT_TRUE(table_.WindowOf(3, &first, &last));
  EXPECT_EQ(first, 1u) << "s0 is not done: the window starts there";
  EXPECT_EQ(last, 3u);

  Run(kS1, 2);  // s0 done; the GPU is somewhere in u1, u2 (or between them and s3)
  Poll(20);
  EXPECT_EQ(done_, (std::map<uint64_t, uint64_t>{{1, 20}}));
  EXPECT_EQ(table_.ProgressOf(2), GpuProgress::kInWindow);
  ASSERT_TRUE(table_.WindowOf(3, &first, &last));
  EXPECT_EQ(first, 2u);
  EXPECT_EQ(last, 3u);

  Run(kS1, 3);  // s3's "before": the stream reached s3, so u1 and u2 are done
  Poll(30);
  EXPECT_EQ(done_.at(2), 30u);
  EXPECT_EQ(done_.at(3), 30u);
  EXPECT_EQ(from_later_, (std::set<uint64_t>{2, 3}));
  EXPECT_EQ(table_.ProgressOf(4), GpuProgress::kStarted);
  EXPECT_EQ(done_.count(4), 0u);

  Run(kS1, 4);
  Poll(40);
  EXPECT_EQ(done_.at(4), 40u);
  EXPECT_EQ(from_later_.count(4), 0u);
  EXPECT_EQ(table_.pending(), 0u);
}

// The tail of a burst: launches without events after the last one with
// them stay unproven, in a window, until the stream's next launch with
// events; none of them is ever said done without an event that proves it.
TEST_F(LaunchTableTest, TheTailOfABurstWaitsForTheNextEvent) {
  uint64_t done_ns = 0;
  table_.Bind(Launch(kS1, 7), 1, &done_ns);
  table_.Bind(Unsampled(kS1, 7), 2, &done_ns);
  table_.Bind(Unsampled(kS1, 7), 3, &done_ns);
  Run(kS1, 2);
  Poll(10);
  Poll(20);
  EXPECT_EQ(done_, (std::map<uint64_t, uint64_t>{{1, 10}}));
  EXPECT_EQ(table_.ProgressOf(3), GpuProgress::kInWindow);
  uint64_t first = 0, last = 0;
  ASSERT_TRUE(table_.WindowOf(2, &first, &last));
  EXPECT_EQ(first, 2u);
  EXPECT_EQ(last, 3u);
  // Much later, the next launch records (its interval has passed).
  table_.Bind(Launch(kS1, 7), 4, &done_ns);
  Run(kS1, 4);
  Poll(1000);
  EXPECT_EQ(done_.at(2), 1000u);
  EXPECT_EQ(done_.at(3), 1000u);
  EXPECT_EQ(done_.at(4), 1000u);
  EXPECT_EQ(from_later_, (std::set<uint64_t>{2, 3}));
  EXPECT_EQ(table_.pending(), 0u);
}

// The window starts at the stream's first launch not proven done, with
// events or not: a launch with events still running holds the GPU before
// the launches without events after it.
TEST_F(LaunchTableTest, AWindowStartsAtTheFirstLaunchNotProvenDone) {
  uint64_t done_ns = 0;
  table_.Bind(Launch(kS1, 7), 1, &done_ns);
  table_.Bind(Unsampled(kS1, 7), 2, &done_ns);
  table_.Bind(Unsampled(kS1, 7), 3, &done_ns);
  table_.Bind(Launch(kS1, 7), 4, &done_ns);
  table_.Bind(Unsampled(kS1, 7), 5, &done_ns);
  Run(kS1, 1);  // launch 1 started, not done
  Poll(10);
  EXPECT_EQ(table_.ProgressOf(1), GpuProgress::kStarted);
  uint64_t first = 0, last = 0;
  ASSERT_TRUE(table_.WindowOf(3, &first, &last));
  EXPECT_EQ(first, 1u) << "the GPU is in launch 1: the window starts there";
  EXPECT_EQ(last, 3u) << "launch 4 was not reached";
  ASSERT_TRUE(table_.WindowOf(5, &first, &last));
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(last, 5u);
  Run(kS1, 2);  // launch 1 done: the window starts at 2
  Poll(20);
  ASSERT_TRUE(table_.WindowOf(2, &first, &last));
  EXPECT_EQ(first, 2u);
  EXPECT_EQ(last, 3u);
}

// A launch without events that another thread drains late is still placed
// before the launch with events that came after it on the stream.
TEST_F(LaunchTableTest, ALateLaunchWithoutEventsIsPlacedBeforeTheNextRecorded) {
  uint64_t done_ns = 0;
  StreamEvents* ring = rings_[kS1].get();
  table_.Bind(Launch(kS1, 7), 1, &done_ns);
  const uint64_t key = ring->issued();  // what the late launch read at its stop, before the next took a number
  table_.Bind(Launch(kS1, 7), 3, &done_ns);
  const uint64_t late = ++next_id_;
  table_.Launched(late, ring, key, 8, true, false);
  table_.Bind(late, 2, &done_ns);
  Run(kS1, 3);  // the second launch's "before": the late one is done
  Poll(10);
  EXPECT_EQ(done_.count(2), 1u);
  EXPECT_EQ(from_later_, (std::set<uint64_t>{2}));
}

}  // namespace
}  // namespace ncclwatch::plugin

// An operation's key is the same from its file's record and from the
// model's Op, for collectives and point-to-point operations alike.

#include "tools/model/op_key.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tools/model/model.h"
#include "tools/reader/reader.h"
#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools {
namespace {

using testing::kMs;

TEST(OpKey, TheRecordAndTheModelsOpKeyAlike) {
  testing::TraceBuilder b({.host = "node0", .pid = 7, .launcher_rank = 0});
  const int world = b.AddComm(0xabc, "world", 2, 0, 1 * kMs);
  b.Coll(world, "AllReduce", 0, 1024, 2 * kMs, 3 * kMs);
  b.Coll(world, "Broadcast", 0, 1024, 4 * kMs, 5 * kMs);
  b.Coll(world, "AllReduce", 1, 1024, 6 * kMs, 7 * kMs);
  b.Send(world, /*peer=*/1, 1024, 8 * kMs, 9 * kMs);
  b.Send(world, /*peer=*/1, 1024, 10 * kMs, 11 * kMs);
  const std::string bytes = b.Bytes();

  FuncIds names;
  std::vector<OpKey> from_records;
  TraceReader r;
  r.OpenBytes("f", bytes);
  trace::Record rec;
  uint64_t off = 0;
  std::unordered_map<uint32_t, std::string> strings;
  while (r.Next(&rec, &off)) {
    if (rec.has_string_def()) strings[rec.string_def().id()] = rec.string_def().text();
    if (rec.has_op()) from_records.push_back(OpKeyOf(rec.op(), 0xabc, names.Id(strings[rec.op().func()])));
  }
  Model m;
  std::string error;
  ASSERT_TRUE(LoadModelFromBytes({{"f", bytes}}, LoadOptions(), &m, &error)) << error;
  ASSERT_EQ(m.ops.size(), from_records.size());
  std::unordered_set<OpKey, OpKeyHash> distinct;
  for (size_t i = 0; i < m.ops.size(); ++i) {
    OpKey k;
    ASSERT_TRUE(OpKeyOf(m, m.ops[i], names, &k));
    EXPECT_EQ(k, from_records[i]) << i;
    distinct.insert(k);
  }
  EXPECT_EQ(distinct.size(), 5u);  // AllReduce #0 and Broadcast #0 differ; the two sends differ by their order
  EXPECT_TRUE(from_records[3].p2p);
  EXPECT_EQ(from_records[3].peer, 1);
  EXPECT_EQ(from_records[3].seq, 1u);
  EXPECT_EQ(from_records[4].seq, 2u);

  FuncIds other;
  OpKey k;
  EXPECT_FALSE(OpKeyOf(m, m.ops[0], other, &k));  // a function those ids never saw
}

}  // namespace
}  // namespace ncclwatch::tools

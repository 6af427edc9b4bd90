// The sharing reader's bound on what references take (a few bytes can
// name hundreds of checkpoints), and the writer keeping to it. What a
// group shares read back as written, and references broken one way at a
// time, are //tools/summary:sharing_test's.

#include "tools/model/summary_sharing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ncclwatch::tools {
namespace {

// A process whose one prefix has `n` checkpoints, every 64 collectives.
summary::SummaryProcess WithCheckpoints(const std::string& path, int n) {
  summary::SummaryProcess sp;
  sp.set_path(path);
  summary::CommPrefix* p = sp.add_prefixes();
  p->set_comm_hash(0x5000);
  p->set_collectives(64 * static_cast<uint64_t>(n));
  p->set_ops(p->collectives());
  for (int i = 1; i <= n; ++i) {
    summary::Checkpoint* c = p->add_checkpoints();
    c->set_position(64 * static_cast<uint64_t>(i));
    c->set_hash(0x1000 + static_cast<uint64_t>(i));
    c->set_seq(static_cast<uint64_t>(i));
    c->set_func("AllReduce");
  }
  return sp;
}

TEST(SummarySharingTest, ReferencesTakeCheckpointsWithinTheFilesBytes) {
  const std::vector<summary::SummaryProcess> procs = {WithCheckpoints("a", 1000)};
  SharingReader reader(kFirstSharingVersion);
  reader.Read(1, 0);
  summary::SummaryProcess sp = WithCheckpoints("b", 0);
  sp.mutable_prefixes(0)->set_checkpoints_from(1);
  sp.mutable_prefixes(0)->set_checkpoints_shared(1000);
  // 1,000 checkpoints taken by a record ending at byte 3,999: one past.
  summary::SummaryProcess taken = sp;
  std::string why;
  EXPECT_FALSE(reader.Resolve(2, 3999, procs, &taken, &why));
  EXPECT_NE(why.find("made to take far more memory than its bytes"), std::string::npos) << why;
  EXPECT_TRUE(reader.Resolve(2, 4000, procs, &sp, &why)) << why;
  EXPECT_EQ(sp.prefixes(0).checkpoints_size(), 1000);
  EXPECT_EQ(sp.prefixes(0).checkpoints_from(), 0u);
}

TEST(SummarySharingTest, TheWriterKeepsToTheBound) {
  const summary::SummaryProcess a = WithCheckpoints("a", 1000), b = WithCheckpoints("b", 1000);
  SharingWriter writer;
  summary::SummaryProcess out;
  EXPECT_FALSE(writer.Share(1, 0, a, &out));
  // After too few bytes it is written whole; after enough, it refers.
  EXPECT_FALSE(writer.Share(2, 3999, b, &out));
  EXPECT_TRUE(writer.Share(3, 4000, b, &out));
  EXPECT_EQ(out.prefixes(0).checkpoints_from(), 1u);
  EXPECT_EQ(out.prefixes(0).checkpoints_shared(), 1000u);
  EXPECT_EQ(out.prefixes(0).checkpoints_size(), 0);
}

}  // namespace
}  // namespace ncclwatch::tools

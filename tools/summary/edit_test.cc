// A summary edited after it was written, its checksums computed again, is
// never evidence: each edit below, to one rank's summary of two recordings
// (a skipped collective and a healthy job, each rank summarized alone, with
// a window of 2 so that collectives are let go), gives diagnose's verdict
// on the intact summaries or one that says the evidence is incomplete or
// unusable naming the edited file, never another finding. The consistency
// checks of tools/model/summary_checks.h and the merge's chain comparison
// (merge_chains.cc) hold this; without them, every checkpoint hash of a
// summary set to one value reads as a MISMATCH.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "proto/trace.pb.h"
#include "tools/model/collectives.h"
#include "tools/model/summary_format.h"
#include "tools/summary/summary.h"
#include "tools/summary/test_summaries.h"

namespace ncclwatch::tools {
namespace {

using testing::SaysDamaged;
using testing::SummarizeFolder;
using testing::Verdict;
using testing::WriteBytes;

struct Edit {
  const char* what;
  // Edits a process; false where it has nothing to edit.
  std::function<bool(summary::SummaryProcess*)> apply;
};

// The first prefix with at least `n` checkpoints; null if none.
summary::CommPrefix* WithCheckpoints(summary::SummaryProcess* p, int n) {
  for (summary::CommPrefix& c : *p->mutable_prefixes())
    if (c.checkpoints_size() >= n) return &c;
  return nullptr;
}

// The LastSeq of `c`'s collectives named `func`; null if none.
summary::LastSeq* LastOf(summary::CommPrefix* c, const std::string& func) {
  for (summary::LastSeq& l : *c->mutable_colls())
    if (l.func() == func) return &l;
  return nullptr;
}

const std::vector<Edit>& Edits() {
  static const std::vector<Edit>* const edits = new std::vector<Edit>{
      {"every checkpoint hash set to one value",
       [](summary::SummaryProcess* p) {
         bool any = false;
         for (summary::CommPrefix& c : *p->mutable_prefixes())
           for (summary::Checkpoint& k : *c.mutable_checkpoints()) k.set_hash(0x5eed), any = true;
         return any;
       }},
      {"one hash before a prefix's last changed",
       [](summary::SummaryProcess* p) {
         summary::CommPrefix* c = WithCheckpoints(p, 2);
         return c != nullptr && (c->mutable_checkpoints(0)->set_hash(c->checkpoints(0).hash() ^ 1), true);
       }},
      {"a prefix's last seq moved below its last checkpoint's",
       [](summary::SummaryProcess* p) {
         summary::CommPrefix* c = WithCheckpoints(p, 1);
         if (c == nullptr) return false;
         const summary::Checkpoint& k = c->checkpoints(c->checkpoints_size() - 1);
         summary::LastSeq* l = LastOf(c, k.func());
         return l != nullptr && k.seq() > 0 && (l->set_seq(k.seq() - 1), true);
       }},
      {"a prefix's last seq moved up",
       [](summary::SummaryProcess* p) {
         summary::CommPrefix* c = WithCheckpoints(p, 1);
         return c != nullptr && c->colls_size() > 0 && (c->mutable_colls(0)->set_seq(c->colls(0).seq() + 3), true);
       }},
      {"a sample's collectives one more",
       [](summary::SummaryProcess* p) {
         if (p->samples_size() == 0) return false;
         p->mutable_samples(0)->set_collectives(p->samples(0).collectives() + 1);
         return true;
       }},
      {"a sample's stride doubled",
       [](summary::SummaryProcess* p) {
         if (p->samples_size() == 0) return false;
         p->mutable_samples(0)->set_stride_log2(p->samples(0).stride_log2() + 1);
         return true;
       }},
      {"a checkpoint's seq moved past its function's last",
       [](summary::SummaryProcess* p) {
         summary::CommPrefix* c = WithCheckpoints(p, 1);
         return c != nullptr && (c->mutable_checkpoints(0)->set_seq(c->checkpoints(0).seq() + 1000), true);
       }},
      {"let_go_ops one more", [](summary::SummaryProcess* p) { return p->set_let_go_ops(p->let_go_ops() + 1), true; }},
      {"let_go_ops one fewer",
       [](summary::SummaryProcess* p) {
         return p->let_go_ops() > 0 && (p->set_let_go_ops(p->let_go_ops() - 1), true);
       }},
      {"let_go_completed one more",
       [](summary::SummaryProcess* p) { return p->set_let_go_completed(p->let_go_completed() + 1), true; }},
      {"a prefix's operations one more",
       [](summary::SummaryProcess* p) {
         summary::CommPrefix* c = WithCheckpoints(p, 1);
         return c != nullptr && (c->set_ops(c->ops() + 1), true);
       }},
      {"a prefix's collectives one more",
       [](summary::SummaryProcess* p) {
         summary::CommPrefix* c = WithCheckpoints(p, 1);
         return c != nullptr && (c->set_collectives(c->collectives() + 1), true);
       }},
      {"a prefix's collectives one fewer",
       [](summary::SummaryProcess* p) {
         summary::CommPrefix* c = WithCheckpoints(p, 2);
         return c != nullptr && (c->set_collectives(c->collectives() - 1), true);
       }},
      {"a checkpoint's position one later",
       [](summary::SummaryProcess* p) {
         summary::CommPrefix* c = WithCheckpoints(p, 2);
         return c != nullptr && (c->mutable_checkpoints(0)->set_position(c->checkpoints(0).position() + 1), true);
       }},
      {"the last checkpoint's position one earlier",
       [](summary::SummaryProcess* p) {
         summary::CommPrefix* c = WithCheckpoints(p, 1);
         summary::Checkpoint* k = c == nullptr ? nullptr : c->mutable_checkpoints(c->checkpoints_size() - 1);
         return k != nullptr && k->position() > 1 && (k->set_position(k->position() - 1), true);
       }},
      {"a prefix given twice",
       [](summary::SummaryProcess* p) {
         summary::CommPrefix* c = WithCheckpoints(p, 1);
         return c != nullptr && (*p->add_prefixes() = summary::CommPrefix(*c), true);
       }},
      {"a stats row's incomplete past its operations",
       [](summary::SummaryProcess* p) {
         return p->rows_size() > 0 && (p->mutable_rows(0)->set_incomplete(p->rows(0).ops() + 1), true);
       }},
      {"a stats row's operations fewer than its sketch holds",
       [](summary::SummaryProcess* p) {
         for (summary::RowDigest& r : *p->mutable_rows())
           if (r.has_gpu() && r.ops() > 0) return r.set_ops(0), true;
         return false;
       }},
  };
  return *edits;
}

// Each edit (`edits`) of rank 0's summary of `folder`, summarized with
// `opts` each rank alone (or, `whole`, all ranks in one summary, as one
// node's): the intact verdict, or one that says the evidence is
// incomplete or unusable and names the edited file. Returns how many
// edits applied.
int EditsOf(const std::string& folder, const std::string& tag, const SummarizeOptions& opts,
            const std::vector<Edit>& edits, bool whole = false) {
  std::vector<SummaryResult> made = SummarizeFolder(folder, whole, opts);
  std::vector<std::string> paths;
  for (size_t g = 0; g < made.size(); ++g) {
    paths.push_back(testing::Tmp() + "/" + tag + "-" + std::to_string(g) + kSummaryExtension);
    WriteBytes(paths.back(), EncodeSummary(made[g]));
  }
  EXPECT_EQ(paths.size() > 1, !whole);
  const std::string intact = Verdict(paths);
  EXPECT_FALSE(SaysDamaged(intact)) << intact;
  int applied = 0;
  for (const Edit& e : edits) {
    SummaryResult s = made[0];
    if (s.procs.empty() || !e.apply(&s.procs[0])) continue;
    ++applied;
    WriteBytes(paths[0], EncodeSummary(s));
    const std::string v = Verdict(paths);
    EXPECT_TRUE(v == intact || (SaysDamaged(v) && v.find(paths[0]) != std::string::npos))
        << tag << ": " << e.what << ": " << v << "\n  intact: " << intact;
    printf("%s: %s: %.400s\n", tag.c_str(), e.what, v.c_str());
  }
  WriteBytes(paths[0], EncodeSummary(made[0]));
  return applied;
}

SummarizeOptions Options(uint32_t checkpoint_every, uint64_t max_bytes = 64 << 10) {
  SummarizeOptions opts;
  opts.window = 2;
  opts.checkpoint_every = checkpoint_every;
  opts.max_bytes_per_rank = max_bytes;
  return opts;
}

TEST(SummaryEdit, EditsOfASkipJobsSummary) {
  // A checkpoint every 2 collectives: prefixes hold several.
  EXPECT_EQ(EditsOf("testdata/gpu/skip", "skip2", Options(2), Edits()), static_cast<int>(Edits().size()));
  // The default interval: each prefix holds its last only.
  EXPECT_GT(EditsOf("testdata/gpu/skip", "skip64", Options(64), Edits()), 10);
}

// One node's summary of every rank, its first process edited. Every edit
// applies but the two of arrival samples: a node that holds every rank of
// its communicators keeps arrival digests instead.
TEST(SummaryEdit, EditsOfANodesSummary) {
  for (const char* folder : {"testdata/gpu/skip", "testdata/gpu/healthy"}) {
    const std::string tag =
        std::string("node-") + (std::string(folder).find("skip") != std::string::npos ? "skip" : "healthy");
    EXPECT_EQ(EditsOf(folder, tag, Options(2), Edits(), true), static_cast<int>(Edits().size()) - 2) << folder;
  }
}

TEST(SummaryEdit, EditsOfAHealthyJobsSummary) {
  EXPECT_EQ(EditsOf("testdata/gpu/healthy", "healthy2", Options(2), Edits()), static_cast<int>(Edits().size()));
  // A cap a little under the smallest rank's record with a checkpoint at
  // every collective: the cap thins them (the interval doubling), and
  // cuts no operation.
  uint64_t smallest = UINT64_MAX;
  for (const SummaryResult& s : SummarizeFolder("testdata/gpu/healthy", false, Options(1, 0)))
    for (const summary::SummaryProcess& p : s.procs) smallest = std::min<uint64_t>(smallest, p.ByteSizeLong());
  const SummarizeOptions capped = Options(1, smallest - 8);
  for (const SummaryResult& s : SummarizeFolder("testdata/gpu/healthy", false, capped))
    for (const summary::SummaryProcess& p : s.procs) {
      EXPECT_GT(p.checkpoint_every(), 1u);
      EXPECT_EQ(p.cut_ops(), 0u);
    }
  EXPECT_GT(EditsOf("testdata/gpu/healthy", "healthy-cap", capped, Edits()), 10);
}

// The second round (summarize --collectives) keeps the let-go collectives
// asked for: a checkpoint hash edited, even a prefix's last (which round
// one compares only with the other ranks'), is not the chain of the
// asked collectives before it, nor is a changed count of one of them.
TEST(SummaryEdit, EditsOfASecondRound) {
  for (const char* folder : {"testdata/gpu/skip", "testdata/gpu/healthy"}) {
    SummarizeOptions opts = Options(4);
    for (const SummaryResult& s : SummarizeFolder(folder, false, opts))
      for (const summary::SummaryProcess& p : s.procs)
        for (const summary::CommPrefix& c : p.prefixes())
          if (c.comm_hash() != 0) opts.collectives.push_back(CollectiveRange{c.comm_hash(), 1, 64});
    const std::vector<Edit> asked = {
        {"a prefix's last hash changed",
         [](summary::SummaryProcess* p) {
           summary::CommPrefix* c = WithCheckpoints(p, 1);
           if (c == nullptr) return false;
           summary::Checkpoint* k = c->mutable_checkpoints(c->checkpoints_size() - 1);
           return k->set_hash(k->hash() ^ 0x100), true;
         }},
        {"an asked collective's count changed",
         [](summary::SummaryProcess* p) {
           if (p->asked_collectives_size() == 0) return false;
           trace::Record r;
           if (!r.ParseFromString(p->asked_collectives(0).record())) return false;
           r.mutable_op()->set_count(r.op().count() + 1);
           p->mutable_asked_collectives(0)->set_record(r.SerializeAsString());
           return true;
         }},
    };
    const std::string tag =
        std::string("asked-") + (std::string(folder).find("skip") != std::string::npos ? "skip" : "healthy");
    EXPECT_EQ(EditsOf(folder, tag, opts, asked), 2) << folder;
  }
}

}  // namespace
}  // namespace ncclwatch::tools

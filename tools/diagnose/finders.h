// The finders of `ncclwatch diagnose`, one kind of fault each, and the
// sections that go beside the findings. Diagnose (diagnose.cc) runs them in
// this order over one prepared Ctx; each adds what it finds with Emit.

#ifndef TOOLS_DIAGNOSE_FINDERS_H_
#define TOOLS_DIAGNOSE_FINDERS_H_

#include <memory>
#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

// find_mismatch.cc. First: sets Ctx::mismatch_seq, which stuck detection reads.
void FindMismatches(Ctx* c, std::vector<Ranked>* out);
// find_missing.cc
void FindMissingAndStuck(Ctx* c, std::vector<Ranked>* out);
// find_late.cc
void FindLate(Ctx* c, std::vector<Ranked>* out);
// find_p2p.cc
void FindP2p(Ctx* c, std::vector<Ranked>* out);
// find_dead.cc
void FindDead(Ctx* c, std::vector<Ranked>* out);
// find_cycles.cc
void FindCycles(Ctx* c, std::vector<Ranked>* out);
void FindOrderCycles(Ctx* c, std::vector<Ranked>* out);
// find_mismatch.cc. Where per-node summaries let the collectives go, their
// signature chains still tell that ranks diverged, and between which
// collectives (Model::chain_mismatches): a MISMATCH naming the ranks out of
// the majority, not the operation, and how to get it named (the second
// round, summarize --collectives). After the operation-level finders:
// where that round's collectives are in the model (ChainMismatch::asked)
// and a MISMATCH or ORDER_MISMATCH among `out` on the communicator names
// one of them, that finding is the range's, said once.
void FindChainMismatches(const Ctx& c, std::vector<Ranked>* out);
// find_stragglers.cc. The straggler finders' counts (the host's arrivals
// and the GPU-held times, over the windows and over the samples) read only
// the model and the options: Diagnose counts them on a thread of its own
// beside the other finders, since at 16,384 ranks they were half the
// diagnosis (BENCHMARKS.md, "The 16k merge on more than one core").
// Thread safety: reads `m` and `o`, which nothing may change meanwhile.
struct StragglerCounts;
struct StragglerCountsDeleter {
  void operator()(StragglerCounts* p) const;
};
using StragglerCountsPtr = std::unique_ptr<StragglerCounts, StragglerCountsDeleter>;
StragglerCountsPtr CountForStragglers(const Model& m, const DiagnoseOptions& o);
// `counts`: CountForStragglers(c->m, c->o), or null to count here.
void FindStragglers(Ctx* c, StragglerCountsPtr counts, std::vector<Ranked>* out);
// find_ended.cc. Last: judged only when no other error was found.
void FindEnded(Ctx* c, std::vector<Ranked>* out);

// sections.cc
void FillProgress(const Ctx& c, Diagnosis* d);
void FillStuckReports(const Ctx& c, Diagnosis* d);
void FillInput(const Ctx& c, Diagnosis* d);
void FillClock(const Ctx& c, Diagnosis* d);
// A finding that rests on a missing record says when the blamed rank's
// trace lost events.
void CaveatLostRecords(const Ctx& c, std::vector<Ranked>* found);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FINDERS_H_

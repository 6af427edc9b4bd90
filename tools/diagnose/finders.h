// The finders of `ncclwatch diagnose`, one kind of fault each, and the
// sections that go beside the findings. Each finder is a function of one
// const Ctx (and of what an earlier finder returned, passed by value or
// const reference) that returns its findings; Diagnose (diagnose.cc) runs
// them in this order and gathers what they return.

#ifndef TOOLS_DIAGNOSE_FINDERS_H_
#define TOOLS_DIAGNOSE_FINDERS_H_

#include <vector>

#include "tools/diagnose/context.h"
#include "tools/diagnose/straggler_counts.h"

namespace ncclwatch::tools::diagnose_internal {

// find_mismatch.cc. What FindMismatches found, and where: stuck detection
// and the order of cycles defer to a communicator's first disagreement.
struct Mismatches {
  std::vector<Ranked> found;
  // Per communicator: the seq of its first collective whose ranks disagree
  // (0: none).
  std::vector<uint64_t> first_seq;
};
Mismatches FindMismatches(const Ctx& c);
// find_missing.cc. `mismatch_seq`: Mismatches::first_seq; a hang at or
// after a mismatch is its consequence, not a STUCK_IN_PROGRESS.
std::vector<Ranked> FindMissingAndStuck(const Ctx& c, const std::vector<uint64_t>& mismatch_seq);
// find_late.cc
std::vector<Ranked> FindLate(const Ctx& c);
// find_p2p.cc
std::vector<Ranked> FindP2p(const Ctx& c);
// find_dead.cc
std::vector<Ranked> FindDead(const Ctx& c);
// find_cycles.cc
std::vector<Ranked> FindCycles(const Ctx& c);
// `mismatch_seq`: Mismatches::first_seq; a communicator with a mismatch
// explains its own shifts.
std::vector<Ranked> FindOrderCycles(const Ctx& c, const std::vector<uint64_t>& mismatch_seq);
// find_mismatch.cc. Where per-node summaries let the collectives go, their
// signature chains still tell that ranks diverged, and between which
// collectives (Model::chain_mismatches): a MISMATCH naming the ranks out of
// the majority, not the operation, and how to get it named (the second
// round, summarize --collectives). Runs after the operation-level finders,
// whose findings are `earlier`: where that round's collectives are in the
// model (ChainMismatch::asked) and a MISMATCH or ORDER_MISMATCH of `earlier`
// on the communicator names one of them, that finding is the range's, said
// once; where they are not, an ORDER_MISMATCH of `earlier` that blames only
// the diverging ranks follows from the divergence: it is `absorbed`, said in
// the chain's finding instead.
struct ChainMismatches {
  std::vector<Ranked> found;
  std::vector<bool> absorbed;  // per finding of `earlier`
};
ChainMismatches FindChainMismatches(const Ctx& c, const std::vector<Ranked>& earlier);
// find_stragglers.cc. `counts`: CountForStragglers(c.m, c.o)
// (straggler_counts.h), which Diagnose makes on a thread of its own.
std::vector<Ranked> FindStragglers(const Ctx& c, StragglerCounts counts);
// find_ended.cc. Last: judged only where no other error was found
// (`error_found`: a finding of error severity explains how the job ended).
std::vector<Ranked> FindEnded(const Ctx& c, bool error_found);

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

// MISMATCH from the per-node summaries' signature chains: ranks whose
// collectives on a communicator diverged, where the summaries let the
// collectives themselves go.
//
// Thread safety: a function of a const Ctx and its other arguments; any thread.

#ifndef TOOLS_DIAGNOSE_FIND_CHAIN_MISMATCH_H_
#define TOOLS_DIAGNOSE_FIND_CHAIN_MISMATCH_H_

#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

// Where per-node summaries let the collectives go, their signature chains
// still tell that ranks diverged, and between which collectives
// (Model::chain_mismatches): a MISMATCH naming the ranks out of the
// majority, not the operation, and how to get it named (the second round,
// summarize --collectives). Runs after the operation-level finders, whose
// findings are `earlier`: where that round's collectives are in the model
// (ChainMismatch::asked) and a MISMATCH or ORDER_MISMATCH of `earlier` on
// the communicator names one of them, that finding is the range's, said
// once; where they are not, an ORDER_MISMATCH of `earlier` that blames
// only the diverging ranks follows from the divergence: it is `absorbed`,
// said in the chain's finding instead.
struct ChainMismatches {
  std::vector<Ranked> found;
  std::vector<bool> absorbed;  // per finding of `earlier`
};
ChainMismatches FindChainMismatches(const Ctx& c, const std::vector<Ranked>& earlier);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FIND_CHAIN_MISMATCH_H_

// MISSING_RANK and STUCK_IN_PROGRESS: an operation some rank never joined,
// and one every rank joined that never finished.
//
// Thread safety: a function of a const Ctx and its other arguments; any thread.

#ifndef TOOLS_DIAGNOSE_FIND_MISSING_H_
#define TOOLS_DIAGNOSE_FIND_MISSING_H_

#include <stdint.h>

#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

// `mismatch_seq`: Mismatches::first_seq (find_mismatch.h); a hang at or
// after a mismatch is its consequence, not a STUCK_IN_PROGRESS.
std::vector<Ranked> FindMissingAndStuck(const Ctx& c, const std::vector<uint64_t>& mismatch_seq);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FIND_MISSING_H_

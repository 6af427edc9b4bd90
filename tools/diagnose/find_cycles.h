// WAIT_CYCLE and cross-communicator ORDER_MISMATCH: ranks waiting on each
// other in a cycle, from who waits in which operation, and from the merged
// order of operations.
//
// Thread safety: functions of a const Ctx and their other arguments; any thread.

#ifndef TOOLS_DIAGNOSE_FIND_CYCLES_H_
#define TOOLS_DIAGNOSE_FIND_CYCLES_H_

#include <stdint.h>

#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

// Ranks whose oldest hung operations wait on each other in a cycle.
std::vector<Ranked> FindCycles(const Ctx& c);
// Cycles of the merged order (tools/order/order.h) that ranks made by
// issuing operations in different orders. `mismatch_seq`:
// Mismatches::first_seq (find_mismatch.h); a communicator with a mismatch
// explains its own shifts.
std::vector<Ranked> FindOrderCycles(const Ctx& c, const std::vector<uint64_t>& mismatch_seq);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FIND_CYCLES_H_

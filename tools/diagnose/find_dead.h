// DEAD_RANK: a process whose file ends without a finalize, with no sign of
// life for longer than its heartbeats allow.
//
// Thread safety: a function of a const Ctx; any thread.

#ifndef TOOLS_DIAGNOSE_FIND_DEAD_H_
#define TOOLS_DIAGNOSE_FIND_DEAD_H_

#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

std::vector<Ranked> FindDead(const Ctx& c);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FIND_DEAD_H_

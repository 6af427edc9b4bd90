// STRAGGLER: a rank that repeatedly joins collectives late, on its host
// or, behind other work, on its GPU.
//
// Thread safety: a function of a const Ctx and its other arguments; any thread.

#ifndef TOOLS_DIAGNOSE_FIND_STRAGGLERS_H_
#define TOOLS_DIAGNOSE_FIND_STRAGGLERS_H_

#include <vector>

#include "tools/diagnose/context.h"
#include "tools/arrivals/counts.h"

namespace ncclwatch::tools::diagnose_internal {

using arrivals::StragglerCounts;  // NOLINT

// `counts`: CountForStragglers(c.m, c.o) (tools/arrivals/counts.h), which
// Diagnose makes on a thread of its own.
std::vector<Ranked> FindStragglers(const Ctx& c, StragglerCounts counts);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FIND_STRAGGLERS_H_

// UNMATCHED_P2P: a send without its receive, or with another size.
//
// Thread safety: a function of a const Ctx; any thread.

#ifndef TOOLS_DIAGNOSE_FIND_P2P_H_
#define TOOLS_DIAGNOSE_FIND_P2P_H_

#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

std::vector<Ranked> FindP2p(const Ctx& c);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FIND_P2P_H_

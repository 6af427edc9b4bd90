// MISMATCH and ORDER_MISMATCH within one communicator: ranks that issued
// different functions, counts, datatypes or roots at one position.
//
// Thread safety: a function of a const Ctx; any thread.

#ifndef TOOLS_DIAGNOSE_FIND_MISMATCH_H_
#define TOOLS_DIAGNOSE_FIND_MISMATCH_H_

#include <stdint.h>

#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

// What FindMismatches found, and where: stuck detection and the order of
// cycles defer to a communicator's first disagreement.
struct Mismatches {
  std::vector<Ranked> found;
  // Per communicator: the seq of its first collective whose ranks disagree
  // (0: none).
  std::vector<uint64_t> first_seq;
};
// First of the finders: the others defer to what it finds.
Mismatches FindMismatches(const Ctx& c);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FIND_MISMATCH_H_

// The cause of a hang whose absent ranks never issued the collective
// because they sit idle outside NCCL, or are still inside an earlier
// operation of the same communicator.
//
// The problem: a rank alive with no NCCL operation in flight is what a
// host busy outside NCCL leaves, and what a program that called something
// else leaves too; a send or receive whose peer never answers leaves no
// NCCL record at all (p2p_peers.h). And a rank still inside an earlier
// operation of the same communicator never "went on without" the later
// one: it is held, not a culprit.
//
// How: ExplainAbsent works on a MISSING_RANK finding whose culprits and
// fates its finder set. Held ranks move among the waiting (or, where every
// absent rank is held, the cause is "cannot tell" and what holds them
// tells). For idle ranks it pairs their last sends and receives
// (FindPeersNeverMeet): peers that never meet are program logic, the rank
// that named the wrong peer the culprit; otherwise "cannot tell", with what
// would tell (IdleWouldTell). Findings with another fate are left to
// Diagnose's AssignCause.
//
// Covered by p2p_peers_test (idle ranks, peers that never meet, the
// recordings) and find_missing_test (a held rank beside an idle one).
//
// Thread safety: a function of a const Ctx and its arguments; any thread.

#ifndef TOOLS_DIAGNOSE_IDLE_CAUSE_H_
#define TOOLS_DIAGNOSE_IDLE_CAUSE_H_

#include <stdint.h>

#include <string>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

// `head`: the verdict's start ("HANG: ranks 0,1 never joined Broadcast #4
// on comm ...; ranks 2,3 waited 80.4 s"), which the summary keeps where
// peers that never meet replace the fates after it.
void ExplainAbsent(const Ctx& c, uint32_t comm, const std::string& head, Finding* f);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_IDLE_CAUSE_H_

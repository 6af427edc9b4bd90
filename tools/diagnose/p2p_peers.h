// Point-to-point peers that never meet: why ranks that never joined a
// collective sit idle outside NCCL when their last calls were a send and a
// receive whose peers do not pair up.
//
// The problem: NCCL connects a pair of ranks at their first send or
// receive, inside the group launch, before any operation reaches the
// profiler (and it calls the profiler's init for a communicator only once
// its bootstrap is done). A send whose peer receives from someone else
// leaves no NCCL record on either side: the ranks look idle, like a host
// busy outside NCCL. PyTorch's Flight Recorder does record the calls
// (Proc::fr_p2p, joined by tools/fr), and the ranks that did pair up leave
// their Send/Recv records with their peers.
//
// How: from the collective the idle ranks last completed, each rank's
// sends and receives up to its next collective on that communicator (its
// own records, or where it has none there, Flight Recorder's) are paired,
// a send from a to b with a receive of b from a. A call left over names a
// peer that never answers. The rank to blame is the one whose call names
// a peer that paired with a third rank instead (rank 1 receives from rank
// 2, which sends to rank 3); a rank whose call waits on that rank is held
// by it. Where no call is left over, nothing is claimed.
//
// Thread safety: a function of a const Ctx and its arguments; any thread.

#ifndef TOOLS_DIAGNOSE_P2P_PEERS_H_
#define TOOLS_DIAGNOSE_P2P_PEERS_H_

#include <stdint.h>

#include <string>
#include <utility>
#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

struct PeersNeverMeet {
  bool found = false;
  // The ranks whose peer choice breaks the pairing; where the records
  // cannot single them out, every rank with a call left over.
  std::vector<uint32_t> culprits;
  bool precise = false;  // culprits singled out
  // "rank 1 receives from rank 2 while rank 0 sends to it and rank 2 sends to rank 3"
  std::string sentence;
  std::string cause_text;  // "program logic: ..."
  // (proc name, text): each rank's send or receive, and whether it met its peer.
  std::vector<std::pair<std::string, std::string>> evidence;
};

// For ranks `absent` of communicator `comm`, alive and idle outside NCCL:
// whether their last sends and receives name peers that never meet.
PeersNeverMeet FindPeersNeverMeet(const Ctx& c, uint32_t comm, const std::vector<uint32_t>& absent);

// The parenthesis a verdict adds after the sentence.
inline constexpr const char* kNeverMeetWhy =
    "point-to-point peers that never meet; NCCL connects a pair at its first call, before the profiler sees an "
    "operation";

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_P2P_PEERS_H_

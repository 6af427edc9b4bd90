// Which operations of a job followed live (ncclwatch watch) may be let go
// without changing any verdict diagnose would give on the whole files.
//
// Letting each file's oldest records go at its own pace would be wrong:
// ranks that write at different rates would keep different stretches of
// history, and diagnose, seeing rank A's AllReduce #1000 but not rank B's,
// could blame B. So an operation goes only with its match, from every
// file at once, and only once the match is settled:
//  - every rank of its communicator has a file, each issued its side (a
//    collective) or both sides are there (point-to-point), and
//  - each side finished, in the one liveness judgement every analysis
//    reads (tools/model/liveness.h): completed (also where a later
//    completion or a stuck report proves it), or, without completion
//    tracking, not proven unfinished though every rank issued it.
// And the window stays a suffix of each rank's program order on each
// communicator: on every (rank, communicator), an operation goes only
// when every earlier one goes too, and the last `keep_recent` stay (what
// a rank did last, and what stragglers are judged over); so does each
// communicator's latest collective completed on every rank (what
// diagnose reports as done before a problem). A match kept on one rank
// is kept on all.
//
// Thread safety: a pure function of its arguments.

#ifndef TOOLS_WATCH_SETTLED_H_
#define TOOLS_WATCH_SETTLED_H_

#include <stdint.h>

#include <vector>

#include "tools/model/liveness.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

// Per Model::ops index: whether it may be let go.
std::vector<bool> SettledOps(const Model& m, const Liveness& live, uint64_t keep_recent);

}  // namespace ncclwatch::tools

#endif  // TOOLS_WATCH_SETTLED_H_

// LATE_RANK: a collective every rank issued, that one rank reached so late
// that the others' wait was itself the fault: its host idle outside NCCL (a
// data loader, a checkpoint, the GIL) or its GPU busy with earlier work. On
// PyTorch jobs this is what trips the watchdogs of the ranks that waited; the
// late rank then goes on alone and ends up waiting for ranks that are gone,
// so without this finding the blame falls on those that waited (seen on
// H100, NCCL 2.28.9: a rank that slept 30 s before an all_reduce).
//
// Two ways to be late:
//  - enqueue: the rank called it kLateSec after the others, or as long
//    after them as their stuck limit when their stuck reports name it;
//  - GPU: it called it in time, but the waiting ranks' stuck reports saw
//    their GPUs in it while its own saw its GPU not started (CUDA-event
//    completions: the event before the kernel; kernel channels: none
//    started), and the operation completed only kLateSec after it was
//    issued.
//
// Thread safety: a function of a const Ctx; any thread.

#ifndef TOOLS_DIAGNOSE_FIND_LATE_H_
#define TOOLS_DIAGNOSE_FIND_LATE_H_

#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

std::vector<Ranked> FindLate(const Ctx& c);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FIND_LATE_H_

// JOB_ENDED: the job's processes ended before the job finished, and no
// other error explains it. The most common way a multi-GPU job dies: one
// rank is killed (the OOM killer, a segfault, a preemption) or raises, and
// the launcher (torchrun's agent, torch.multiprocessing.spawn, srun) ends
// the others within a second, before any watchdog fires. No operation waited
// long enough to be a hang, yet the job is dead; calling it healthy would be
// the worst answer we can give.
//
// A process has ended well when it finalized with nothing in flight. When
// some process did not, the job is judged by what its operations show:
//  - every operation completed, then every rank sat idle outside NCCL for
//    longer than DiagnoseOptions::ended_idle_sec: ENDING_IDLE (the host side
//    hung: a data loader, a store, a blocked thread);
//  - every operation completed, no idle tail: ENDING_UNFINALIZED, with no
//    culprit and no cause: a job cancelled (or its node lost) between
//    collectives leaves the same files as one that exited without
//    destroying its communicators, and an OK would close an incident on a
//    job that may have been killed;
//  - operations in flight or unknown at the end: one process stopped first
//    when it is behind the others (they issued collectives it never did) or
//    its file ends well before theirs: ENDING_ONE_FIRST, it is the culprit;
//    otherwise ENDING_ALL_AT_ONCE, with no culprit.
// Not judged while the files are still written (DiagnoseOptions::live).
//
// Thread safety: a function of a const Ctx and its other arguments; any thread.

#ifndef TOOLS_DIAGNOSE_FIND_ENDED_H_
#define TOOLS_DIAGNOSE_FIND_ENDED_H_

#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

// Last of the finders: judged only where no other error was found
// (`error_found`: a finding of error severity explains how the job ended).
std::vector<Ranked> FindEnded(const Ctx& c, bool error_found);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FIND_ENDED_H_

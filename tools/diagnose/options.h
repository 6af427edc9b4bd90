// What `ncclwatch diagnose` may be told (diagnose.h): how long a wait is a
// hang, when a silent rank is dead, when a late one is a straggler.

#ifndef TOOLS_DIAGNOSE_OPTIONS_H_
#define TOOLS_DIAGNOSE_OPTIONS_H_

#include "tools/arrivals/options.h"
#include "tools/model/liveness.h"

namespace ncclwatch::tools {

// When an operation in flight is a hang and a silent rank dead are
// LivenessOptions' (tools/model/liveness.h), STRAGGLER's thresholds
// StragglerOptions' (tools/arrivals/options.h): each has one field and one
// default, which every reader of it shares.
struct DiagnoseOptions : LivenessOptions, StragglerOptions {
  // ORDER_MISMATCH: how many operations ahead to look for a permutation.
  int order_window = 8;
  // JOB_ENDED, ENDING_IDLE: every rank idle outside NCCL for at least this
  // long before its file ends (and more than 3 heartbeats).
  double ended_idle_sec = 10.0;
  // The files are still being written (ncclwatch watch while the job runs):
  // a process that has not finalized has not ended, so how the job ended is
  // not judged (JOB_ENDED), and an OK is an OK so far.
  bool live = false;
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_DIAGNOSE_OPTIONS_H_

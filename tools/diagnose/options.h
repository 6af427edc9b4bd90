// What `ncclwatch diagnose` may be told (diagnose.h): how long a wait is a
// hang, when a silent rank is dead, when a late one is a straggler.

#ifndef TOOLS_DIAGNOSE_OPTIONS_H_
#define TOOLS_DIAGNOSE_OPTIONS_H_

#include "tools/arrivals/options.h"

namespace ncclwatch::tools {

// STRAGGLER's thresholds are StragglerOptions', which the arrival counts
// and a summary's digests read too.
struct DiagnoseOptions : StragglerOptions {
  // An in-flight operation is a hang once its waiting ranks stayed alive this
  // long after enqueuing it (or a stuck report names it).
  double min_wait_sec = 1.0;
  // DEAD_RANK: last sign of life earlier than the job's last record by more
  // than max(dead_heartbeats x heartbeat interval, dead_min_sec).
  double dead_heartbeats = 3.0;
  double dead_min_sec = 2.0;
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

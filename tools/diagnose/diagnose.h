// `ncclwatch diagnose`: what went wrong in a job, and who caused it, from
// every rank's trace file.
//
// Diagnose() reads a Model (tools/model/model.h) and fills one report::Diagnosis
// (proto/report.proto); the text (FormatText) and JSON (FormatJson) views
// are both printed from that message. The first line of the text is the
// verdict: one sentence naming the communicator, the operation, its sequence
// number and the culprit ranks.
//
// Findings (report::FindingKind), in the order the verdict prefers them (the
// root cause first; later kinds are usually consequences of earlier ones):
//   1. WAIT_CYCLE        "DEADLOCK: ..."  ranks blocked in different
//      communicators, each waiting for a rank that waits for it. It explains
//      the MISSING_RANK findings of the ranks on the cycle.
//   2. ORDER_MISMATCH    "ORDER MISMATCH: ..."  the same operations issued in
//      different orders (a programming error; the hang follows from it).
//   3. MISMATCH          "MISMATCH: ..."  function, count, datatype or root
//      differ at the same (comm, #seq). Culprits: ranks outside the strict
//      majority (never the majority); with no strict majority, every rank.
//   4. MISSING_RANK      "HANG: ..."  ranks that never issued #seq that the
//      others wait in, with what each did instead (left cleanly, died, idle
//      outside NCCL, waits in another communicator).
//   5. UNMATCHED_P2P     "UNMATCHED P2P: ..."  a send without a receive (or
//      the reverse), or a send and a receive whose sizes differ.
//   6. DEAD_RANK         "DEAD: ..."  heartbeats stop without a finalize. It
//      explains its peers' STUCK_IN_PROGRESS when it died inside the op.
//   7. STUCK_IN_PROGRESS "STUCK: ..."  every rank issued #seq, it never
//      finished on some; names the stalled channel/peer from stuck reports.
//   8. STRAGGLER         "STRAGGLER: ..."  (warning) a rank that arrives
//      last at most collectives.
//   9. JOB_ENDED         "ENDED: ..."  only when no other error explains it:
//      the job's processes ended (no finalize, or an abort) while operations
//      were in flight: one first and the others after it (a launcher ending
//      the rest), all at once (cancelled, a node lost, or files copied while
//      the job ran), or after every rank sat idle outside NCCL. Only a job
//      whose processes all finalized with nothing in flight, or whose every
//      operation completed with no idle tail, can be OK.
// Every finding names the kind of cause its evidence points to
// (Finding.cause: program logic, a rank's resources, the network, or
// "cannot tell" with what would tell), at the end of the verdict line.
// Within one kind, the finding about the earliest operation comes first.
//
// Severity and exit status: every kind but STRAGGLER is an error; STRAGGLER
// is a warning. ExitStatus: 0 no finding, 1 any finding (warning included;
// `ncclwatch check` will fail only on errors), 2 unusable input (the diagnose
// command, when BuildModel fails), 3 evidence incomplete or damaged: a
// communicator rank or launcher rank without a file, a damaged file, lost
// events, or nothing recorded (Diagnosis.incomplete). Then the verdict's
// first line says so ("INCOMPLETE: ..." without a finding, "INCOMPLETE
// EVIDENCE (...): " before one): a healthy-looking job with missing
// evidence is never OK. A cut tail alone is not damage: it is how a killed
// process's file ends.
//
// A hang needs time: an operation counts as hung when the waiting ranks were
// alive for `min_wait_sec` after enqueuing it, or a stuck report names it.
// A job killed while an operation was in flight is not a hang, but it is not
// healthy either: JOB_ENDED says how it ended.
//
// Thread safety: pure functions of their arguments.

#ifndef TOOLS_DIAGNOSE_DIAGNOSE_H_
#define TOOLS_DIAGNOSE_DIAGNOSE_H_

#include <ostream>
#include <string>
#include <vector>

#include "proto/report.pb.h"
#include "tools/diagnose/options.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

report::Diagnosis Diagnose(const Model& model, const DiagnoseOptions& opts = {});


// The text view: the verdict on the first line, then findings with their
// evidence (at most 16 lines each; JSON has all), what completed before the
// problem, stuck reports, input issues and clock alignment.
std::string FormatText(const report::Diagnosis& d);
// The JSON view (protobuf's JSON encoder, fields in lowerCamelCase).
std::string FormatJson(const report::Diagnosis& d);

// 0 healthy, 1 any finding, 2 unusable input, 3 incomplete or damaged evidence.
int ExitStatus(const report::Diagnosis& d);


}  // namespace ncclwatch::tools

#endif  // TOOLS_DIAGNOSE_DIAGNOSE_H_

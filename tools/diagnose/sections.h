// The Diagnosis sections beside the findings: progress per communicator,
// the plugin's stuck reports, what the input held, and clock alignment.
//
// Thread safety: functions of a const Ctx that write only the Diagnosis or
// findings they are given.

#ifndef TOOLS_DIAGNOSE_SECTIONS_H_
#define TOOLS_DIAGNOSE_SECTIONS_H_

#include <vector>

#include "tools/diagnose/context.h"

namespace ncclwatch::tools::diagnose_internal {

void FillProgress(const Ctx& c, Diagnosis* d);
void FillStuckReports(const Ctx& c, Diagnosis* d);
void FillInput(const Ctx& c, Diagnosis* d);
void FillClock(const Ctx& c, Diagnosis* d);
// A finding that rests on a missing record says when the blamed rank's
// trace lost events.
void CaveatLostRecords(const Ctx& c, std::vector<Ranked>* found);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_SECTIONS_H_

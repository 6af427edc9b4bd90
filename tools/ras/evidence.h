// NCCL's RAS view as evidence under a verdict (`watch --ras`, `diagnose
// --ras`): what RAS says, in lines for people, and how it compares with the
// verdict the traces gave.
//
// RAS counts launches of five collectives (not completions, no point-to-
// point), so ranks hung inside an operation they all launched look alike
// to it; but it knows job-wide which processes are dead or unresponsive
// and which communicators have not finished their init, which no trace
// shows (NCCL starts the profiler of a communicator only once its init is
// done). So its view is added beside the verdict, never in its place:
// the verdict, severity, exit status and culprits stay the traces'. Where
// RAS singles out other ranks than the verdict's culprits, both are said;
// where the verdict's cause is "cannot tell" and RAS names dead or
// unresponsive processes or a communicator stuck in init, that goes under
// the verdict as the line that tells more.
//
// Pure functions; any thread.

#ifndef TOOLS_RAS_EVIDENCE_H_
#define TOOLS_RAS_EVIDENCE_H_

#include <stdint.h>

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "proto/report.pb.h"

namespace ncclwatch::tools {

// A report of one RAS answer (`source`: its address or file): the view and
// its lines, or `error` (given, or the parser's, naming the line or JSON
// path).
report::RasReport RasReportOf(const std::string& source, std::string_view answer);
report::RasReport RasReportError(const std::string& source, const std::string& error);

// What the view says, one line each: unreachable processes, then each
// communicator RAS finds something wrong with, then RAS's own troubles.
std::vector<std::string> RasViewLines(const report::RasView& v);

// Puts `ras` into `d` with its comparison against d's verdict.
// `trace_comms`: the communicator hashes the traces hold (empty: unknown).
void AddRasEvidence(report::RasReport ras, const std::set<uint64_t>& trace_comms, report::Diagnosis* d);

// Launch counts that differ between ranks and stay the same from one RAS
// answer to the next: NCCL's RAS documentation's sign of a stuck
// communicator (counts that differ while ranks run merely outpace RAS).
// `watch` gives it every answer; Note() says, on the latest, for how long
// each such communicator's counts have not moved.
//
// Thread safety: one thread.
class RasLaunchTracker {
 public:
  // `now_sec`: the caller's monotonic clock when `view` was read.
  void Add(const report::RasView& view, double now_sec);
  // Appends to `ras` a line for each communicator whose differing counts
  // held over two answers or more.
  void Note(report::RasReport* ras) const;

 private:
  struct Since {
    double first_sec = 0, last_sec = 0;
    int answers = 0;
    std::string name;
  };
  std::map<std::string, Since> seen_;  // communicator and its counts -> since when
};

// "rank 2", "ranks 0,1,3", "ranks 0-63"; RAS's counted-but-unnamed ranks as
// "26 ranks", or "6 ranks (0,2-5,7)" when it named some.
std::string RasRanksText(const report::RasRanks& r);

}  // namespace ncclwatch::tools

#endif  // TOOLS_RAS_EVIDENCE_H_

// Text for diagnose's verdicts and evidence: durations, times, counts and
// lists of ranks, written the same way by every finder.
//
// Pure functions; any thread.

#ifndef TOOLS_DIAGNOSE_FORMAT_H_
#define TOOLS_DIAGNOSE_FORMAT_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "tools/model/model.h"

namespace ncclwatch::tools::diagnose_internal {

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// "850 ms", "8.5 s", "2.0 min".
std::string Dur(double sec);
// A time on the job's timeline: "12.34 s".
std::string At(double t);
// "1,234,567".
std::string Thousands(uint64_t n);
// "1 process", "3 processes".
std::string Plural(uint64_t n, const char* one, const char* many);
// "ranks 0,1,2", "rank 3", with runs folded ("ranks 0-63").
std::string RankList(const std::vector<std::string>& names);
// NCCL's proxy step state by number ("SendGPUWait", ...).
std::string StateName(uint32_t s);
// What a mask change took away that a verdict needs: "completions
// (KernelCh)", "collectives", "point-to-point operations", joined with
// ", " ("" when none; "everything (a damaged record)" when its values fail
// the model's checks).
std::string MaskChangeLoss(const MaskChange& c);
// The plugin's last write error (strerror's text) with what it means for
// the user: "No space left on device: the disk was full".
std::string WriteErrorMeaning(const std::string& error);

}  // namespace ncclwatch::tools::diagnose_internal

#endif  // TOOLS_DIAGNOSE_FORMAT_H_

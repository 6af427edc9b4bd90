// What one damaged byte in a real recording may do to diagnose's verdict,
// and the check of it that the damage fuzzer (damage_fuzzer.cc) and its
// regression test (damage_regression_test.cc) make: damage is never
// confident. The verdict on a recording with one byte changed is
//  - the verdict on the recording as it was, or
//  - one that says the evidence is incomplete ("INCOMPLETE ...": a file
//    damaged at an offset, a path that could not be read), or
//  - "UNUSABLE INPUT: ...", naming the file and the problem, or
//  - any verdict, where the byte changed a value into another that NCCL and
//    the plugin could have written (Plausible): no check can tell such a
//    file from a real one (a count of 1,048,577 for 1,048,576).
// Anything else is a verdict resting on a value the damage made up that a
// consistency check could have caught: a count of 0, a function that is not
// NCCL's, a rank beyond the communicator, a time far outside its write.
//
// Thread safety: pure functions of their arguments.
#ifndef TOOLS_FUZZ_DAMAGE_H_
#define TOOLS_FUZZ_DAMAGE_H_

#include <stdint.h>

#include <string>
#include <utility>
#include <vector>

namespace ncclwatch::fuzz {

// {name, bytes} of each trace file of one job.
using Files = std::vector<std::pair<std::string, std::string>>;

// Diagnose's verdict line on `files`, loaded as LoadModelFromBytes loads
// them: Diagnosis.verdict, or "UNUSABLE INPUT: why" when they cannot be loaded.
std::string VerdictOf(const Files& files);

// Whether `damaged`, the verdict on a recording with one byte changed, is
// one that says so, or the verdict `intact` on the recording as it was.
bool DamageShows(const std::string& intact, const std::string& damaged);

// Whether `damaged` (one file's bytes with one byte changed from `intact`)
// reads as the same records as `intact` but for values that a real file
// could hold: a nonzero count, a root or peer within its communicator, a
// datatype naming another of NCCL's datatypes, a time moved by less than
// the model's slack (1 s within a write, 2 s for a header's clock bases),
// another host name.
// `why` gets the field(s) changed, for messages.
bool Plausible(const std::string& intact, const std::string& damaged, std::string* why);

// `files` with the byte at `offset` of file `file` replaced by `value`.
Files WithByte(const Files& files, size_t file, size_t offset, uint8_t value);

// Empty when the verdict on `files` with byte `offset` of file `file` set
// to `value` passes the check above; else a line saying what failed.
std::string CheckOneByte(const Files& files, const std::string& intact_verdict, size_t file, size_t offset,
                         uint8_t value);

}  // namespace ncclwatch::fuzz

#endif  // TOOLS_FUZZ_DAMAGE_H_

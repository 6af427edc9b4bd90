// libFuzzer target: damage is never confident (damage.h). The input picks
// one of the real recordings built in (recordings.h: byte 0), a byte of it
// (bytes 1 to 4, little-endian, modulo its size) and that byte's new value
// (byte 5); diagnose's verdict on the recording so damaged must be its
// verdict as recorded, or say the evidence is incomplete or unusable, or
// the byte must have made a value a real file could hold (Plausible).
// Anything else aborts with the verdict and the byte: a class of damage
// the model's consistency checks (tools/model/model.cc) do not catch.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "tools/fuzz/damage.h"
#include "tools/fuzz/recordings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ncclwatch::fuzz;
  // Invalid UTF-8 in string fields is logged by libprotobuf on every parse.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  static const std::vector<std::string> intact = [] {
    std::vector<std::string> v;
    for (const Recording& r : Recordings()) v.push_back(VerdictOf(r.files));
    return v;
  }();
  if (size < 6 || Recordings().empty()) return 0;
  const size_t which = data[0] % Recordings().size();
  const Recording& rec = Recordings()[which];
  size_t total = 0;
  for (const auto& f : rec.files) total += f.second.size();
  if (total == 0) return 0;
  size_t at = (data[1] | data[2] << 8 | data[3] << 16 | static_cast<size_t>(data[4]) << 24) % total;
  size_t file = 0;
  while (at >= rec.files[file].second.size()) at -= rec.files[file++].second.size();
  const std::string failure = CheckOneByte(rec.files, intact[which], file, at, data[5]);
  if (!failure.empty()) {
    fprintf(stderr, "confident on damage: %s/%s\nintact: %s\n", rec.name.c_str(), failure.c_str(),
            intact[which].c_str());
    abort();
  }
  return 0;
}

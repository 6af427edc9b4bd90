// When a rank that arrives last is late, and when a late rank is a
// straggler: what the arrival counts (counts.h), a node summary's arrival
// digests (digest.h) and diagnose's STRAGGLER finding read alike.

#ifndef TOOLS_ARRIVALS_OPTIONS_H_
#define TOOLS_ARRIVALS_OPTIONS_H_

namespace ncclwatch::tools {

struct StragglerOptions {
  // A rank is "late" at a collective when it arrives last, later than the
  // median arrival by more than straggler_threshold_ms and by more than
  // straggler_duration_fraction of the collective's median duration. It is
  // a straggler when late at >= straggler_min_fraction of at least
  // straggler_min_collectives completed collectives.
  double straggler_threshold_ms = 1.0;
  double straggler_duration_fraction = 0.2;
  double straggler_min_fraction = 0.5;
  int straggler_min_collectives = 3;
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_ARRIVALS_OPTIONS_H_

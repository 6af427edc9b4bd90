// Arrival digests: what a per-node summary keeps for the straggler finder
// where its node holds every rank of a communicator, so that diagnose of
// the summaries judges arrivals over every collective, not the windows.
//
// Thread safety: functions of their const arguments.

#ifndef TOOLS_ARRIVALS_DIGEST_H_
#define TOOLS_ARRIVALS_DIGEST_H_

#include <vector>

#include "tools/arrivals/options.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

// What a per-node summary keeps for the straggler finder (model.h
// ArrivalDigest), per process of `m` (a node's model, matched and aligned):
// valid for a process whose every communicator has all its ranks in `m`.
std::vector<ArrivalDigest> DigestArrivals(const Model& m, const StragglerOptions& opts = {});
// Whether the straggler finder judges every process of `m` over all its
// collectives: each a summary's with a valid ArrivalDigest made with the
// thresholds `opts` gives on `m`, one whose every communicator's arrivals
// the summaries sampled across the job (Model::sampled, at least
// kMinSampledCollectives of its collectives), or one whose operations are
// all in `m`. With completions from CUDA events, the digest or samples must
// carry the kernels' GPU-held times as well (ArrivalDigest::gpu_held,
// Proc::samples_held).
bool ArrivalsWhole(const Model& m, const StragglerOptions& opts = {});

}  // namespace ncclwatch::tools

#endif  // TOOLS_ARRIVALS_DIGEST_H_

// How long each operation's kernel waited on its GPU behind work that is not
// NCCL's, from completions taken from CUDA events.
//
// Why: in a job that is slow but not hung, a rank whose GPU is busy with
// other work (a kernel on the default stream that PyTorch orders its NCCL
// stream after) makes every rank wait, though its host enqueues in time: no
// host-side arrival shows it. The plugin's writer records when it saw the
// stream reach each kernel (Op::polled_held_ns); an operation's kernel was
// held from when it was both enqueued and past every earlier operation of
// its process, to then. Waiting for the process's own previous operation,
// which its peers were in as well, never counts, and counting earlier
// operations on other streams can only make it shorter: a rank is never
// named for it.
//
// Each value is known to a polling interval (~10 ms, kGpuHeldResolutionNs).
// Used by stats (RankRow.gpu_lateness) and diagnose (STRAGGLER on the GPU).

#ifndef TOOLS_MODEL_GPU_HELD_H_
#define TOOLS_MODEL_GPU_HELD_H_

#include <stdint.h>

#include <vector>

#include "tools/model/model.h"

namespace ncclwatch::tools {

// The writer's polling interval, which bounds what a held time can tell.
inline constexpr int64_t kGpuHeldResolutionNs = 10'000'000;

// Per Model::ops index: ns the kernel waited behind other GPU work, or
// kNoTime where not known (not a polled completion, not completed, or an
// earlier operation of its process never completed).
std::vector<int64_t> GpuHeldNs(const Model& m);

// Whether `p`'s completions come from CUDA events (its header says so, or
// some operation's completion was polled): only those show a held kernel.
bool ShowsGpuHeld(const Model& m, const Proc& p);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_GPU_HELD_H_

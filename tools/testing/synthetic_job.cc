#include "tools/testing/synthetic_job.h"

#include <sys/stat.h>

#include <algorithm>

#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools::testing {

bool WriteSyntheticJob(const std::string& dir, const SyntheticJob& job, std::vector<std::string>* hosts,
                       std::string* error) {
  mkdir(dir.c_str(), 0755);
  const char* funcs[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};
  const uint64_t step = 3 * kMs;
  const int end = job.end_node < 0 ? job.ranks : std::min(job.ranks, job.end_node * 8);
  for (int r = std::max(0, job.first_node * 8); r < end; ++r) {
    ProcSpec spec;
    spec.host = "node" + std::to_string(r / 8);
    spec.pid = 10000 + r;
    spec.launcher_rank = r;
    spec.launcher_world_size = job.ranks;
    spec.job_id = job.job_id;
    if (job.benchmark_shape) spec.realtime_base_ns += static_cast<uint64_t>((r / 8) % 7) * 700 * kUs;
    TraceBuilder b(spec);
    const int world = b.AddComm(0x5000, "world", job.ranks, r, 1 * kMs);
    const int pair = b.AddComm(0x7000 + static_cast<uint64_t>(r / 2), "tp", 2, r % 2, 2 * kMs);
    uint64_t seq_world[4] = {0, 0, 0, 0}, seq_pair[4] = {0, 0, 0, 0};
    const uint64_t t0 = 10 * kMs;
    for (int k = 0; k < job.colls; ++k) {
      const int f = k % 4;
      const uint64_t late = r == 7 ? 2 * kMs : 0;
      const uint64_t start =
          t0 + static_cast<uint64_t>(k) * step + static_cast<uint64_t>((r * 37 + k * 11) % 50) * kUs + late;
      int64_t done = static_cast<int64_t>(t0 + static_cast<uint64_t>(k) * step + 2500 * kUs);
      // The hang: the last rank never issues the last collective, which
      // every other rank waits in until the end.
      if (k == job.colls - 1) {
        if (r == job.ranks - 1) continue;
        done = kNever;
      }
      OpOpts o;
      if (job.benchmark_shape) o.nchannels = 8;
      o.completion = Completion::kFolded;
      if (job.events) {
        o.from_event = true;
        o.event_started_ns = static_cast<int64_t>(start + 5 * kUs);
      }
      uint64_t count = uint64_t{1} << (10 + k % 12);
      if (r == 5 && k == 10) count *= 2;
      if (job.p2p && k % 7 == 3) {
        b.Send(pair, 1 - r % 2, 256, start, done, o);
        b.Recv(pair, 1 - r % 2, 256, start + 10 * kUs, done, o);
        continue;
      }
      if (k % 5 == 4) b.Coll(pair, funcs[f], seq_pair[f]++, count, start, done, o);
      else b.Coll(world, funcs[f], seq_world[f]++, count, start, done, o);
    }
    b.Heartbeats(0, t0 + static_cast<uint64_t>(job.colls) * step + 10 * kSec);
    const std::string node = dir + "/node" + std::to_string(r / 8);
    if (r % 8 == 0) {
      mkdir(node.c_str(), 0755);
      if (hosts != nullptr) hosts->push_back(node);
    }
    if (!b.WriteTo(node + "/" + b.FileName())) {
      *error = "cannot write " + node + "/" + b.FileName();
      return false;
    }
  }
  return true;
}

}  // namespace ncclwatch::tools::testing

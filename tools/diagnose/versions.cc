#include "tools/diagnose/versions.h"

#include <stdio.h>

#include <functional>
#include <map>

#include "tools/diagnose/format.h"
#include "tools/model/semantics.h"

namespace ncclwatch::tools {
using diagnose_internal::Plural;

namespace {

// One known limit or fault: the processes it applies to, and what it means
// for the verdict, said once for all of them.
struct Caveat {
  std::function<bool(const Proc&, int code)> applies;
  std::function<std::string(const Proc& first, int code)> text;
};

std::string Dotted(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

bool AskedKernelChannels(const Proc& p) {
  if (p.event_mask & kMaskKernelCh) return true;
  for (const MaskChange& mc : p.mask_changes)
    if (mc.new_mask & kMaskKernelCh) return true;
  return false;
}

const std::vector<Caveat>& Caveats() {
  static const std::vector<Caveat> rows = {
      // 2.29 and later run ncclBroadcast as an AllGatherV that emits no
      // Coll event (read in their src/enqueue.cc; docs/nccl_call_order.md).
      {[](const Proc&, int code) { return code >= 22900; },
       [](const Proc&, int) {
         return std::string(
             "NCCL 2.29 and later record no Broadcast (run as AllGatherV without Coll events): a hang inside a "
             "Broadcast is not seen");
       }},
      // 2.31.x stamps phases and fences in every kernel of an operation
      // whose channels are profiled (NVIDIA/nccl#2355); 2.32.3's regular
      // kernels record only the channel's start and stop.
      {[](const Proc& p, int code) { return code >= 23100 && code < 23200 && AskedKernelChannels(p); },
       [](const Proc&, int) {
         return std::string(
             "NCCL 2.31 with kernel channels on: every kernel of a profiled operation stamps phase times and "
             "fences (NVIDIA/nccl#2355, up to 10% slower at 1 MiB): latencies are those of a slowed job; the "
             "default capture (CUDA events) does not ask for them");
       }},
      // Without kernel channels, NCCL reports a captured operation once, at
      // capture; a replay with no proxy work reports nothing
      // (NVIDIA/nccl#1805, read in enqueue.cc of 2.26 to 2.31).
      {[](const Proc& p, int) { return !p.graph_like_ops.empty() && !AskedKernelChannels(p); },
       [](const Proc&, int) {
         return std::string(
             "operations captured into CUDA graphs: NCCL reports them at capture, and a replay without network "
             "work reports nothing (NVIDIA/nccl#1805): a hang inside a replay is not seen; under "
             "NCCLWATCH_COMPLETIONS=channels NCCL numbers each replay it reports apart, with its kernels' end");
       }},
      // Releases read but never run under the plugin.
      {[](const Proc&, int code) { return code >= 23100 && code / 100 <= kNewestNcclRead / 100; },
       [](const Proc& p, int) {
         return "NCCL " + p.nccl_version +
                ": how it calls the plugin was read from its source, not yet seen on a GPU "
                "(docs/nccl-versions.md)";
       }},
      {[](const Proc&, int code) { return code / 100 > kNewestNcclRead / 100; },
       [](const Proc& p, int) {
         return "NCCL " + p.nccl_version + " is newer than any release ncclwatch was checked against (" +
                Dotted(kNewestNcclRead) + "): events it added or changed are not read";
       }},
  };
  return rows;
}

}  // namespace

int NcclVersionCode(const std::string& version) {
  int major = 0, minor = 0, patch = 0;
  const int n = sscanf(version.c_str(), "%d.%d.%d", &major, &minor, &patch);
  if (n < 2 || major < 0 || minor < 0 || minor > 99 || patch < 0 || patch > 99 || major > 99) return 0;
  return major * 10000 + minor * 100 + (n == 3 ? patch : 0);
}

std::vector<std::string> VersionLines(const Model& model) {
  std::vector<std::string> out;
  // One line per combination (a mixed job is worth seeing).
  std::map<std::string, size_t> versions;
  for (const Proc& p : model.procs) {
    std::string v = "NCCL " + (p.nccl_version.empty() ? std::string("version not recorded") : p.nccl_version);
    v += ", CUDA driver ";
    v += p.cuda_driver_version > 0 ? std::to_string(p.cuda_driver_version / 1000) + "." +
                                         std::to_string(p.cuda_driver_version % 1000 / 10)
                                   : std::string("not recorded");
    ++versions[v];
  }
  for (const auto& [v, n] : versions) out.push_back(v + ": " + Plural(n, "process", "processes"));
  // Each caveat once per text (a mixed job may give two texts of one row).
  for (const Caveat& c : Caveats()) {
    std::map<std::string, size_t> texts;
    std::vector<std::string> order;
    for (const Proc& p : model.procs) {
      const int code = NcclVersionCode(p.nccl_version);
      if (!c.applies(p, code)) continue;
      const std::string t = c.text(p, code);
      if (texts[t]++ == 0) order.push_back(t);
    }
    for (const std::string& t : order) out.push_back(t + " (" + Plural(texts[t], "process", "processes") + ")");
  }
  return out;
}

}  // namespace ncclwatch::tools

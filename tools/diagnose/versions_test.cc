// Each row of docs/nccl-versions.md, "What diagnose says per release": the
// line is there for the releases and captures it names, and not for others.
#include "tools/diagnose/versions.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/model/semantics.h"

namespace ncclwatch::tools {
namespace {

Proc P(const std::string& nccl, uint64_t mask = kMaskColl | kMaskP2p | kMaskKernelLaunch) {
  Proc p;
  p.nccl_version = nccl;
  p.event_mask = mask;
  p.cuda_driver_version = 13000;
  return p;
}

std::vector<std::string> Lines(std::vector<Proc> procs) {
  Model m;
  m.procs = std::move(procs);
  return VersionLines(m);
}

// The one line starting with `prefix`; "" when none, and a failure when
// more than one.
std::string Line(const std::vector<std::string>& lines, const std::string& prefix) {
  std::string found;
  for (const std::string& l : lines)
    if (l.rfind(prefix, 0) == 0) {
      EXPECT_EQ(found, "") << "twice: " << prefix;
      found = l;
    }
  return found;
}

TEST(NcclVersionCode, ReadsWhatTheHeaderHolds) {
  EXPECT_EQ(NcclVersionCode("2.29.7"), 22907);
  EXPECT_EQ(NcclVersionCode("2.32"), 23200);
  EXPECT_EQ(NcclVersionCode("2.28.9+cuda13.0"), 22809);
  EXPECT_EQ(NcclVersionCode(""), 0);
  EXPECT_EQ(NcclVersionCode("v2.28"), 0);
  EXPECT_EQ(NcclVersionCode("2.1000.1"), 0);
}

TEST(Versions, OneLinePerNcclAndDriver) {
  const auto lines = Lines({P("2.28.9"), P("2.28.9"), P("2.27.7"), P("")});
  EXPECT_EQ(Line(lines, "NCCL 2.28.9, CUDA driver 13.0:"), "NCCL 2.28.9, CUDA driver 13.0: 2 processes");
  EXPECT_EQ(Line(lines, "NCCL 2.27.7, CUDA driver 13.0:"), "NCCL 2.27.7, CUDA driver 13.0: 1 process");
  EXPECT_EQ(Line(lines, "NCCL version not recorded"), "NCCL version not recorded, CUDA driver 13.0: 1 process");
}

TEST(Versions, BroadcastIsUnseenFrom229) {
  const std::string row = "NCCL 2.29 and later record no Broadcast";
  EXPECT_EQ(Line(Lines({P("2.28.9"), P("2.27.7")}), row), "");
  const std::string l = Line(Lines({P("2.28.9"), P("2.29.2"), P("2.30.7")}), row);
  EXPECT_NE(l.find("a hang inside a Broadcast is not seen (2 processes)"), std::string::npos) << l;
}

TEST(Versions, KernelChannelsOn231SlowTheJob) {
  const std::string row = "NCCL 2.31 with kernel channels on";
  EXPECT_EQ(Line(Lines({P("2.31.2")}), row), "");  // the default capture
  EXPECT_NE(Line(Lines({P("2.31.2", kMaskColl | kMaskKernelCh)}), row), "");
  EXPECT_EQ(Line(Lines({P("2.30.7", kMaskColl | kMaskKernelCh)}), row), "");
  EXPECT_EQ(Line(Lines({P("2.32.3", kMaskColl | kMaskKernelCh)}), row), "");  // fixed in 2.32
  // Turned on later by RAS: the same.
  Proc ras = P("2.31.2");
  MaskChange mc;
  mc.old_mask = ras.event_mask;
  mc.new_mask = ras.event_mask | kMaskKernelCh;
  ras.mask_changes.push_back(mc);
  EXPECT_NE(Line(Lines({ras}), row), "");
}

TEST(Versions, GraphReplaysWithoutChannelsAreUnseen) {
  const std::string row = "operations captured into CUDA graphs";
  Proc g = P("2.28.9");
  EXPECT_EQ(Line(Lines({g}), row), "");
  g.graph_like_ops = {0};
  EXPECT_NE(Line(Lines({g, P("2.28.9")}), row).find("(1 process)"), std::string::npos);
  g.event_mask |= kMaskKernelCh;  // channels put a host callback in the graph: replays report
  EXPECT_EQ(Line(Lines({g}), row), "");
}

TEST(Versions, ReleasesReadButNotRunSaySo) {
  const auto read = Lines({P("2.31.2"), P("2.32.3")});
  EXPECT_NE(Line(read, "NCCL 2.31.2: how it calls the plugin was read from its source"), "");
  EXPECT_NE(Line(read, "NCCL 2.32.3: how it calls the plugin was read from its source"), "");
  EXPECT_EQ(Line(Lines({P("2.30.7")}), "NCCL 2.30.7: how it calls"), "");
  const auto newer = Lines({P("2.33.1")});
  EXPECT_EQ(Line(newer, "NCCL 2.33.1 is newer"),
            "NCCL 2.33.1 is newer than any release ncclwatch was checked against (2.32.3): events it added or "
            "changed are not read (1 process)");
  EXPECT_EQ(Line(Lines({P("2.32.7")}), "NCCL 2.32.7 is newer"), "");  // a patch of a release read
}

}  // namespace
}  // namespace ncclwatch::tools

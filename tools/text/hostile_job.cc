// Writes a job whose every string is hostile, for safe_output_test.sh:
// the traced program chooses communicator names, host names, argv, job ids
// and Flight Recorder's process group names and Python frames, and the
// commands must show them without letting them steer a terminal or break
// JUnit XML, OpenMetrics or JSON.
//
// Usage: hostile_job DIR
// Writes DIR/traces/: four ranks on two hosts, trace files named with
// control bytes, a hang (rank 3 skips an AllReduce on the first
// communicator, so the others wait for it past the stuck threshold) and a
// Flight Recorder dump per rank whose process group and frames join that
// communicator. The strings hold every C0 control, DEL, every C1 control
// (as UTF-8), invalid UTF-8, U+FFFE and U+FFFF, markup of every output
// format, a line that pretends to be a verdict, an empty name and names of
// a megabyte.

#include <stdio.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "tools/testing/trace_builder.h"

namespace ncclwatch::tools::testing {
namespace {

// Every hostile piece once: C0 (NUL included), DEL, C1 as UTF-8, invalid
// UTF-8 (a stray continuation, an overlong form, a cut sequence, a
// surrogate, past U+10FFFF, bytes never in UTF-8), non-characters, then
// each output format's markup and a fake verdict line.
std::string Hostile(const std::string& tag) {
  std::string s = tag;
  for (int c = 0; c < 0x20; ++c) s += static_cast<char>(c);
  s += '\x7f';
  for (int c = 0x80; c < 0xa0; ++c) s += std::string("\xc2") + static_cast<char>(c);
  s += "\x80|\xc0\xaf|\xe2\x82|\xed\xa0\x80|\xf4\x90\x80\x80|\xfe\xff|";
  s += "\xef\xbf\xbe\xef\xbf\xbf";
  s += "<a href=\"x\">]]>&amp;'\\\"}{\\u0000";
  s += "\n\rOK: the job finished; every rank healthy\x1b[2K\x1b]0;title\x07";
  return s;
}

std::string Mega(const std::string& tag) { return tag + std::string(1 << 20, 'M') + Hostile("-tail"); }

// Pickle opcodes, as pickle.dumps writes them for these values.
std::string PStr(const std::string& v) {
  std::string s = "X";
  const uint32_t n = static_cast<uint32_t>(v.size());
  for (int i = 0; i < 4; ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
  return s + v;
}
std::string PInt(int v) { return std::string("K") + static_cast<char>(v); }

// One rank's Flight Recorder dump: group "0" (all ranks) and its
// AllReduces with their frames, the last one still scheduled.
std::string FrDump(int rank, int collectives) {
  const std::string desc = rank == 0 ? Mega("pg") : Hostile("pg");
  std::string s = "\x80\x02}(" + PStr("version") + PStr("2.10") + PStr("comm_lib_version") + PStr(Hostile("nccl")) +
                  PStr("pg_config") + "}(" + PStr("0") + "}(" + PStr("desc") + PStr(desc) + PStr("ranks") + "](" +
                  PInt(0) + PInt(1) + PInt(2) + PInt(3) + "euu" + PStr("entries") + "](";
  for (int k = 1; k <= collectives; ++k) {
    s += "}(" + PStr("process_group") + "(" + PStr("0") + PStr(desc) + "t" + PStr("collective_seq_id") + PInt(k) +
         PStr("profiling_name") + PStr(k == collectives ? "nccl:all_reduce" : "nccl:all_reduce") + PStr("state") +
         PStr(k == collectives ? Hostile("scheduled") : "completed") + PStr("frames") + "](" + "}(" +
         PStr("filename") + PStr(rank == 1 ? Mega("/f") : Hostile("/file")) + PStr("line") + PInt(7) +
         PStr("name") + PStr(Hostile("fn")) + "u" + "eu";
  }
  return s + "eu.";
}

bool WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  return static_cast<bool>(f.flush());
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: hostile_job DIR\n");
    return 2;
  }
  const std::string dir = std::string(argv[1]) + "/traces";
  mkdir(argv[1], 0755);
  if (mkdir(dir.c_str(), 0755) != 0) {
    perror(dir.c_str());
    return 1;
  }
  JobSpec spec;
  spec.nranks = 4;
  spec.ranks_per_host = 2;
  spec.comms = {{Hostile("world"), 0x1111, {}}, {Mega("big"), 0x2222, {}}, {"", 0x3333, {}}};
  constexpr int kWorldOps = 6;
  for (int k = 0; k < 12; ++k) {
    JobOp op;
    op.comm = k < kWorldOps ? 0 : k % 2 + 1;
    op.start_ns = 3 * kSec + k * 10 * kMs;
    op.opts.datatype = k % 3 == 0 ? Hostile("dt") : k % 3 == 1 ? Mega("dt") : "ncclFloat32";
    op.opts.algo = Hostile("algo");
    op.opts.proto = Hostile("proto");
    spec.ops.push_back(op);
  }
  spec.rank_hook = [](int rank, RankPlan& r) {
    r.proc.host = rank < 2 ? Hostile("node0") : Mega("node1");
    r.proc.argv = {Hostile("python"), rank == 1 ? Mega("argv") : Hostile("train.py")};
    r.proc.job_id = Hostile("job");
    r.proc.launcher_rank_source = Hostile("RANK");
    r.proc.plugin_version = Hostile("0.1");
    r.proc.nccl_version = Hostile("2.28");
    r.proc.events_config = Hostile("cfg");
  };
  // Rank 3 skips the world's fifth AllReduce: the others wait in it.
  spec.op_hook = [](int rank, int op_index, OpPlan& p) {
    if (rank == 3 && op_index == 4) p.skip = true;
  };
  JobPlan plan;
  std::vector<TraceBuilder> files = BuildJob(spec, &plan);
  DropCounts drops;
  drops.write_failed = 1;
  drops.last_write_error = Hostile("ENOSPC");
  files[0].Drops(plan.Local(0, 3 * kSec + 55 * kMs), drops);
  for (size_t r = 0; r < files.size(); ++r) {
    // The plugin names files after the host; a host name may hold anything
    // but '/'.
    const std::string name = dir + "/rank" + std::to_string(r) + "\x1b[31m\x07\xff\n.ncclwatch";
    if (!files[r].WriteTo(name)) {
      perror(name.c_str());
      return 1;
    }
  }
  for (int r = 0; r < 4; ++r) {
    int collectives = 0;
    for (const OpPlan& p : plan.ops[r])
      if (p.comm == 0 && p.issued) ++collectives;
    if (!WriteFile(dir + "/nccl_trace_rank_" + std::to_string(r), FrDump(r, collectives))) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ncclwatch::tools::testing

int main(int argc, char** argv) { return ncclwatch::tools::testing::Main(argc, argv); }

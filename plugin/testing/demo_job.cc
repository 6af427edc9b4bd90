// A small "training job" on the fake NCCL host: the README's first command
// runs it and then prints what the plugin recorded (ncclwatch dump).
//
// One process, profiler API v5, two communicators. A few steps of
// all_reduce / all_gather / send+recv complete normally; then an all_reduce
// hangs (one kernel channel never stops, its proxy operations stall mid-step),
// so the plugin writes a stuck report after NCCLWATCH_STUCK_SEC (set to 1 s
// here) before the job "gives up" and finalizes.
//
// Usage: demo_job [OUTDIR]
//   OUTDIR: where the trace goes; without it, $NCCLWATCH_DIR, as a job script
//     sets it (examples/).
//   NCCL_PROFILER_PLUGIN, read as NCCL reads it: the plugin to load, a path
//     or a name N (libnccl-profiler-N.so, found on LD_LIBRARY_PATH); without
//     it, the .so built beside this program.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "plugin/testing/fake_nccl_host.h"

using ncclwatch::testing::FakeComm;
using ncclwatch::testing::OpSpec;
using ncclwatch::testing::PluginLib;

int main(int argc, char** argv) {
  const char* env_dir = getenv("NCCLWATCH_DIR");
  if (argc > 2 || (argc == 1 && (env_dir == nullptr || *env_dir == '\0'))) {
    fprintf(stderr, "usage: demo_job OUTDIR (or NCCLWATCH_DIR set)\n");
    return 2;
  }
  const std::string out = argc == 2 ? argv[1] : env_dir;
  setenv("NCCLWATCH_DIR", out.c_str(), 1);
  setenv("NCCLWATCH_STUCK_SEC", "1", 1);
  setenv("NCCLWATCH_FLUSH_MS", "50", 1);
  PluginLib* lib;
  if (const char* p = getenv("NCCL_PROFILER_PLUGIN"); p != nullptr && *p != '\0') {
    const std::string path = strchr(p, '/') != nullptr ? p : "libnccl-profiler-" + std::string(p) + ".so";
    lib = PluginLib::Load(path);
    if (lib->handle() == nullptr) {
      fprintf(stderr, "demo_job: cannot load NCCL_PROFILER_PLUGIN=%s\n", p);
      return 1;
    }
    printf("demo_job: NCCL_PROFILER_PLUGIN=%s\n", p);
  } else {
    lib = PluginLib::Shared();
  }
  FakeComm world(lib, 5), tp(lib, 5);
  if (world.Init(0x5eed0001, "world", 1, 4, 2) != 0 || tp.Init(0x5eed0002, "tp", 1, 2, 0) != 0) {
    fprintf(stderr, "demo_job: the plugin refused to start\n");
    return 1;
  }
  // NCCL numbers each communicator's collectives of one function from 0.
  uint64_t seq_world = 0, seq_tp = 0;
  for (int step = 0; step < 3; ++step) {
    OpSpec ar;
    ar.seq = seq_world++;
    ar.count = 1u << (20 + step);
    world.RunOp(ar);
    OpSpec ag;
    ag.seq = seq_tp++;
    ag.func = "AllGather";
    ag.datatype = "ncclBfloat16";
    ag.count = 1u << 18;
    tp.RunOp(ag);
    OpSpec send;
    send.p2p = true;
    send.func = "Send";
    send.peer = 3;
    send.proxy_peers = {3};
    world.RunOp(send);
    OpSpec recv = send;
    recv.func = "Recv";
    recv.peer = 1;
    recv.proxy_peers = {1};
    world.RunOp(recv);
  }
  // The hang: channel 1 of this all_reduce never finishes and the proxy
  // operations stop mid-transfer.
  OpSpec stuck;
  stuck.seq = seq_world++;
  stuck.count = 1u << 24;
  stuck.kernel_stop = 1;
  stuck.stop_proxies = false;
  stuck.proxy_peers = {1, 3};
  stuck.nsteps = 8;
  world.RunOp(stuck);
  printf("demo_job: waiting 1.5 s with an all_reduce stuck in flight...\n");
  fflush(stdout);
  usleep(1500000);
  tp.Finalize();
  world.Finalize();
  printf("demo_job: done; trace files are in %s\n", out.c_str());
  return 0;
}

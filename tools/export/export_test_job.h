// A job built by hand for the export tests: two ranks on two hosts, one
// communicator, operations added one by one with times in ns after kT0.

#ifndef TOOLS_EXPORT_EXPORT_TEST_JOB_H_
#define TOOLS_EXPORT_EXPORT_TEST_JOB_H_

#include <string>
#include <vector>

#include "tools/model/model.h"

namespace ncclwatch::tools {

inline constexpr int64_t kT0 = 1'700'000'000'000'000'000;  // aligned ns (CLOCK_REALTIME-like)

// `nranks` ranks (two by default), each on a host of its own, one communicator.
struct Job {
  Model m;

  explicit Job(const std::string& comm_name, int nranks = 2) {
    for (int r = 0; r < nranks; ++r) {
      Proc p;
      p.host = "node" + std::to_string(r);
      p.pid = 4000 + r;
      p.launcher_rank = r;
      p.first_ns = kT0;
      p.last_ns = kT0 + 10'000'000;  // 10 ms
      m.procs.push_back(p);
    }
    Comm c;
    c.hash = 0xabcdef;
    c.name = comm_name;
    c.nranks = nranks;
    for (int r = 0; r < nranks; ++r) {
      c.members.push_back({static_cast<uint32_t>(r), r, kT0, kNoTime});
      c.proc_of_rank.push_back(static_cast<uint32_t>(r));
    }
    m.comms.push_back(c);
    m.alignment_method = "2 hosts: header clock pairs";
  }

  Op& Add(int r, const std::string& func, uint64_t seq, int64_t start, int64_t done, int64_t gpu_start = 0,
          uint32_t gpu_dur = 0) {
    Op o;
    o.proc = static_cast<uint32_t>(r);
    o.comm = 0;
    o.rank = r;
    o.kind = (func == "Send" || func == "Recv") ? OpKind::kP2p : OpKind::kColl;
    m.SetFunc(&o, func);
    o.datatype = m.Intern("ncclFloat32");
    o.algo = m.Intern("Ring");
    o.proto = m.Intern("Simple");
    o.nchannels = 2;
    o.seq = seq;
    o.count = 1024;
    o.start_ns = kT0 + start;
    o.enqueue_ns = 3000;
    if (done >= 0) {
      o.state = OpState::kCompleted;
      o.done_ns = kT0 + done;
    } else {
      o.state = done == -1 ? OpState::kInFlight : OpState::kUntracked;
    }
    if (gpu_dur > 0) {
      o.has_gpu = true;
      o.gpu_start_ns = kT0 + gpu_start;
      o.gpu_duration_ns = gpu_dur;
    }
    m.procs[static_cast<size_t>(r)].ops.push_back(static_cast<uint32_t>(m.ops.size()));
    m.ops.push_back(o);
    return m.ops.back();
  }

  // Links ops `ops` as one matched collective (its seq from the first).
  void Link(const std::vector<uint32_t>& ops) {
    Match mt;
    mt.comm = 0;
    mt.seq = m.ops[ops[0]].seq;
    mt.ops = ops;
    for (uint32_t oi : ops) m.ops[oi].match = static_cast<uint32_t>(m.matches.size());
    m.matches.push_back(mt);
  }
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_EXPORT_EXPORT_TEST_JOB_H_

// What the diagnose tests build their jobs with: a Model made by hand
// (processes, communicators, operations, matched as MatchOps would), and
// the helpers that read a Diagnosis back.

#ifndef TOOLS_DIAGNOSE_TEST_JOB_H_
#define TOOLS_DIAGNOSE_TEST_JOB_H_

#include <stdint.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "proto/report.pb.h"
#include "tools/model/model.h"

namespace ncclwatch::tools::diagnose_testing {

inline constexpr int64_t kSec = 1000000000;
inline int64_t Ns(double sec) { return static_cast<int64_t>(sec * 1e9); }

// Builds a Model by hand: processes, communicators, operations; Finish()
// orders each process's ops and matches them (as MatchOps would).
struct Job {
  Model m;

  uint32_t Proc(int rank, double last_sec, const std::string& host = "node0") {
    tools::Proc p;
    p.path = "/traces/" + host + "-" + std::to_string(1000 + rank) + ".ncclwatch";
    p.host = host;
    p.pid = 1000 + rank;
    p.launcher_rank = rank;
    p.launcher_world_size = -1;
    p.api_version = 5;
    p.heartbeat_ms = 1000;
    p.stuck_sec = 60;
    p.first_ns = 0;
    p.last_ns = Ns(last_sec);
    p.last_heartbeat_ns = Ns(last_sec);
    p.heartbeats = static_cast<uint32_t>(last_sec);
    m.procs.push_back(p);
    return static_cast<uint32_t>(m.procs.size() - 1);
  }
  // Processes 0..n-1 alive until `last_sec`.
  void Procs(int n, double last_sec) {
    for (int i = 0; i < n; ++i) Proc(i, last_sec);
  }
  // A communicator whose rank r is process procs[r].
  uint32_t Comm(const std::string& name, uint64_t hash, const std::vector<uint32_t>& procs) {
    tools::Comm c;
    c.hash = hash;
    c.name = name;
    c.nranks = static_cast<int32_t>(procs.size());
    for (size_t r = 0; r < procs.size(); ++r) {
      CommMember mem;
      mem.proc = procs[r];
      mem.rank = static_cast<int32_t>(r);
      mem.init_ns = 0;
      c.members.push_back(mem);
      c.proc_of_rank.push_back(procs[r]);
    }
    m.comms.push_back(c);
    return static_cast<uint32_t>(m.comms.size() - 1);
  }
  int32_t RankOf(uint32_t proc, uint32_t comm) {
    for (const CommMember& mem : m.comms[comm].members)
      if (mem.proc == proc) return mem.rank;
    return -1;
  }
  // done_sec < 0: in flight.
  uint32_t Coll(uint32_t proc, uint32_t comm, uint64_t seq, const std::string& func, uint64_t count, double start_sec,
                double done_sec, const std::string& dtype = "ncclFloat32", int32_t root = 0) {
    Op op;
    op.proc = proc;
    op.comm = comm;
    op.rank = RankOf(proc, comm);
    op.kind = OpKind::kColl;
    m.SetFunc(&op, func);
    op.datatype = m.Intern(dtype);
    op.count = count;
    op.seq = seq;
    op.peer_or_root = root;
    op.nchannels = 2;
    op.start_ns = Ns(start_sec);
    if (done_sec >= 0) {
      op.state = OpState::kCompleted;
      op.done_ns = Ns(done_sec);
    } else {
      op.state = OpState::kInFlight;
    }
    m.ops.push_back(op);
    m.procs[proc].ops.push_back(static_cast<uint32_t>(m.ops.size() - 1));
    return static_cast<uint32_t>(m.ops.size() - 1);
  }
  uint32_t P2p(uint32_t proc, uint32_t comm, const std::string& func, int32_t peer, uint64_t seq, uint64_t count,
               double start_sec, double done_sec, const std::string& dtype = "ncclFloat32") {
    uint32_t oi = Coll(proc, comm, seq, func, count, start_sec, done_sec, dtype, peer);
    m.ops[oi].kind = OpKind::kP2p;
    return oi;
  }
  // Collectives #1..#n on every rank of `comm`, 0.1 s apart, each 10 ms long.
  void Steps(uint32_t comm, int n, double t = 0.1, const std::string& func = "AllReduce") {
    for (int k = 1; k <= n; ++k)
      for (uint32_t p : m.comms[comm].proc_of_rank) Coll(p, comm, k, func, 1024, t + 0.1 * (k - 1), t + 0.1 * (k - 1) + 0.01);
  }
  void Finalize(uint32_t proc, double at) {
    m.procs[proc].finalized = true;
    m.procs[proc].clean = true;
    m.procs[proc].last_ns = Ns(at);
    for (tools::Comm& c : m.comms)
      for (CommMember& mem : c.members)
        if (mem.proc == proc) mem.finalize_ns = Ns(at) - Ns(0.01);
  }
  Model& Finish() {
    for (tools::Proc& p : m.procs) {
      std::stable_sort(p.ops.begin(), p.ops.end(), [&](uint32_t a, uint32_t b) { return m.ops[a].start_ns < m.ops[b].start_ns; });
      for (uint32_t i = 0; i < p.ops.size(); ++i) m.ops[p.ops[i]].index = i;
    }
    std::map<std::tuple<uint32_t, int, int32_t, int32_t, uint64_t>, uint32_t> idx;
    m.matches.clear();
    for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
      Op& o = m.ops[oi];
      int32_t src = -1, dst = -1;
      size_t slot = static_cast<size_t>(o.rank);
      if (o.kind == OpKind::kP2p) {
        const bool recv = m.Str(o.func) == "Recv";
        src = recv ? o.peer_or_root : o.rank;
        dst = recv ? o.rank : o.peer_or_root;
        slot = recv ? 1 : 0;
      }
      auto key = std::make_tuple(o.comm, static_cast<int>(o.kind), src, dst, o.seq);
      auto it = idx.find(key);
      if (it == idx.end()) {
        Match mt;
        mt.comm = o.comm;
        mt.kind = o.kind;
        mt.seq = o.seq;
        mt.src = src;
        mt.dst = dst;
        mt.ops.assign(o.kind == OpKind::kP2p ? 2 : static_cast<size_t>(m.comms[o.comm].nranks), kNone);
        m.matches.push_back(mt);
        it = idx.emplace(key, static_cast<uint32_t>(m.matches.size() - 1)).first;
      }
      m.matches[it->second].ops[slot] = oi;
      o.match = it->second;
    }
    m.alignment_method = "one host: its processes share one clock";
    m.alignment_error_ns = 20000;
    m.hosts = {"node0"};
    return m;
  }
};

inline std::vector<std::string> Names(const google::protobuf::RepeatedPtrField<report::ProcRef>& refs) {
  std::vector<std::string> v;
  for (const auto& r : refs) v.push_back(r.name());
  return v;
}

inline std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

inline const report::Finding* FindKind(const report::Diagnosis& d, report::FindingKind k) {
  for (const auto& f : d.findings())
    if (f.kind() == k) return &f;
  return nullptr;
}

using V = std::vector<std::string>;

// Ranks 0..2 enter AllReduce #12 at 5 s and wait until 15 s; rank 3 stops after #11.
inline Job MissingRankJob() {
  Job j;
  j.Procs(4, 15.0);
  uint32_t w = j.Comm("world", 0xabc, {0, 1, 2, 3});
  j.Steps(w, 11);
  for (uint32_t p = 0; p < 3; ++p) j.Coll(p, w, 12, "AllReduce", 1024, 5.0, -1);
  return j;
}

}  // namespace ncclwatch::tools::diagnose_testing

#endif  // TOOLS_DIAGNOSE_TEST_JOB_H_

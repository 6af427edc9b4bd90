#include "tools/order/order.h"

#include <algorithm>
#include <iomanip>
#include <queue>
#include <sstream>

#include "tools/model/liveness.h"
#include "tools/model/semantics.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {

GlobalOrder ComputeOrder(const Model& m) {
  // Nodes: matches first, then every unmatched op.
  const uint32_t nmatch = static_cast<uint32_t>(m.matches.size());
  std::vector<uint32_t> node_of(m.ops.size());
  std::vector<std::vector<uint32_t>> members(nmatch);
  for (uint32_t oi = 0; oi < m.ops.size(); ++oi) {
    const Op& o = m.ops[oi];
    if (o.match != kNone) {
      node_of[oi] = o.match;
      members[o.match].push_back(oi);
    } else {
      node_of[oi] = static_cast<uint32_t>(members.size());
      members.push_back({oi});
    }
  }
  const size_t n = members.size();
  std::vector<int64_t> time(n, INT64_MAX);
  for (size_t v = 0; v < n; ++v)
    for (uint32_t oi : members[v]) time[v] = std::min(time[v], m.ops[oi].start_ns);
  // Program-order edges (duplicates kept: in-degrees count them alike). A
  // run of consecutive point-to-point operations on one communicator is one
  // NCCL group (a send/recv exchange): its members have no order among
  // themselves, so the edges go from the previous step to each of them and
  // from each of them to the next step.
  std::vector<std::vector<uint32_t>> out(n);
  std::vector<uint32_t> indeg(n, 0);
  auto edge = [&](uint32_t a, uint32_t b) {
    if (a == b) return;
    out[a].push_back(b);
    ++indeg[b];
  };
  for (const Proc& p : m.procs) {
    std::vector<uint32_t> prev;  // nodes of the previous step
    size_t i = 0;
    while (i < p.ops.size()) {
      size_t j = i + 1;
      const Op& first = m.ops[p.ops[i]];
      if (first.kind == OpKind::kP2p)
        while (j < p.ops.size() && m.ops[p.ops[j]].kind == OpKind::kP2p && m.ops[p.ops[j]].comm == first.comm) ++j;
      std::vector<uint32_t> step;
      for (size_t k = i; k < j; ++k) step.push_back(node_of[p.ops[k]]);
      for (uint32_t a : prev)
        for (uint32_t b : step) edge(a, b);
      prev = std::move(step);
      i = j;
    }
  }

  using Item = std::pair<int64_t, uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
  for (uint32_t v = 0; v < n; ++v)
    if (indeg[v] == 0) ready.push({time[v], v});
  GlobalOrder g;
  g.nodes.reserve(n);
  std::vector<bool> placed(n, false);
  std::vector<size_t> position(n, 0);
  std::vector<bool> cyclic(n, false);
  size_t done = 0;
  while (done < n) {
    if (ready.empty()) {
      // Only cycles (and what waits on them) are left: mark the strongly
      // connected components among the unplaced nodes, then release the
      // earliest unplaced node of a cycle.
      std::vector<int> idx(n, -1), low(n, 0);
      std::vector<bool> on(n, false);
      std::vector<uint32_t> stack;
      int counter = 0;
      for (uint32_t s = 0; s < n; ++s) {
        if (placed[s] || idx[s] >= 0) continue;
        // Iterative Tarjan.
        std::vector<std::pair<uint32_t, size_t>> call{{s, 0}};
        idx[s] = low[s] = counter++;
        stack.push_back(s);
        on[s] = true;
        while (!call.empty()) {
          auto& [v, ei] = call.back();
          if (ei < out[v].size()) {
            uint32_t w = out[v][ei++];
            if (placed[w]) continue;
            if (idx[w] < 0) {
              idx[w] = low[w] = counter++;
              stack.push_back(w);
              on[w] = true;
              call.push_back({w, 0});
            } else if (on[w]) {
              low[v] = std::min(low[v], idx[w]);
            }
            continue;
          }
          if (low[v] == idx[v]) {
            std::vector<uint32_t> comp;
            uint32_t w;
            do {
              w = stack.back();
              stack.pop_back();
              on[w] = false;
              comp.push_back(w);
            } while (w != v);
            if (comp.size() > 1)
              for (uint32_t x : comp) cyclic[x] = true;
          }
          uint32_t finished = v;
          call.pop_back();
          if (!call.empty()) low[call.back().first] = std::min(low[call.back().first], low[finished]);
        }
      }
      uint32_t best = kNone;
      for (uint32_t v = 0; v < n; ++v)
        if (!placed[v] && cyclic[v] && (best == kNone || time[v] < time[best])) best = v;
      if (best == kNone)
        for (uint32_t v = 0; v < n; ++v)
          if (!placed[v] && (best == kNone || time[v] < time[best])) best = v;
      indeg[best] = 0;
      ready.push({time[best], best});
    }
    auto [t, v] = ready.top();
    ready.pop();
    if (placed[v]) continue;
    placed[v] = true;
    position[v] = g.nodes.size();
    g.nodes.push_back(members[v]);
    g.in_cycle.push_back(cyclic[v]);
    ++done;
    for (uint32_t w : out[v])
      if (!placed[w] && indeg[w] > 0 && --indeg[w] == 0) ready.push({time[w], w});
  }
  // Cycles as groups of positions: nodes of one cycle are those linked
  // through cyclic nodes; group them by connectivity among cyclic nodes.
  std::vector<int> group(n, -1);
  for (uint32_t s = 0; s < n; ++s) {
    if (!cyclic[s] || group[s] >= 0) continue;
    int gid = static_cast<int>(g.cycles.size());
    g.cycles.emplace_back();
    std::vector<uint32_t> todo{s};
    group[s] = gid;
    while (!todo.empty()) {
      uint32_t v = todo.back();
      todo.pop_back();
      g.cycles[gid].push_back(position[v]);
      for (uint32_t w : out[v])
        if (cyclic[w] && group[w] < 0) {
          group[w] = gid;
          todo.push_back(w);
        }
    }
    std::sort(g.cycles[gid].begin(), g.cycles[gid].end());
  }
  return g;
}

report::MergeReport MergeReportOf(const Model& m, const GlobalOrder& order) {
  const Liveness live = JudgeLiveness(m);
  report::MergeReport r;
  int64_t start = INT64_MAX;
  for (const Proc& p : m.procs)
    if (p.first_ns != kNoTime) start = std::min(start, p.first_ns);
  if (start == INT64_MAX) start = 0;
  r.set_job_start_ns(start);
  r.set_alignment(m.alignment_method);
  r.set_alignment_error_ns(m.alignment_error_ns);
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) {
    const Proc& p = m.procs[pi];
    auto* s = r.add_processes();
    s->set_name(ProcName(m, pi));
    s->set_host(p.host);
    s->set_pid(p.pid);
    s->set_file(p.path);
    s->set_clock_offset_ns(p.offset_ns);
    s->set_ops(p.ops.size());
    for (const std::string& i : p.issues) r.add_input_issues(i);
  }
  for (const std::string& e : m.errors) r.add_input_issues(e);
  for (const std::string& n : m.notes) r.add_input_issues(n);
  for (size_t pos = 0; pos < order.nodes.size(); ++pos) {
    const auto& node = order.nodes[pos];
    const Op& first = m.ops[node[0]];
    const Comm& c = m.comms[first.comm];
    auto* o = r.add_ops();
    o->set_position(pos);
    o->set_comm(c.Label());
    o->set_comm_hash(c.hash);
    o->set_p2p(first.kind == OpKind::kP2p);
    o->set_func(m.Str(first.func));
    o->set_seq(first.seq);
    o->set_count(first.count);
    o->set_in_cycle(order.in_cycle[pos]);
    if (first.kind == OpKind::kColl) {
      // The fields every rank must agree on (semantics.h: rooted functions).
      bool dcount = false, ddtype = false, droot = false;
      for (uint32_t oi : node) {
        const Op& op = m.ops[oi];
        if (op.suspect || first.suspect) continue;
        dcount |= op.count != first.count;
        ddtype |= op.datatype != first.datatype;
        droot |= IsRooted(first.fn) && op.peer_or_root != first.peer_or_root;
      }
      std::string mm;
      for (auto [d, name] : {std::pair{dcount, "count"}, std::pair{ddtype, "datatype"}, std::pair{droot, "root"}})
        if (d) mm += (mm.empty() ? "" : ",") + std::string(name);
      o->set_mismatch(mm);
    }
    int64_t s0 = INT64_MAX, e1 = kNoTime;
    std::vector<bool> has(static_cast<size_t>(std::max(c.nranks, 0)), false);
    for (uint32_t oi : node) {
      const Op& op = m.ops[oi];
      o->add_ranks(op.rank);
      if (op.rank >= 0 && op.rank < c.nranks) has[static_cast<size_t>(op.rank)] = true;
      s0 = std::min(s0, op.start_ns);
      if (op.state == OpState::kCompleted) {
        o->set_completed(o->completed() + 1);
        e1 = std::max(e1, op.gpu_end_ns() != kNoTime ? std::max(op.done_ns, op.gpu_end_ns()) : op.done_ns);
      } else if (op.state == OpState::kInFlight) {
        o->set_in_flight(o->in_flight() + 1);
      }
      if (live.Hung(oi)) o->set_hung(o->hung() + 1);
    }
    if (first.kind == OpKind::kP2p && first.match != kNone) {
      const Match& mt = m.matches[first.match];
      o->set_src(mt.src);
      o->set_dst(mt.dst);
    } else if (first.kind == OpKind::kColl) {
      for (int32_t rk = 0; rk < c.nranks; ++rk)
        if (!has[static_cast<size_t>(rk)]) o->add_missing_ranks(rk);
    } else {
      const bool recv = IsRecv(first.fn);
      o->set_src(recv ? first.peer_or_root : first.rank);
      o->set_dst(recv ? first.rank : first.peer_or_root);
    }
    o->set_first_start_ns(s0 - start);
    if (e1 != kNoTime) o->set_last_end_ns(e1 - start);
  }
  for (const auto& cyc : order.cycles) {
    std::string s = "positions";
    for (size_t p : cyc) s += " " + std::to_string(p);
    s += ": ranks issued these operations in different orders";
    r.add_cycles(s);
  }
  return r;
}

void PrintMergeText(const report::MergeReport& r, std::ostream& out) {
  out << r.processes_size() << " processes, " << r.ops_size() << " operations in order; clocks: " << r.alignment();
  if (r.alignment_error_ns() > 0)
    out << " (collective end times agree to " << std::fixed << std::setprecision(1) << r.alignment_error_ns() / 1000.0
        << " us, median)";
  out << "\n";
  for (const auto& i : r.input_issues()) out << "input: " << i << "\n";
  for (const auto& c : r.cycles()) out << "ORDER MISMATCH: " << c << "\n";
  // Rows follow happens-before (every rank's program order and every match),
  // not the clock: a collective comes after whatever any of its ranks issued
  // before it, so its first rank's start may be earlier than the row above.
  out << "rows in happens-before order; 'first start' is the earliest rank's enqueue (ms since the job began), "
         "so it may step back\n";
  out << std::left << std::setw(7) << "#" << std::setw(14) << "first start" << std::setw(26) << "comm" << std::setw(36)
      << "operation (elements)" << std::setw(18) << "ranks" << "state\n";
  for (const auto& o : r.ops()) {
    std::ostringstream op;
    if (o.p2p()) op << o.func() << " " << o.src() << "->" << o.dst() << " #" << o.seq();
    else op << o.func() << " #" << o.seq();
    op << " (" << o.count() << " el)";
    std::ostringstream ranks;
    if (o.missing_ranks_size() == 0 && !o.p2p()) ranks << "all " << o.ranks_size();
    else {
      ranks << o.ranks_size() << " of " << (o.p2p() ? 2 : o.ranks_size() + o.missing_ranks_size());
      if (o.missing_ranks_size() > 0) {
        ranks << " (no";
        for (int i = 0; i < o.missing_ranks_size() && i < 4; ++i) ranks << " " << o.missing_ranks(i);
        if (o.missing_ranks_size() > 4) ranks << " ...";
        ranks << ")";
      }
    }
    std::ostringstream state;
    // Counts of ranks, said as such ("HUNG on 3" read like "rank 3").
    auto ranks_n = [](uint32_t n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); };
    if (o.hung() > 0) state << "HUNG on " << ranks_n(o.hung());
    else if (o.in_flight() > 0) state << "IN FLIGHT on " << ranks_n(o.in_flight());
    else if (o.completed() == static_cast<uint32_t>(o.ranks_size())) state << "done";
    else if (o.completed() > 0) state << "done on " << ranks_n(o.completed());
    else state << "enqueued";
    if (o.in_cycle()) state << " [order mismatch]";
    if (!o.mismatch().empty()) state << " [" << o.mismatch() << " mismatch]";
    char t[32];
    snprintf(t, sizeof(t), "%.3f", static_cast<double>(o.first_start_ns()) / 1e6);
    out << std::setw(7) << o.position() << std::setw(14) << t << std::setw(26) << Printable(o.comm()).substr(0, 25)
        << std::setw(36) << op.str().substr(0, 35) << std::setw(18) << ranks.str() << state.str() << "\n";
  }
}

}  // namespace ncclwatch::tools

#include "tools/ras/evidence.h"

#include <inttypes.h>
#include <stdio.h>

#include <algorithm>
#include <map>
#include <utility>

#include "tools/ras/parse.h"

namespace ncclwatch::tools {
namespace {

constexpr int kMaxPeerLines = 8;
constexpr int kMaxCommLines = 16;

std::string Hex(uint64_t hash) {
  char b[24];
  snprintf(b, sizeof(b), "0x%" PRIx64, hash);
  return b;
}

std::string Plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// "0,1,3-5,7"
std::string Fold(std::vector<int32_t> r) {
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  std::string out;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (j < i + 2) j = i;  // a run of three or more is folded
    out += (out.empty() ? "" : ",") + std::to_string(r[i]) + (j > i ? "-" + std::to_string(r[j]) : "");
    i = j + 1;
  }
  return out;
}

std::vector<int32_t> Named(const report::RasRanks& r) { return {r.ranks().begin(), r.ranks().end()}; }

std::string CommName(const report::RasComm& c) {
  return "communicator " + Hex(c.hash()) + (c.id().empty() ? "" : " " + c.id()) +
         (c.size() > 0 ? " (" + Plural(c.size(), "rank", "ranks") + ")" : "");
}

// The ranks RAS singles out on `c`, each with why: no data from it, its
// init not done while others' is, an error, the fewest launches of a
// collective whose counts differ.
std::map<int32_t, std::string> Singled(const report::RasComm& c) {
  std::map<int32_t, std::string> out;
  auto add = [&](const report::RasRanks& r, const std::string& why) {
    for (int32_t k : r.ranks()) out.emplace(k, why);
  };
  add(c.unresponsive(), "no data from it");
  for (const report::RasStatusGroup& g : c.statuses())
    if (g.status() == "INIT") add(g.ranks(), "init not complete");
  for (const report::RasRankError& e : c.errors()) add(e.ranks(), e.kind() + " error " + e.error());
  for (const report::RasLaunches& l : c.launches()) {
    if (l.groups_size() < 2) continue;
    const report::RasLaunchGroup* low = &l.groups(0);
    for (const report::RasLaunchGroup& g : l.groups())
      if (g.launches() < low->launches()) low = &g;
    add(low->ranks(), "fewest " + l.func() + " launches (" + std::to_string(low->launches()) + ")");
  }
  return out;
}

std::vector<std::string> CommParts(const report::RasComm& c) {
  std::vector<std::string> parts;
  bool init_group = false;
  for (const report::RasStatusGroup& g : c.statuses())
    if (g.status() == "INIT") {
      init_group = true;
      parts.push_back("init incomplete on " + RasRanksText(g.ranks()));
    }
  if (!init_group && c.status() == "INIT") parts.push_back("init incomplete on every rank");
  // INIT beside RUNNING is said above; FINALIZE, ABORT or NOCOMM beside
  // others is a teardown or an abort under way.
  bool other = false;
  for (const report::RasStatusGroup& g : c.statuses()) other |= g.status() != "INIT" && g.status() != "RUNNING";
  if (other) {
    std::string s = "ranks differ in status:";
    for (int i = 0; i < c.statuses_size(); ++i)
      s += std::string(i ? "," : "") + " " + RasRanksText(c.statuses(i).ranks()) + " " + c.statuses(i).status();
    parts.push_back(s);
  } else if (c.status() == "ABORT") {
    parts.push_back("aborted");
  }
  if (c.unresponsive().count() > 0 || c.unresponsive().ranks_size() > 0)
    parts.push_back("no data from " + RasRanksText(c.unresponsive()) + " (their processes unresponsive)");
  if (c.dead().ranks_size() > 0) parts.push_back(RasRanksText(c.dead()) + " on processes RAS considers dead");
  for (const report::RasRankError& e : c.errors())
    parts.push_back(e.kind() + " error on " + RasRanksText(e.ranks()) + ": " + e.error());
  for (const report::RasLaunches& l : c.launches()) {
    if (l.groups_size() < 2) continue;
    std::string s = l.func() + " launches:";
    for (int i = 0; i < l.groups_size(); ++i)
      s += std::string(i ? "," : "") + " " + RasRanksText(l.groups(i).ranks()) + " at " +
           std::to_string(l.groups(i).launches());
    parts.push_back(s);
  }
  return parts;
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// RAS's strongest facts, which no trace shows: unreachable processes,
// communicators stuck in init.
std::vector<std::string> Tells(const report::RasView& v) {
  std::vector<std::string> out;
  for (const report::RasPeer& p : v.peers())
    if (out.size() < 4)
      out.push_back("process " + std::to_string(p.pid()) + " on " + p.host() + (p.dead() ? " dead" : " unresponsive"));
  if (v.peers_size() == 0 && v.dead_processes() > 0)
    out.push_back(Plural(v.dead_processes(), "process", "processes") + " dead");
  for (const report::RasComm& c : v.comms()) {
    bool init = c.status() == "INIT";
    for (const report::RasStatusGroup& g : c.statuses()) init |= g.status() == "INIT";
    if (init && out.size() < 6) out.push_back(CommName(c) + " stuck in init");
  }
  return out;
}

}  // namespace

std::string RasRanksText(const report::RasRanks& r) {
  const std::vector<int32_t> named = Named(r);
  const uint64_t count = std::max<uint64_t>(r.count(), named.size());
  if (named.empty()) return Plural(count, "rank", "ranks");
  if (named.size() == count) return (count == 1 ? "rank " : "ranks ") + Fold(named);
  return Plural(count, "rank", "ranks") + " (" + Fold(named) + ")";
}

std::vector<std::string> RasViewLines(const report::RasView& v) {
  std::vector<std::string> lines;
  int shown = 0;
  for (const report::RasPeer& p : v.peers()) {
    if (shown++ == kMaxPeerLines) {
      lines.push_back("... and " + Plural(v.peers_size() - kMaxPeerLines, "more process", "more processes"));
      break;
    }
    lines.push_back("process " + std::to_string(p.pid()) + " on " + p.host() +
                    (p.gpus().empty() ? "" : " (GPU " + p.gpus() + ")") +
                    (p.dead() ? " dead: unreachable via the RAS network" : " unresponsive: RAS got no data from it"));
  }
  uint32_t named_dead = 0;
  for (const report::RasPeer& p : v.peers()) named_dead += p.dead();
  const uint32_t named_unresponsive = static_cast<uint32_t>(v.peers_size()) - named_dead;
  if (v.dead_processes() > named_dead)
    lines.push_back(Plural(v.dead_processes(), "process", "processes") + " dead (unreachable via the RAS network)" +
                    (named_dead ? ", " + std::to_string(named_dead) + " named above" : ""));
  if (v.unresponsive_processes() > named_unresponsive)
    lines.push_back(Plural(v.unresponsive_processes(), "process", "processes") + " sent RAS no data" +
                    (named_unresponsive ? ", " + std::to_string(named_unresponsive) + " named above" : ""));
  int comms = 0;
  for (const report::RasComm& c : v.comms()) {
    const std::vector<std::string> parts = CommParts(c);
    if (parts.empty()) continue;
    if (comms++ == kMaxCommLines) {
      lines.push_back("... and more communicators (--format=json has all)");
      break;
    }
    lines.push_back(CommName(c) + ": " + Join(parts, "; "));
  }
  if (v.timeouts() > 0)
    lines.push_back(Plural(v.timeouts(), "communication timeout", "communication timeouts") +
                    " while RAS gathered its data: its view may lack some processes");
  if (lines.empty())
    lines.push_back("nothing wrong: " + Plural(v.comms_total(), "communicator", "communicators") +
                    ", every process reachable" + (v.format() == "json" ? ", launch counts agree" : ""));
  if (v.unparsed_size() > 0)
    lines.push_back(Plural(v.unparsed_size(), "line", "lines") + " of RAS's answer not understood (a newer NCCL?), " +
                    v.unparsed(0));
  return lines;
}

report::RasReport RasReportError(const std::string& source, const std::string& error) {
  report::RasReport r;
  r.set_source(source);
  r.set_error(error);
  return r;
}

report::RasReport RasReportOf(const std::string& source, std::string_view answer) {
  report::RasReport r;
  r.set_source(source);
  std::string error;
  if (!ParseRasAnswer(answer, r.mutable_view(), &error)) {
    r.clear_view();
    r.set_error("RAS answer from " + source + ": " + error);
    return r;
  }
  for (std::string& l : RasViewLines(r.view())) r.add_lines(std::move(l));
  return r;
}

void RasLaunchTracker::Add(const report::RasView& view, double now_sec) {
  std::map<std::string, Since> next;
  for (const report::RasComm& c : view.comms()) {
    bool differ = false;
    std::string key = Hex(c.hash());
    for (const report::RasLaunches& l : c.launches()) {
      differ |= l.groups_size() > 1;
      key += "|" + l.SerializeAsString();
    }
    if (!differ) continue;
    auto it = seen_.find(key);
    Since s = it != seen_.end() ? it->second : Since{now_sec, now_sec, 0, CommName(c)};
    s.last_sec = now_sec;
    ++s.answers;
    next[key] = s;
  }
  seen_ = std::move(next);
}

void RasLaunchTracker::Note(report::RasReport* ras) const {
  if (!ras->error().empty()) return;
  for (const auto& [key, s] : seen_) {
    if (s.answers < 2) continue;
    char b[64];
    snprintf(b, sizeof(b), "%.1f s", s.last_sec - s.first_sec);
    ras->add_lines(s.name + ": these launch counts have not moved for " + b + " (" + std::to_string(s.answers) +
                   " answers): its ranks launched nothing meanwhile");
  }
}

void AddRasEvidence(report::RasReport ras, const std::set<uint64_t>& trace_comms, report::Diagnosis* d) {
  if (!ras.error().empty()) {
    *d->mutable_ras() = std::move(ras);
    return;
  }
  const report::RasView& v = ras.view();
  auto say = [&](const std::string& s) { ras.add_versus_traces(s); };
  // Communicators stuck in init leave no trace.
  if (!trace_comms.empty())
    for (const report::RasComm& c : v.comms()) {
      bool init = c.status() == "INIT";
      for (const report::RasStatusGroup& g : c.statuses()) init |= g.status() == "INIT";
      if (init && !trace_comms.count(c.hash()))
        say(CommName(c) +
            " is in no trace: its init has not completed, and NCCL starts the profiler of a communicator only "
            "once its init is done");
    }
  const std::vector<std::string> tells = Tells(v);
  const std::string from = "RAS (" + ras.source() + "): ";
  if (d->findings_size() > 0) {
    report::Finding* f = d->mutable_findings(0);
    const report::RasComm* c = nullptr;
    for (const report::RasComm& k : v.comms())
      if (f->comm_hash() != 0 && k.hash() == f->comm_hash()) c = &k;
    std::set<int32_t> culprits;
    std::string names;
    for (const report::ProcRef& p : f->culprits())
      if (p.comm_rank() >= 0) {
        culprits.insert(p.comm_rank());
        names += (names.empty() ? "" : ", ") + p.name() + " (comm rank " + std::to_string(p.comm_rank()) + ")";
      }
    if (c != nullptr) {
      const std::map<int32_t, std::string> singled = Singled(*c);
      std::vector<std::string> why, agree;
      for (const auto& [rank, reason] : singled) {
        why.push_back("comm rank " + std::to_string(rank) + ": " + reason);
        if (culprits.count(rank)) agree.push_back("comm rank " + std::to_string(rank) + ": " + reason);
      }
      if (singled.empty()) {
        say("RAS singles out no rank of communicator " + Hex(c->hash()) +
            ": it counts launches, not completions, so ranks inside an operation they all launched look alike to it");
      } else if (!agree.empty()) {
        say("RAS agrees on communicator " + Hex(c->hash()) + ": " + Join(agree, "; "));
      } else if (!culprits.empty()) {
        say("RAS and the traces disagree on communicator " + Hex(c->hash()) + ": the traces name " + names +
            ", RAS singles out " + Join(why, "; ") + "; the verdict stands on the traces");
      }
    } else if (f->comm_hash() != 0 && v.format() == "json") {
      say("RAS does not list communicator " + Hex(f->comm_hash()) +
          " (destroyed, or no process of it answered RAS)");
    }
    if (f->cause() == report::CAUSE_UNKNOWN && !tells.empty()) {
      report::Evidence* e = f->add_evidence();
      e->set_text(from + Join(tells, "; "));
      say("RAS tells more than the traces: " + Join(tells, "; "));
    }
  } else if (!tells.empty() && d->exit_status() != 0) {
    say("RAS tells more than the traces: " + Join(tells, "; "));
  } else if (d->exit_status() == 0 && (v.peers_size() > 0 || v.dead_processes() > 0 || v.comms_ok() < v.comms_total())) {
    say("the traces show no problem and RAS reports the above; the verdict stands on the traces");
  }
  *d->mutable_ras() = std::move(ras);
}

}  // namespace ncclwatch::tools

#include "tools/model/summary_checks.h"

#include <stdio.h>

#include <map>
#include <set>
#include <unordered_set>
#include <vector>

#include "proto/trace.pb.h"
#include "tools/model/semantics.h"
#include "tools/model/window_summary.h"

namespace ncclwatch::tools {
namespace {

std::string Hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// The count a Sketch message holds: its zeros and buckets, saturating (a
// damaged one can hold any).
uint64_t SketchCount(const summary::Sketch& s) {
  uint64_t n = s.zeros();
  for (const auto* v : {&s.pos(), &s.neg()})
    for (uint64_t c : *v) n = n + c < n ? UINT64_MAX : n + c;
  return n;
}

bool CheckRows(const summary::SummaryProcess& sp, std::string* why) {
  for (int k = 0; k < sp.rows_size(); ++k) {
    const summary::RowDigest& r = sp.rows(k);
    // Each operation of the row adds one to each count and at most one
    // value to each sketch (stats_digest.cc); the skew, one per match
    // whose first operation is the row's.
    const std::pair<const char*, uint64_t> counts[] = {
        {"incomplete", r.incomplete()},        {"warmup", r.warmup()},
        {"bytes_n", r.bytes_n()},              {"calls", r.calls()},
        {"gpu's count", SketchCount(r.gpu())}, {"cpu's count", SketchCount(r.cpu())},
        {"polled's count", SketchCount(r.polled())}, {"delay's count", SketchCount(r.delay())},
        {"skew's count", SketchCount(r.skew())},
    };
    for (const auto& [name, n] : counts)
      if (n > r.ops()) {
        *why = "rows[" + std::to_string(k) + "] " + name + " " + std::to_string(n) + " is more than its " +
               std::to_string(r.ops()) + " operations";
        return false;
      }
  }
  return true;
}

// "prefixes[k] (comm 0x...)": made only for an error, since a summary
// holds many prefixes.
std::string PrefixName(int k, const summary::CommPrefix& p) {
  return "prefixes[" + std::to_string(k) + "] (comm " + Hex(p.comm_hash()) + ")";
}

// Prefix `k`'s own counts and checkpoints; `every`: its grid (0: none).
bool CheckPrefix(int k, const summary::CommPrefix& p, uint64_t every, std::string* why) {
  auto fail = [&](const std::string& what) {
    *why = PrefixName(k, p) + " " + what;
    return false;
  };
  if (p.collectives() > p.ops())
    return fail("has " + std::to_string(p.collectives()) + " collectives among " + std::to_string(p.ops()) +
                " operations");
  std::map<std::string, uint64_t> colls;
  for (const summary::LastSeq& l : p.colls())
    if (!colls.emplace(l.func(), l.seq()).second) return fail("names function '" + l.func() + "' twice");
  std::set<std::pair<std::string, int32_t>> p2p;
  for (const summary::LastSeq& l : p.p2p())
    if (!p2p.emplace(l.func(), l.peer()).second)
      return fail("names function '" + l.func() + "' to peer " + std::to_string(l.peer()) + " twice");
  if (colls.size() > p.collectives() || p2p.size() > p.ops() - p.collectives())
    return fail("names more functions than it let go operations");
  if (p.collectives() > 0 && p.checkpoints_size() == 0)
    return fail("let go " + std::to_string(p.collectives()) + " collectives and has no checkpoint at the last");
  uint64_t prev = 0;
  for (int i = 0; i < p.checkpoints_size(); ++i) {
    const summary::Checkpoint& c = p.checkpoints(i);
    auto at = [&] { return "checkpoints[" + std::to_string(i) + "] at position " + std::to_string(c.position()); };
    if (c.position() <= prev) return fail(at() + " is not after the one before it");
    if (c.position() > p.collectives())
      return fail(at() + " is past its " + std::to_string(p.collectives()) + " collectives");
    const bool last = i + 1 == p.checkpoints_size();
    if (last && c.position() != p.collectives())
      return fail(at() + " is its last, not at its last collective (" + std::to_string(p.collectives()) + ")");
    if (!last && every != 0 && c.position() % every != 0)
      return fail(at() + " is off its interval of " + std::to_string(every));
    // Its function's last seq is the highest of that function let go
    // (window_summary.cc stores seq + 1, so a seq of 2^64 - 1 is not
    // compared).
    auto it = colls.find(c.func());
    if (it == colls.end()) return fail(at() + " is a '" + c.func() + "', a function it names no seq of");
    if (c.seq() != UINT64_MAX && it->second < c.seq())
      return fail(at() + " is " + c.func() + " #" + std::to_string(c.seq()) + ", past the last it let go (#" +
                  std::to_string(it->second) + ")");
    prev = c.position();
  }
  return true;
}

// The strings the window defines, each id's definitions by offset: a
// collective's are those before it, the last of each id, as summarize
// read them (window_summary.cc IndexOps).
class WindowStrings {
 public:
  explicit WindowStrings(const summary::SummaryProcess& sp) {
    trace::Record r;
    for (const summary::WindowRecord& w : sp.records())
      if (r.ParseFromString(w.record()) && r.has_string_def())
        defs_[r.string_def().id()].emplace_back(w.offset(), r.string_def().text());
  }
  // String `id` as of offset `at`; null where none was defined before.
  const std::string* At(uint32_t id, uint64_t at) const {
    auto it = defs_.find(id);
    if (it == defs_.end()) return nullptr;
    const std::string* text = nullptr;
    for (const auto& [offset, t] : it->second)
      if (offset < at) text = &t;
    return text;
  }

 private:
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, std::string>>> defs_;
};

// The asked collectives (summarize --collectives) against their prefixes:
// within what each let go and was asked, once each, and where they run
// on from a checkpoint or the start, their chain gives the checkpoints
// stored after them.
bool CheckAsked(const summary::SummaryProcess& sp, std::string* why) {
  if (sp.asked_collectives_size() == 0) return true;
  std::unordered_map<uint64_t, int> prefix_of;
  for (int k = 0; k < sp.prefixes_size(); ++k) prefix_of.emplace(sp.prefixes(k).comm_hash(), k);
  // Per prefix: position -> the asked collective's index.
  std::map<int, std::map<uint64_t, int>> asked;
  for (int i = 0; i < sp.asked_collectives_size(); ++i) {
    const summary::PastCollective& a = sp.asked_collectives(i);
    const std::string name = "asked_collectives[" + std::to_string(i) + "] (comm " + Hex(a.comm_hash()) +
                             ", position " + std::to_string(a.position()) + ")";
    auto p = prefix_of.find(a.comm_hash());
    if (p == prefix_of.end()) return *why = name + " is of no communicator it let go", false;
    const summary::CommPrefix& prefix = sp.prefixes(p->second);
    bool in_range = false;
    for (const summary::PositionRange& r : prefix.asked())
      in_range |= a.position() >= r.from() && a.position() <= r.to();
    if (a.position() == 0 || a.position() > prefix.collectives() || !in_range)
      return *why = name + " is not among the collectives it let go and was asked for", false;
    if (!asked[p->second].emplace(a.position(), i).second) return *why = name + " is there twice", false;
  }
  const WindowStrings strings(sp);
  trace::Record r;
  for (const auto& [k, at] : asked) {
    const summary::CommPrefix& p = sp.prefixes(k);
    std::map<uint64_t, uint64_t> stored;
    for (const summary::Checkpoint& c : p.checkpoints()) stored.emplace(c.position(), c.hash());
    uint64_t chain = 0, pos = 0;
    bool known = false;  // whether `chain` is the chain at `pos`
    for (const auto& [position, i] : at) {
      if (pos == 0 || position != pos + 1) {
        // A new run: it starts from the chain's start or a checkpoint.
        auto s = stored.find(position - 1);
        known = position == 1 || s != stored.end();
        chain = position == 1 || !known ? 0 : s->second;
      }
      pos = position;
      if (!r.ParseFromString(sp.asked_collectives(i).record()) || !r.has_op())
        return *why = "asked_collectives[" + std::to_string(i) + "] is no operation", false;
      const trace::Op& o = r.op();
      const uint64_t offset = sp.asked_collectives(i).offset();
      const std::string* f = strings.At(o.func(), offset);
      const std::string* d = strings.At(o.datatype(), offset);
      // A signature not known here (its strings are not in the window):
      // the chain is not compared until the next checkpoint.
      known = known && f != nullptr && d != nullptr;
      if (known) chain = ChainStep(chain, *f, o.count(), *d, IsRooted(FuncFromName(*f)) ? o.root() : 0);
      auto s = stored.find(position);
      if (s == stored.end()) continue;
      if (known && s->second != chain)
        return *why = PrefixName(k, p) + " checkpoint at position " + std::to_string(position) +
                      " is not the chain of the asked collectives before it",
                      false;
      chain = s->second;
      known = true;
    }
  }
  return true;
}

}  // namespace

bool CheckSummaryProcess(const summary::SummaryHeader& header, const summary::SummaryProcess& sp, std::string* why) {
  // The grid: the cap's thinned interval, else the header's; the cap
  // records 2^32 - 1 for any wider one (summary.cc CapWindow), which is
  // then no grid.
  const uint64_t every = sp.checkpoint_every() != 0 ? sp.checkpoint_every() : header.checkpoint_every();
  const uint64_t grid = every == UINT32_MAX ? 0 : every;
  std::unordered_set<uint64_t> comms;
  uint64_t ops = 0;
  for (int k = 0; k < sp.prefixes_size(); ++k) {
    const summary::CommPrefix& p = sp.prefixes(k);
    if (!comms.insert(p.comm_hash()).second) return *why = PrefixName(k, p) + " names its communicator again", false;
    if (!CheckPrefix(k, p, grid, why)) return false;
    ops = ops + p.ops() < ops ? UINT64_MAX : ops + p.ops();
  }
  if (sp.let_go_ops() != ops)
    return *why = "let_go_ops " + std::to_string(sp.let_go_ops()) + " is not its prefixes' " + std::to_string(ops),
           false;
  if (sp.let_go_completed() > sp.let_go_ops())
    return *why = "let_go_completed " + std::to_string(sp.let_go_completed()) + " is more than let_go_ops " +
                  std::to_string(sp.let_go_ops()),
           false;
  return CheckRows(sp, why) && CheckAsked(sp, why);
}

bool ChainValues::Add(uint64_t record, const summary::SummaryProcess& sp, uint64_t* other, std::string* why) {
  for (const summary::CommPrefix& p : sp.prefixes())
    for (const summary::Checkpoint& c : p.checkpoints()) {
      auto [it, fresh] = at_.try_emplace(c.hash(), c.position(), record);
      if (fresh || it->second.first == c.position()) continue;
      *other = it->second.second;
      *why = "its checkpoint at position " + std::to_string(c.position()) + " (comm " + Hex(p.comm_hash()) +
             ") has the chain value that " +
             (*other == record ? std::string("its own") : "record " + std::to_string(*other) + "'s") +
             " checkpoint at position " + std::to_string(it->second.first) +
             " has: each value of a chain stands at one position";
      return false;
    }
  return true;
}

}  // namespace ncclwatch::tools

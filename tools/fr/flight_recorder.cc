#include "tools/fr/flight_recorder.h"

#include <ctype.h>
#include <stdio.h>

#include <algorithm>
#include <set>
#include <utility>

#include "tools/fr/pickle.h"
#include "tools/model/semantics.h"
#include "tools/reader/reader.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace {

// The number a file name ends in (PyTorch appends the rank to the dump's
// prefix), or -1.
int64_t TrailingNumber(const std::string& path) {
  size_t end = path.size();
  size_t begin = end;
  while (begin > 0 && isdigit(static_cast<unsigned char>(path[begin - 1]))) --begin;
  if (begin == end || end - begin > 9) return -1;
  return std::stoll(path.substr(begin, end - begin));
}

const std::string& Str(const PyValue* v) {
  static const std::string* const kEmpty = new std::string();
  return v != nullptr && v->IsStr() ? v->s : *kEmpty;
}

// What ParseFrDump builds, counted in bytes against kMaxValueBytes: a
// value the pickle shares is copied at each reference, and a group's ranks
// as a string ("0,1") take four times their text's bytes as ints.
class Budget {
 public:
  bool Take(uint64_t bytes) {
    if (bytes > kMaxValueBytes - used_) return false;
    used_ += bytes;
    return true;
  }

 private:
  uint64_t used_ = 0;
};

// "[0, 1, 2, 3]" (how PyTorch writes a group's ranks) or a list of ints.
// False also when `budget` cannot hold them (`*over` then).
bool Ranks(const PyValue* v, Budget* budget, bool* over, std::vector<int64_t>* out) {
  out->clear();
  if (v == nullptr) return false;
  if (v->kind == PyValue::Kind::kList || v->kind == PyValue::Kind::kTuple) {
    for (const PyRef& r : v->items)
      if (!r->IsInt()) return false;
    if (!budget->Take(v->items.size() * sizeof(int64_t))) return !(*over = true);
    for (const PyRef& r : v->items) out->push_back(r->i);
    return true;
  }
  if (!v->IsStr()) return false;
  size_t numbers = 0;
  for (size_t i = 0; i < v->s.size(); ++i)
    numbers += isdigit(static_cast<unsigned char>(v->s[i])) && (i == 0 || !isdigit(static_cast<unsigned char>(v->s[i - 1])));
  if (!budget->Take(numbers * sizeof(int64_t))) return !(*over = true);
  out->reserve(numbers);
  int64_t cur = 0;
  bool in_number = false;
  for (char ch : v->s) {
    if (isdigit(static_cast<unsigned char>(ch))) {
      if (cur > (int64_t{1} << 40)) return false;
      cur = cur * 10 + (ch - '0');
      in_number = true;
    } else {
      if (in_number) out->push_back(cur);
      cur = 0;
      in_number = false;
      if (ch != '[' && ch != ']' && ch != ',' && ch != ' ') return false;
    }
  }
  if (in_number) out->push_back(cur);
  return true;
}

// The NCCL collective a Flight Recorder entry is, when it is exactly one
// (PyTorch's barrier is an all-reduce); Func::kOther when NCCL runs it
// otherwise (point-to-point operations, several operations, or a name not
// known here). Compared with Op::fn, never with a function's name.
Func NcclFunc(const std::string& profiling_name) {
  std::string n = profiling_name;
  if (n.rfind("nccl:", 0) == 0) n = n.substr(5);
  while (!n.empty() && n[0] == '_') n = n.substr(1);
  static const std::pair<const char*, Func> kOne[] = {
      {"all_reduce", Func::kAllReduce},         {"allreduce", Func::kAllReduce},
      {"barrier", Func::kAllReduce},            {"broadcast", Func::kBroadcast},
      {"all_gather", Func::kAllGather},         {"allgather_base", Func::kAllGather},
      {"all_gather_base", Func::kAllGather},    {"all_gather_into_tensor", Func::kAllGather},
      {"reduce_scatter", Func::kReduceScatter}, {"reduce_scatter_base", Func::kReduceScatter},
      {"reduce_scatter_tensor", Func::kReduceScatter},
      {"reduce", Func::kReduce},
  };
  for (const auto& [fr, nccl] : kOne)
    if (n == fr) return nccl;
  return Func::kOther;
}

const FrFrame* UserFrame(const FrEntry& e) {
  // The innermost frame outside PyTorch itself: the user's line.
  for (const FrFrame& f : e.frames)
    if (f.file.find("/torch/") == std::string::npos) return &f;
  return e.frames.empty() ? nullptr : &e.frames[0];
}

// "nccl:send 0->1 #24 of group 'default_pg' (completed) from main() at f.py:188".
std::string CallText(const FrEntry& e, const std::string& group) {
  std::string text = e.profiling_name + " #" + std::to_string(e.collective_seq_id) + " of group '" + group + "' (" +
                     e.state + ")";
  if (const FrFrame* uf = UserFrame(e))
    text += " from " + uf->name + "() at " + uf->file + ":" + std::to_string(uf->line);
  return text;
}

// PyTorch names a point-to-point entry "nccl:send 0->1" or "nccl:recv 1<-2"
// (group ranks, this rank's first). False for anything else.
bool ParseP2pName(const std::string& name, bool* recv, int32_t* self, int32_t* peer) {
  int a = -1, b = -1;
  char arrow[3] = {};
  if (sscanf(name.c_str(), "nccl:send %d%2[-<>]%d", &a, arrow, &b) == 3 && std::string(arrow) == "->") *recv = false;
  else if (sscanf(name.c_str(), "nccl:recv %d%2[-<>]%d", &a, arrow, &b) == 3 && std::string(arrow) == "<-") *recv = true;
  else return false;
  if (a < 0 || b < 0) return false;
  *self = a;
  *peer = b;
  return true;
}

// The sends and receives `dump` shows on group `pg` after `last`, its last
// entry placed on a recorded collective, up to its next collective there:
// calls the rank's NCCL records may lack (Proc::fr_p2p). `pos`: the dump's
// rank in the group, which each call must name as its own.
std::vector<FrP2pCall> P2pAfter(const FrDump& dump, const std::string& pg, const FrEntry* last, uint32_t comm,
                                size_t pos, const std::string& group) {
  std::vector<FrP2pCall> out;
  size_t i = 0;
  while (i < dump.entries.size() && &dump.entries[i] != last) ++i;
  for (++i; i < dump.entries.size(); ++i) {
    const FrEntry& e = dump.entries[i];
    if (e.pg != pg) continue;
    if (!e.is_p2p) break;
    FrP2pCall call;
    int32_t self = -1;
    if (!ParseP2pName(e.profiling_name, &call.recv, &self, &call.peer) || self != static_cast<int32_t>(pos)) continue;
    call.comm = comm;
    call.text = CallText(e, group);
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace

bool MayBeFrDumpName(const std::string& name) { return TrailingNumber(name) >= 0; }

bool LooksLikeFrDump(const std::string& path, std::string_view head) {
  return head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x80 && head[1] >= 2 && head[1] <= 5 &&
         TrailingNumber(path) >= 0;
}

bool ParseFrDump(const std::string& path, std::string_view bytes, FrDump* dump, std::string* error) {
  *dump = FrDump();
  dump->path = path;
  dump->rank = TrailingNumber(path);
  PickleResult p = ParsePickle(bytes);
  if (p.value == nullptr) {
    *error = p.error;
    return false;
  }
  const PyValue& top = *p.value;
  const PyValue* entries = top.Get("entries");
  if (top.kind != PyValue::Kind::kDict || entries == nullptr || entries->kind != PyValue::Kind::kList) {
    *error = "a pickle, but not a Flight Recorder dump (no 'entries' list)";
    return false;
  }
  if (dump->rank < 0) {
    *error = "no rank number at the end of the file name";
    return false;
  }
  dump->version = CutName(Str(top.Get("version")));
  dump->nccl_version = CutName(Str(top.Get("comm_lib_version")));
  Budget budget;
  auto too_large = [&](const std::string& where) {
    *error = "the dump would take more than " + std::to_string(kMaxValueBytes >> 20) + " MiB once read (at " + where +
             "; values the pickle shares are copied at each reference)";
    *dump = FrDump();
    return false;
  };
  if (const PyValue* pgs = top.Get("pg_config"); pgs != nullptr && pgs->kind == PyValue::Kind::kDict) {
    for (const auto& [k, v] : pgs->entries) {
      if (!k->IsStr() || v->kind != PyValue::Kind::kDict) continue;
      FrGroup g;
      g.desc = CutName(Str(v->Get("desc")));
      if (!budget.Take(sizeof(FrGroup) + 4 * sizeof(void*) + k->s.size() + g.desc.size()))
        return too_large("process group '" + k->s + "'");
      bool over = false;
      if (!Ranks(v->Get("ranks"), &budget, &over, &g.ranks)) {
        if (over) return too_large("the ranks of process group '" + k->s + "'");
        continue;
      }
      dump->groups[CutName(k->s)] = std::move(g);
    }
  }
  for (const PyRef& ref : entries->items) {
    const PyValue& e = *ref;
    if (e.kind != PyValue::Kind::kDict) continue;
    // The entry, twice: the vector holding it may double.
    if (!budget.Take(2 * sizeof(FrEntry))) return too_large("entry " + std::to_string(dump->entries.size()));
    FrEntry out;
    const PyValue* pg = e.Get("process_group");
    if (pg != nullptr && pg->kind == PyValue::Kind::kTuple && pg->items.size() == 2) {
      out.pg = CutName(Str(pg->items[0].get()));
      out.pg_desc = CutName(Str(pg->items[1].get()));
    }
    const PyValue* seq = e.Get("collective_seq_id");
    if (seq == nullptr || !seq->IsInt()) continue;
    out.collective_seq_id = seq->i;
    const PyValue* p2p = e.Get("is_p2p");
    out.is_p2p = p2p != nullptr && p2p->kind == PyValue::Kind::kBool && p2p->b;
    out.profiling_name = CutName(Str(e.Get("profiling_name")));
    out.state = CutName(Str(e.Get("state")));
    if (!budget.Take(out.pg.size() + out.pg_desc.size() + out.profiling_name.size() + out.state.size()))
      return too_large("entry " + std::to_string(dump->entries.size()));
    if (const PyValue* fr = e.Get("frames"); fr != nullptr && fr->kind == PyValue::Kind::kList) {
      for (const PyRef& f : fr->items) {
        if (f->kind != PyValue::Kind::kDict) continue;
        FrFrame frame;
        const std::string* file = &Str(f->Get("filename"));
        const std::string* name = &Str(f->Get("name"));
        if (!budget.Take(2 * sizeof(FrFrame) + file->size() + name->size()))
          return too_large("frame " + std::to_string(out.frames.size()) + " of entry " +
                           std::to_string(dump->entries.size()));
        frame.file = CutName(*file);
        const PyValue* line = f->Get("line");
        frame.line = line != nullptr && line->IsInt() ? line->i : 0;
        frame.name = CutName(*name);
        out.frames.push_back(std::move(frame));
      }
    }
    dump->entries.push_back(std::move(out));
  }
  return true;
}

FrJoin JoinFlightRecorder(const std::vector<std::string>& files, const std::vector<std::string>& explicit_files,
                          Model* model) {
  FrJoin join;
  Model& m = *model;
  std::set<std::string> named(explicit_files.begin(), explicit_files.end());
  std::vector<std::string> all = files;
  for (const std::string& f : explicit_files)
    if (std::find(all.begin(), all.end(), f) == all.end()) all.push_back(f);
  for (const std::string& path : all) {
    std::string bytes;
    RegularFile rf;
    // Its first bytes first: a folder may hold large files whose names end
    // in a number (core.12345) that are no dump.
    if (!ReadFileHead(path, 16, &bytes, &rf)) {
      if (named.count(path)) join.notes.push_back(path + ": cannot read: " + rf.why);
      continue;
    }
    if (!named.count(path) && !LooksLikeFrDump(path, bytes)) continue;
    bytes.clear();  // ReadFileHead appends
    if (!ReadFileHead(path, kMaxPickleBytes + 1, &bytes, &rf)) {
      join.notes.push_back(path + ": cannot read: " + rf.why);
      continue;
    }
    if (bytes.size() > kMaxPickleBytes) {
      join.notes.push_back(path + ": larger than a Flight Recorder dump can be (" +
                           std::to_string(kMaxPickleBytes >> 20) + " MiB): not read");
      continue;
    }
    FrDump dump;
    std::string error;
    if (!ParseFrDump(path, bytes, &dump, &error)) {
      join.notes.push_back(path + ": not used as a Flight Recorder dump: " + error);
      continue;
    }
    join.dumps.push_back(std::move(dump));
  }

  // Pointers into join.dumps are taken from here on: it no longer grows.
  for (const FrDump& dump : join.dumps) {
    std::map<std::string, std::vector<const FrEntry*>> by_group;
    for (const FrEntry& e : dump.entries)
      if (!e.is_p2p) by_group[e.pg].push_back(&e);
    uint32_t joined_proc = kNone;
    for (auto& [pg, entries] : by_group) {
      std::sort(entries.begin(), entries.end(),
                [](const FrEntry* a, const FrEntry* b) { return a->collective_seq_id < b->collective_seq_id; });
      auto g = dump.groups.find(pg);
      if (g == dump.groups.end()) continue;
      const std::vector<int64_t>& ranks = g->second.ranks;
      auto at = std::find(ranks.begin(), ranks.end(), dump.rank);
      if (at == ranks.end()) continue;
      const size_t pos = static_cast<size_t>(at - ranks.begin());
      const std::string label = g->second.desc.empty() || g->second.desc == "undefined" ? pg : g->second.desc;
      // The communicators this group may be: its size, with a file for the
      // dump's rank in it, whose collectives line up with the entries.
      struct Candidate {
        uint32_t comm, proc;
        std::vector<uint32_t> colls;
        size_t aligned;
      };
      std::vector<Candidate> fits;
      for (uint32_t ci = 0; ci < m.comms.size(); ++ci) {
        const Comm& c = m.comms[ci];
        if (c.nranks != static_cast<int32_t>(ranks.size()) || pos >= c.proc_of_rank.size()) continue;
        const uint32_t pi = c.proc_of_rank[pos];
        if (pi == kNone) continue;
        if (m.procs[pi].launcher_rank >= 0 && m.procs[pi].launcher_rank != dump.rank) continue;
        Candidate cand{ci, pi, {}, 0};
        for (uint32_t oi : m.procs[pi].ops)
          if (m.ops[oi].comm == ci && m.ops[oi].kind == OpKind::kColl) cand.colls.push_back(oi);
        bool ok = true;
        for (const FrEntry* e : entries) {
          const Func fn = NcclFunc(e->profiling_name);
          if (fn == Func::kOther) break;  // not one NCCL collective: the count is lost from here on
          if (e->collective_seq_id < 1) continue;
          const uint64_t k = static_cast<uint64_t>(e->collective_seq_id) - 1;
          if (k >= cand.colls.size()) continue;  // called in Python, never reached NCCL
          if (m.ops[cand.colls[k]].fn != fn) {
            ok = false;
            break;
          }
          ++cand.aligned;
        }
        if (ok && cand.aligned > 0) fits.push_back(std::move(cand));
      }
      if (fits.size() != 1) {
        join.notes.push_back(dump.path + ": process group '" + label + "' (" + std::to_string(ranks.size()) +
                             " ranks) lines up with " +
                             (fits.empty() ? "no communicator" : std::to_string(fits.size()) + " communicators") +
                             " of rank " + std::to_string(dump.rank) + "'s NCCL records: not joined");
        continue;
      }
      const Candidate& c = fits[0];
      Comm& comm = m.comms[c.comm];
      if (comm.process_group.empty()) comm.process_group = label;
      const FrEntry* last_placed = nullptr;
      for (const FrEntry* e : entries) {
        if (NcclFunc(e->profiling_name) == Func::kOther) break;
        if (e->collective_seq_id < 1) continue;
        const uint64_t k = static_cast<uint64_t>(e->collective_seq_id) - 1;
        if (k < c.colls.size()) {
          join.by_op[c.colls[k]] = FrCall{e, dump.rank};
          last_placed = e;
        }
      }
      joined_proc = c.proc;
      Proc& proc = m.procs[c.proc];
      proc.fr_joined = true;
      if (last_placed != nullptr) {
        std::vector<FrP2pCall> p2p =
            P2pAfter(dump, pg, last_placed, c.comm, pos, last_placed->pg_desc.empty() ? pg : last_placed->pg_desc);
        // One dump per rank and group: the same file found twice (in a
        // folder given and named with --fr) says it once.
        proc.fr_p2p.erase(std::remove_if(proc.fr_p2p.begin(), proc.fr_p2p.end(),
                                         [&](const FrP2pCall& x) { return x.comm == c.comm; }),
                          proc.fr_p2p.end());
        proc.fr_p2p.insert(proc.fr_p2p.end(), p2p.begin(), p2p.end());
      }
    }
    if (joined_proc != kNone && !dump.entries.empty()) {
      // The call the rank is in: its oldest entry not completed (entries are
      // in call order); when all completed, its newest.
      const FrEntry* current = &dump.entries.back();
      for (const FrEntry& e : dump.entries) {
        if (e.state != "completed") {
          current = &e;
          break;
        }
      }
      join.last_by_proc[joined_proc] = FrCall{current, dump.rank};
    }
  }
  return join;
}

void AddFlightRecorderEvidence(const Model& m, const FrJoin& join, report::Diagnosis* d) {
  for (const std::string& note : join.notes) {
    report::InputIssue* i = d->add_input_issues();
    i->set_kind(report::InputIssue::FLIGHT_RECORDER);
    i->set_text(note);
  }
  if (join.by_op.empty() && join.last_by_proc.empty()) return;
  std::unordered_map<std::string, uint32_t> proc_of_file;
  for (uint32_t pi = 0; pi < m.procs.size(); ++pi) proc_of_file[m.procs[pi].path] = pi;
  auto annotate = [&](report::Finding* f) {
    // The finding's operation, as diagnose found it (Finding.op): its
    // communicator, and each rank's side through its match.
    if (f->op() == 0 || f->op() > m.ops.size()) return;
    const Op& fop = m.ops[f->op() - 1];
    const uint32_t ci = fop.comm;
    if (ci >= m.comms.size()) return;
    if (!m.comms[ci].process_group.empty()) f->set_process_group(m.comms[ci].process_group);
    std::vector<const report::ProcRef*> refs;
    for (const report::ProcRef& r : f->culprits()) refs.push_back(&r);
    for (const report::ProcRef& r : f->waiting()) refs.push_back(&r);
    std::set<uint32_t> seen;
    for (const report::ProcRef* r : refs) {
      auto p = proc_of_file.find(r->file());
      if (p == proc_of_file.end() || !seen.insert(p->second).second) continue;
      const uint32_t pi = p->second;
      const FrCall* call = nullptr;
      bool this_op = false;
      if (fop.kind == OpKind::kColl && fop.match < m.matches.size()) {
        for (uint32_t oi : m.matches[fop.match].ops) {
          if (oi == kNone || m.ops[oi].proc != pi) continue;
          auto it = join.by_op.find(oi);
          if (it != join.by_op.end()) {
            call = &it->second;
            this_op = true;
          }
          break;
        }
      }
      if (call == nullptr) {
        auto it = join.last_by_proc.find(pi);
        if (it == join.last_by_proc.end()) continue;
        call = &it->second;
      }
      const FrEntry& e = *call->entry;
      report::PythonCall* pc = f->add_python_calls();
      pc->set_proc(r->name());
      pc->set_process_group(e.pg_desc.empty() ? e.pg : e.pg_desc);
      pc->set_call(e.profiling_name);
      pc->set_collective_seq_id(static_cast<uint64_t>(std::max<int64_t>(e.collective_seq_id, 0)));
      pc->set_state(e.state);
      pc->set_this_operation(this_op);
      for (const FrFrame& fr : e.frames) {
        report::PythonFrame* pf = pc->add_frames();
        pf->set_file(fr.file);
        pf->set_line(fr.line);
        pf->set_function(fr.name);
      }
      const std::string text =
          std::string("Python: ") + (this_op ? "" : "not in it; in ") + CallText(e, pc->process_group());
      report::Evidence* ev = f->add_evidence();
      ev->set_proc(r->name());
      ev->set_text(text);
    }
  };
  for (report::Finding& f : *d->mutable_findings()) annotate(&f);
  for (report::Finding& f : *d->mutable_consequences()) annotate(&f);
}

}  // namespace ncclwatch::tools

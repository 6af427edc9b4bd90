#include "tools/model/loader_internal.h"

#include <ctype.h>

#include <algorithm>
#include <string>

#include "tools/text/safe_text.h"

namespace ncclwatch::tools::loader_internal {

void Seen(Proc* p, int64_t t) {
  if (t == kNoTime) return;
  if (p->first_ns == kNoTime || t < p->first_ns) p->first_ns = t;
  if (p->last_ns == kNoTime || t > p->last_ns) p->last_ns = t;
}

// The file is damaged at `off`: a value there failed a consistency check
// (`what`, one phrase). The first few are listed in the file's issues.
void Damaged(Proc* p, uint32_t* listed, uint64_t off, const std::string& what) {
  if (!p->damaged || off < p->damaged_at) p->damaged_at = off;
  p->damaged = true;
  if ((*listed)++ < kMaxDamageIssues)
    p->issues.push_back(p->path + ": offset " + std::to_string(off) + ": " + what + " (damaged)");
}

// Whether a record's time `t` (relative to the base) lies within the write
// that holds it (kWriteSlackNs). Without batches (older files) any time does.
bool TimeInLine(const FileState& fs, int64_t t) {
  if (!fs.in_batch) return true;
  int64_t hi = fs.batch_time, lo = fs.prev_batch_time;
  if (fs.batch_range) {
    // The writer's own account of what the write holds: records older than
    // the write before (they waited in a buffer), or a write open for
    // longer than the slack.
    hi = std::max(hi, fs.batch_newest);
    lo = lo == kNoTime ? fs.batch_oldest : std::min(lo, fs.batch_oldest);
  }
  if (t > SaturatingAdd(hi, kWriteSlackNs)) return false;
  return lo == kNoTime || t >= lo - kWriteSlackNs;
}

uint32_t CommFor(FileState* fs, uint32_t file_comm) {
  auto it = fs->comms.find(file_comm);
  return it == fs->comms.end() ? kNone : it->second;
}

bool Place::TimeOk(uint64_t t, const char* what) const {
  if (TimeInLine(*fs, Rel(t))) return true;
  Damaged(p, &fs->damage_issues, off, std::string(what) + " time outside its write");
  return false;
}

void AddHeader(const Place& at, const trace::ProcessHeader& h) {
  FileState& fs = *at.fs;
  Proc* p = at.p;
  const uint64_t off = at.off;
  fs.have_header = true;
  p->header_offset = off;
  p->host = CutName(h.hostname());
  // gethostname(2)'s names: letters, digits, '-', '.' and '_'.
  for (char ch : p->host)
    if (!isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.' && ch != '_') {
      Damaged(p, &fs.damage_issues, off, "a process header whose host name holds a '" + Printable(std::string(1, ch)) + "'");
      break;
    }
  p->pid = h.pid();
  // A rank beyond any communicator's size is corrupt: no rank.
  p->launcher_rank = h.launcher_rank() < kMaxCommRanks ? std::max(h.launcher_rank(), -1) : -1;
  p->launcher_world_size = h.launcher_world_size();
  if (p->launcher_world_size > 0 && p->launcher_rank >= p->launcher_world_size)
    Damaged(p, &fs.damage_issues, off, "a process header whose launcher rank is beyond its world size");
  p->api_version = h.profiler_api_version();
  fs.p2p.SetApiVersion(h.profiler_api_version());
  // Files written before completion_source say it only in words.
  p->event_completions = h.completion_source() == trace::COMPLETION_SOURCE_CUDA_EVENTS ||
                         (h.completion_source() == trace::COMPLETION_SOURCE_UNSPECIFIED && h.completions() == "events");
  p->event_mask = h.event_mask();
  p->mono_base_ns = std::min<uint64_t>(h.mono_base_ns(), kMaxRelNs);
  p->realtime_base_ns = std::min<uint64_t>(h.realtime_base_ns(), kMaxRealtimeNs);
  p->heartbeat_ms = h.heartbeat_ms();
  p->flush_ms = h.flush_ms();
  p->nccl_version = h.nccl_version().substr(0, 64);
  p->cuda_driver_version = h.cuda_driver_version();
  p->stuck_sec = h.stuck_sec();
  fs.base = p->mono_base_ns;
  Seen(p, static_cast<int64_t>(fs.base));
}

void AddBatch(const Place& at, const trace::Batch& b, uint64_t records_before) {
  Model* m = at.m;
  FileState& fs = *at.fs;
  Proc* p = at.p;
  const uint64_t off = at.off;
  const bool whole = at.whole;
  const int64_t base = at.base();
  const int64_t t = Rel(b.time_ns());
  if (!whole) {
    if (fs.have_header) Seen(p, base + t);
    return;
  }
  if (fs.in_batch) {
    // The write before this one holds records_before minus what came
    // before it, or the framing inside it was damaged into records
    // that still parse. A jump in the sequence is writes the plugin lost
    // (Drops), not damage: records_before counts only the records that
    // reached the file (TraceFile::records_written), so it is what was
    // read, or more from a plugin that counted lost ones. Files of
    // plugins that did not count records say 0.
    const bool next = b.seq() == fs.batch_seq + 1;
    const bool counted = b.records_before() != 0;
    const bool lost_writes = b.seq() > fs.batch_seq + 1 && b.records_before() >= records_before;
    std::string why;
    if (counted && (next ? b.records_before() != records_before : !lost_writes))
      why = "a write whose records do not add up to the next batch's count (" +
            std::to_string(b.records_before()) + " records before batch " + std::to_string(b.seq()) + ", " +
            std::to_string(records_before) + " read)";
    else if (t < fs.batch_time - kBatchBackSlackNs)
      why = "a write whose time goes back from the write before";
    if (!why.empty()) {
      Damaged(p, &fs.damage_issues, fs.batch_offset, why);
      for (size_t k = fs.batch_first_op; k < p->ops.size(); ++k) m->ops[p->ops[k]].suspect = true;
    }
  }
  fs.prev_batch_time = fs.in_batch ? fs.batch_time : kNoTime;
  fs.batch_range = b.time_range();
  fs.batch_oldest = Rel(b.oldest_ns());
  fs.batch_newest = Rel(b.newest_ns());
  if (fs.batch_range && fs.batch_oldest > fs.batch_newest) {
    // Damaged in the range itself: its records are judged as without one.
    Damaged(p, &fs.damage_issues, off, "a write whose oldest record time follows its newest");
    fs.batch_range = false;
  }
  fs.in_batch = true;
  fs.batch_seq = b.seq();
  fs.batch_offset = off;
  fs.batch_time = t;
  fs.batch_first_op = p->ops.size();
  if (fs.have_header) Seen(p, base + t);
}

void AddStringDef(const Place& at, const trace::StringDef& d) {
  Model* m = at.m;
  FileState& fs = *at.fs;
  Proc* p = at.p;
  const uint64_t off = at.off;
  // The plugin defines an id once; again with another text is damage
  // in one of the two.
  const uint16_t id = m->Intern(d.text());
  auto known = fs.strings.find(d.id());
  if (known != fs.strings.end() && known->second != id) {
    fs.conflicted_strings.insert(d.id());
    Damaged(p, &fs.damage_issues, off, "string " + std::to_string(d.id()) + " defined again with another text");
  }
  fs.strings[d.id()] = id;
}

void AddCommInit(const Place& at, const trace::CommInit& c) {
  Model* m = at.m;
  FileState& fs = *at.fs;
  const uint32_t pi = at.pi;
  Proc* p = at.p;
  const uint64_t off = at.off;
  const int64_t base = at.base();
  // Values NCCL gave that no communicator can have come marked by the
  // plugin, which wrote them as given; marked values that are possible, or
  // impossible ones unmarked, are damage.
  const bool nccl_impossible = c.nccl_impossible() && !c.from_event();
  if (nccl_impossible && !(c.nranks() <= 0 || c.nranks() > kMaxCommRanks || c.rank() < 0 || c.rank() >= c.nranks())) {
    Damaged(p, &fs.damage_issues, off,
            "communicator " + std::to_string(c.comm()) + " marked as given impossible values by NCCL, with rank " +
                std::to_string(c.rank()) + " of " + std::to_string(c.nranks()) + " ranks, skipped");
    return;
  }
  if (!nccl_impossible &&
      (c.nranks() > kMaxCommRanks || (!c.from_event() && (c.rank() < 0 || c.rank() >= kMaxCommRanks)) ||
       (!c.from_event() && c.nranks() > 0 && c.rank() >= c.nranks()))) {
    Damaged(p, &fs.damage_issues, off,
            "communicator " + std::to_string(c.comm()) + " with rank " + std::to_string(c.rank()) + " of " +
                std::to_string(c.nranks()) + " ranks (at most " + std::to_string(kMaxCommRanks) + "), skipped");
    return;
  }
  at.TimeOk(c.time_ns(), "a communicator init");
  fs.p2p.SetCommNumbered(c.comm(), !nccl_impossible);
  // By hash through an index: a scan of every communicator for each
  // CommInit was quadratic in them (BENCHMARKS.md).
  uint32_t ci = kNone;
  if (c.comm_hash() != 0) {
    auto known_hash = m->comm_of_hash.find(c.comm_hash());
    if (known_hash != m->comm_of_hash.end()) ci = known_hash->second;
  }
  if (ci == kNone) {
    ci = static_cast<uint32_t>(m->comms.size());
    m->comms.emplace_back();
    m->comms.back().hash = c.comm_hash();
    if (c.comm_hash() != 0) m->comm_of_hash.emplace(c.comm_hash(), ci);
  }
  Comm& comm = m->comms[ci];
  if (!c.name().empty()) comm.name = CutName(c.name());
  // NCCL's impossible size says nothing of the communicator's.
  if (!nccl_impossible && c.nranks() > comm.nranks) comm.nranks = c.nranks();
  auto known = fs.member_of_comm.find(c.comm());
  auto mapped = fs.comms.find(c.comm());
  if (known == fs.member_of_comm.end() || mapped == fs.comms.end() || mapped->second != ci) {
    CommMember mem;
    mem.proc = pi;
    // An init that gives neither size nor hash (API v1 to v3) says 0
    // for our rank without knowing it.
    mem.rank = c.from_event() || nccl_impossible || (c.nranks() <= 0 && c.comm_hash() == 0) ? -1 : c.rank();
    mem.init_ns = base + Rel(c.time_ns());
    mem.init_offset = off;
    mem.name = CutName(c.name());
    mem.nranks = nccl_impossible ? 0 : c.nranks();
    mem.nccl_impossible = nccl_impossible;
    mem.nccl_nranks = c.nranks();
    mem.nccl_rank = c.rank();
    fs.member_of_comm[c.comm()] = static_cast<uint32_t>(comm.members.size());
    comm.members.push_back(mem);
  }
  fs.comms[c.comm()] = ci;
  Seen(p, base + Rel(c.time_ns()));
}

void AddCommFinalize(const Place& at, const trace::CommFinalize& c) {
  Model* m = at.m;
  FileState& fs = *at.fs;
  Proc* p = at.p;
  const int64_t base = at.base();
  uint32_t ci = CommFor(&fs, c.comm());
  auto mi = fs.member_of_comm.find(c.comm());
  if (ci != kNone && mi != fs.member_of_comm.end())
    m->comms[ci].members[mi->second].finalize_ns = base + Rel(c.time_ns());
  at.TimeOk(c.time_ns(), "a communicator finalize");
  Seen(p, base + Rel(c.time_ns()));
}

void AddHeartbeat(const Place& at, const trace::Heartbeat& hb) {
  Proc* p = at.p;
  const int64_t base = at.base();
  if (!at.TimeOk(hb.time_ns(), "a heartbeat")) return;
  const int64_t t = base + Rel(hb.time_ns());
  p->last_heartbeat_ns = std::max(p->last_heartbeat_ns, t);
  ++p->heartbeats;
  Seen(p, t);
}

void AddDrops(const Place& at, const trace::Drops& d) {
  Proc* p = at.p;
  const int64_t base = at.base();
  at.TimeOk(d.time_ns(), "a drops record");
  p->drops.ring_full = d.ring_full();
  p->drops.pool_exhausted = d.pool_exhausted();
  p->drops.completion_untracked = d.completion_untracked();
  p->drops.no_thread_slot = d.no_thread_slot();
  p->drops.write_failed = d.write_failed();
  p->drops.foreign_parent = d.foreign_parent();
  p->drops.bad_parent = d.bad_parent();
  p->drops.last_write_error = CutName(d.last_write_error());
  // Older plugins lost completions to any of these drops, uncounted.
  const uint64_t lost = d.completions_counted()
                            ? d.completions_lost()
                            : d.ring_full() + d.pool_exhausted() + d.no_thread_slot() + d.write_failed();
  if (lost > p->drops.completions_lost) {
    p->drops.completions_lost = lost;
    p->drops.ops_before_completion_loss = p->ops.size();  // a lost completion is of an op recorded before
  }
  Seen(p, base + Rel(d.time_ns()));
}

void AddMaskChange(const Place& at, const trace::MaskChange& c) {
  FileState& fs = *at.fs;
  Proc* p = at.p;
  const uint64_t off = at.off;
  const int64_t base = at.base();
  // Its times must lie in its write like any record's; one that does
  // not cannot say when, and the damage makes the verdict incomplete.
  if (!at.TimeOk(c.time_ns(), "a mask change") || !at.TimeOk(c.since_ns(), "a mask change's last read")) return;
  MaskChange mc;
  mc.time_ns = base + Rel(c.time_ns());
  mc.since_ns = base + Rel(c.since_ns());
  mc.old_mask = c.old_mask();
  mc.new_mask = c.new_mask();
  mc.completion_source = c.completion_source();
  std::string why;
  if (c.old_mask() > kMaskMax || c.new_mask() > kMaskMax)
    why = "a mask change past NCCL's 32-bit mask";
  else if (c.old_mask() == c.new_mask())
    why = "a mask change that changes nothing";
  else if (c.completion_source() != 0 && c.completion_source() != kMaskKernelCh &&
           c.completion_source() != kMaskKernelLaunch)
    why = "a mask change naming a completion source the plugin never has";
  else if (c.since_ns() > c.time_ns())
    why = "a mask change whose last read of the old mask follows the change";
  if (!why.empty()) {
    mc.damaged = true;
    mc.since_ns = std::min(mc.since_ns, mc.time_ns);
    Damaged(p, &fs.damage_issues, off, why);
  }
  p->mask_changes.push_back(mc);
  Seen(p, mc.time_ns);
}

void AddFinalize(const Place& at, const trace::Finalize& f) {
  Proc* p = at.p;
  const int64_t base = at.base();
  at.TimeOk(f.time_ns(), "a finalize");
  p->finalized = true;
  p->clean = f.clean();
  Seen(p, base + Rel(f.time_ns()));
}

}  // namespace ncclwatch::tools::loader_internal

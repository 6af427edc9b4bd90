#include "tools/model/file_window.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

namespace ncclwatch::tools {
namespace {

// The plugin repeats every operation in flight in each stuck report: the
// latest few say all the model needs (Proc::stucks feeds the judgement of
// what hung and the report's section).
constexpr size_t kMaxStucks = 16;
// Completions read before their operation (the model accepts them so).
constexpr size_t kMaxEarlyDone = 4096;
// Definitions are kept for ever; the plugin writes a few per communicator.
// Millions, or more than 64 MiB of them, are no trace the plugin writes.
constexpr uint64_t kMaxDefs = 1 << 20;
constexpr uint64_t kMaxDefBytes = 64ull << 20;
// Stuck reports kept, in bytes: the plugin's name at most 1,024 operations
// (about 1 MiB with their proxy progress); the latest one is always kept.
constexpr uint64_t kMaxStuckBytes = 16ull << 20;
// Records of the other kinds the plugin writes in under 200 bytes (their
// only string, Drops.last_write_error, is a strerror). One larger carries
// fields the model does not read (unknown ones, a long string): it is
// trimmed to what it reads, so that what a window keeps per record is
// bounded whatever the file holds.
constexpr size_t kMaxPlainRecordBytes = 4096;
constexpr size_t kMaxWriteErrorBytes = 256;

void Trim(trace::Record* rec) {
  if (rec->ByteSizeLong() <= kMaxPlainRecordBytes) return;
  rec->DiscardUnknownFields();
  if (rec->has_drops() && rec->drops().last_write_error().size() > kMaxWriteErrorBytes)
    rec->mutable_drops()->mutable_last_write_error()->resize(kMaxWriteErrorBytes);
}

// Reads up to `n` bytes at `offset`; false with errno on a read error.
bool ReadAt(int fd, uint64_t offset, uint64_t n, std::string* out) {
  out->assign(n, '\0');
  uint64_t got = 0;
  while (got < n) {
    const ssize_t r = pread(fd, &(*out)[got], n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) break;
    got += static_cast<uint64_t>(r);
  }
  out->resize(got);
  return true;
}

}  // namespace

void FileWindow::Reset() {
  FileWindow fresh(path_, names_);
  fresh.generation_ = generation_ + 1;
  *this = std::move(fresh);
}

void FileWindow::Follow(uint64_t chunk, std::vector<std::string>* notes) {
  grew_ = backlog_ = false;
  if (stopped_) return;
  RegularFile f = OpenRegularFile(path_);
  if (f.fd < 0) {
    if (!unreadable_said_) notes->push_back(path_ + ": cannot be read now (" + f.why + "); keeping what was read");
    unreadable_said_ = true;
    return;
  }
  unreadable_said_ = false;
  struct stat st;
  if (fstat(f.fd, &st) != 0) {
    close(f.fd);
    return;
  }
  if (known_ && (st.st_dev != dev_ || st.st_ino != ino_)) {
    notes->push_back(path_ + ": replaced by another file; read again from its start");
    Reset();
  } else if (f.size < resume_.offset) {
    notes->push_back(path_ + ": shrank from " + std::to_string(resume_.offset) + " to " + std::to_string(f.size) +
                     " bytes; read again from its start");
    Reset();
  }
  known_ = true;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  const uint64_t start = resume_.offset;
  tail_line_.clear();
  uint64_t want = std::min(f.size - start, std::max<uint64_t>(chunk, 1));
  uint64_t read = 0;
  bool failed = false;
  std::string buf;
  while (want > 0) {
    if (!ReadAt(f.fd, resume_.offset, want, &buf)) {
      notes->push_back(path_ + ": read error at offset " + std::to_string(resume_.offset) + " (" + strerror(errno) +
                       "); tried again at the next poll");
      failed = true;
      break;
    }
    const uint64_t got = buf.size();
    read = resume_.offset - start + got;
    TraceReader r;
    r.OpenPiece(path_, std::move(buf), resume_);
    trace::Record rec;
    uint64_t offset = 0;
    const uint64_t before = resume_.offset;
    while (!stopped_ && r.Next(&rec, &offset)) Ingest(&rec, offset, notes);
    TakeIssues(r.issues(), notes);
    resume_ = r.resume();
    if (stopped_ || resume_.offset > before || got < want) break;
    // No whole record in `want` bytes: one longer record. Read more of it,
    // up to the longest a record may be (the reader then calls it corrupt).
    const uint64_t left = f.size - resume_.offset;
    const uint64_t most = TraceReader::kMaxRecordBytes + 16;
    if (want >= left || want >= most) break;
    want = std::min({left, most, want * 2});
  }
  close(f.fd);
  grew_ = resume_.offset > start;
  // Not after a read error: the caller would poll again at once, and fail
  // again at once.
  backlog_ = !stopped_ && !failed && start + read < f.size;
  const bool tail = tail_;
  tail_ = !stopped_ && !backlog_ && resume_.offset < f.size;
  // A read that only met damage, or a record begun, changes what Annotate
  // says, too.
  if (grew_ || stopped_ || tail != tail_) ++generation_;
}

void FileWindow::TakeIssues(const std::vector<ReadIssue>& issues, std::vector<std::string>* notes) {
  for (const ReadIssue& i : issues) {
    // A cut record is the end of what was written so far. A newer schema
    // and unknown fields are no damage: the loader says them (Feed), and
    // a file without its header is handled by Ingest.
    if (i.kind == ReadIssue::kCorrupt || i.kind == ReadIssue::kIoError) Damage(i.offset, i.what, true, notes);
    else if (i.kind == ReadIssue::kUnparsable) Damage(i.offset, i.what, false, notes);
    else if (i.kind == ReadIssue::kCutTail) tail_line_ = path_ + ": offset " + std::to_string(i.offset) + ": " + i.what;
    else if (i.kind == ReadIssue::kNewerSchema) read_issues_.push_back(i);
    else if (i.kind == ReadIssue::kUnknownFields && !said_unknown_) said_unknown_ = true, read_issues_.push_back(i);
  }
}

bool FileWindow::ReadWhole(TraceReader* reader, ModelLoader* tee, std::vector<std::string>* notes) {
  if (tee != nullptr) tee->BeginFile(reader->path());
  trace::Record rec;
  uint64_t offset = 0;
  // The loader reads on where the window stopped (a file without its
  // header): it judges the whole file, as LoadModel does.
  while (reader->Next(&rec, &offset)) {
    if (tee != nullptr) tee->Add(rec, offset);
    if (!stopped_) Ingest(&rec, offset, notes);
  }
  TakeIssues(reader->issues(), notes);
  resume_ = reader->resume();
  tail_ = !stopped_ && reader->cut_tail();
  ++generation_;
  return tee == nullptr || tee->EndFile(reader->cut_tail(), reader->issues());
}

void FileWindow::Damage(uint64_t offset, const std::string& what, bool ends, std::vector<std::string>* notes) {
  const std::string line = path_ + ": offset " + std::to_string(offset) + ": " + what;
  notes->push_back(line + (ends ? "; the other files are still followed" : ""));
  if (!damaged_ || offset < damaged_at_) damaged_at_ = offset;
  damaged_ = true;
  damaged_end_ |= ends;
  if (issues_.size() < 16) issues_.push_back(line);
  if (ends) stopped_ = true;
}

void FileWindow::Append(Kind kind, trace::Record* rec, uint64_t offset, size_t* latest) {
  if (latest != nullptr) {
    if (*latest != SIZE_MAX) entries_[*latest].dead = true;
    *latest = entries_.size();
  }
  if (kind != Kind::kDef && kind != Kind::kStuck) Trim(rec);
  Entry e;
  e.kind = kind;
  e.offset = offset;
  e.bytes = rec->ByteSizeLong();
  e.record = std::make_unique<trace::Record>(std::move(*rec));
  entries_.push_back(std::move(e));
}

void FileWindow::FoldDone(Entry* op, const trace::OpDone& done) {
  trace::Op* o = op->record->mutable_op();
  trace::OpDone* c = o->mutable_completion();
  *c = done;
  c->clear_event_id();
  c->clear_done_ns();
  // Folded, a completion is timed from the operation's start (trace.proto,
  // Op.completion); one before the start (a corrupt clock) becomes the start.
  c->set_done_after_start_ns(done.done_ns() > o->start_ns() ? done.done_ns() - o->start_ns() : 0);
  op->bytes = op->record->ByteSizeLong();
  op->completed = true;
}

void FileWindow::Ingest(trace::Record* rec, uint64_t offset, std::vector<std::string>* notes) {
  if (!rec->has_batch() && !has_records_ && !rec->has_header()) {
    // The model reads nothing of a file without its header (it cannot
    // place its times): nothing is kept, and the loader, given no record,
    // says the file is no trace, as diagnose does. A file truncated while
    // the plugin appends starts so.
    has_records_ = true;
    latest_batch_.reset();
    Damage(offset, "the first record is not a process header: not a trace file, or one truncated while written; "
           "nothing of it is kept", true, notes);
    return;
  }
  if (!rec->has_batch()) has_records_ = true;
  // A write's Batch and the records the writer stamps as it writes
  // (heartbeats, stuck reports, the finalize) are its latest times.
  if (rec->has_batch()) last_time_ = std::max(last_time_, rec->batch().time_ns());
  if (rec->has_heartbeat()) last_time_ = std::max(last_time_, rec->heartbeat().time_ns());
  switch (rec->body_case()) {
    case trace::Record::kBatch:
      Trim(rec);
      latest_batch_ = std::make_unique<trace::Record>(std::move(*rec));
      latest_batch_offset_ = offset;
      return;
    case trace::Record::kStringDef:
      strings_[rec->string_def().id()] = rec->string_def().text();
      break;
    case trace::Record::kCommInit:
      // A file-local id names the communicator of its latest CommInit (the
      // plugin gives a finalized one's id again): the definitions stay in
      // file order, and an operation's key takes the hash of its time.
      comm_hash_[rec->comm_init().comm()] = rec->comm_init().comm_hash();
      p2p_.SetCommNumbered(rec->comm_init().comm(), !rec->comm_init().nccl_impossible());
      break;
    case trace::Record::kFinalize:
      finalized_ = true;
      break;
    case trace::Record::kHeader:
      if (!header_.found) header_ = HeaderFactsOf(rec->header(), 0);
      p2p_.SetApiVersion(rec->header().profiler_api_version());
      break;
    case trace::Record::kCommFinalize:
      break;
    // Kept for ever with the definitions, whatever is let go: it says which
    // later silences prove nothing (tools/model/model.h, MaskChange), and
    // NCCL changes the mask rarely (RAS, and its re-application at a later
    // communicator's init), so it counts against the definitions' bounds.
    case trace::Record::kMaskChange:
      break;
    case trace::Record::kOp: {
      trace::Op* o = rec->mutable_op();
      // The reader resolved the start_delta_ns chain into start_ns.
      o->clear_start_delta_ns();
      Entry e;
      e.kind = Kind::kOp;
      e.event_id = o->event_id();
      e.offset = offset;
      auto hash = comm_hash_.find(o->comm());
      auto name = strings_.find(o->func());
      if (o->kind() == trace::OP_KIND_P2P)
        o->set_p2p_seq(p2p_.Of(*o, name == strings_.end() ? Func::kOther : FuncFromName(name->second)));
      e.key = OpKeyOf(*o, hash == comm_hash_.end() ? 0 : hash->second,
                      names_->Id(name == strings_.end() ? std::string() : name->second));
      e.completed = o->has_completion();
      Trim(rec);
      e.bytes = rec->ByteSizeLong();
      e.record = std::make_unique<trace::Record>(std::move(*rec));
      if (e.event_id != 0) {
        auto early = early_done_.find(e.event_id);
        if (early != early_done_.end()) {
          FoldDone(&e, entries_[early->second].record->op_done());
          entries_[early->second].dead = true;
          entries_[early->second].record.reset();
          early_done_.erase(early);
        }
        op_by_event_[e.event_id] = entries_.size();
      }
      entries_.push_back(std::move(e));
      ++ops_;
      return;
    }
    case trace::Record::kOpDone: {
      auto it = op_by_event_.find(rec->op_done().event_id());
      if (it != op_by_event_.end() && !entries_[it->second].dead) {
        FoldDone(&entries_[it->second], rec->op_done());
        return;
      }
      // Its operation is still to come, or was let go. It waits here for
      // the first case, and is not part of the window's bytes on its own.
      const uint64_t event_id = rec->op_done().event_id();
      early_done_[event_id] = entries_.size();
      early_order_.push_back(entries_.size());
      Append(Kind::kEarlyDone, rec, offset, nullptr);
      entries_.back().event_id = event_id;
      while (early_order_.size() > kMaxEarlyDone) {
        Entry& old = entries_[early_order_.front()];
        early_order_.pop_front();
        if (old.dead) continue;
        old.dead = true;
        early_done_.erase(old.event_id);
      }
      return;
    }
    case trace::Record::kHeartbeat:
      Append(Kind::kHeartbeat, rec, offset, &heartbeat_);
      return;
    case trace::Record::kDrops:
      Append(Kind::kDrops, rec, offset, &drops_);
      return;
    case trace::Record::kGpuClock:
      Append(Kind::kGpuClock, rec, offset, &gpu_clock_);
      return;
    case trace::Record::kStuck: {
      stucks_.push_back(entries_.size());
      Append(Kind::kStuck, rec, offset, nullptr);
      uint64_t bytes = 0;
      for (size_t i : stucks_) bytes += entries_[i].bytes;
      while (stucks_.size() > kMaxStucks || (stucks_.size() > 1 && bytes > kMaxStuckBytes)) {
        entries_[stucks_.front()].dead = true;
        bytes -= entries_[stucks_.front()].bytes;
        entries_[stucks_.front()].record.reset();  // let go of its bytes now
        stucks_.pop_front();
      }
      return;
    }
    default:
      return;  // raw events: the model reads none
  }
  Append(Kind::kDef, rec, offset, nullptr);
  // A string's text is kept twice: in its record and in strings_.
  const trace::Record& kept = *entries_.back().record;
  def_bytes_ += entries_.back().bytes + (kept.has_string_def() ? kept.string_def().text().size() : 0);
  if (++defs_ > kMaxDefs || def_bytes_ > kMaxDefBytes)
    Damage(offset, "more than " + std::to_string(kMaxDefs) + " definitions or " + std::to_string(kMaxDefBytes >> 20) +
           " MiB of them (strings, communicators), which no trace the plugin writes holds; stopped following it",
           true, notes);
}

namespace {

// `r` as it stood at file time `until`: false when it came later; an
// operation that completed later loses its completion.
bool AsOf(uint64_t until, trace::Record* r) {
  switch (r->body_case()) {
    case trace::Record::kOp: {
      trace::Op* o = r->mutable_op();
      if (o->start_ns() > until) return false;
      if (o->has_completion() && o->completion().done_after_start_ns() > until - o->start_ns()) {
        o->clear_completion();
        o->set_completion_tracked(true);  // left out beside a completion
      }
      return true;
    }
    case trace::Record::kCommInit: return r->comm_init().time_ns() <= until;
    case trace::Record::kCommFinalize: return r->comm_finalize().time_ns() <= until;
    case trace::Record::kFinalize: return r->finalize().time_ns() <= until;
    case trace::Record::kHeartbeat: return r->heartbeat().time_ns() <= until;
    case trace::Record::kStuck: return r->stuck().time_ns() <= until;
    case trace::Record::kDrops: return r->drops().time_ns() <= until;
    case trace::Record::kGpuClock: return r->gpu_clock().cpu_ns() <= until;
    case trace::Record::kBatch: return r->batch().time_ns() <= until;
    case trace::Record::kMaskChange: return r->mask_change().time_ns() <= until;
    default: return true;  // the header, strings
  }
}

}  // namespace

bool FileWindow::Feed(ModelLoader* loader, uint64_t until) const {
  loader->BeginFile(path_);
  trace::Record as_of;  // a record as it stood at `until`, when that differs
  auto add = [&](const trace::Record& r, uint64_t offset) {
    if (until == UINT64_MAX) return loader->Add(r, offset);
    as_of = r;
    if (AsOf(until, &as_of)) loader->Add(as_of, offset);
  };
  for (const Entry& e : entries_)
    if (!e.dead && e.kind != Kind::kEarlyDone) add(*e.record, e.offset);
  // Last: the latest write's time is a sign of life. The operations before
  // it carry absolute start times, so the chain it starts matters to none.
  if (latest_batch_ != nullptr) add(*latest_batch_, latest_batch_offset_);
  // The process wrote after `until`: it was alive then. A heartbeat says so
  // (the window keeps only its latest heartbeat, which may be later).
  if (until != UINT64_MAX && last_time_ > until) {
    trace::Record hb;
    hb.mutable_heartbeat()->set_time_ns(until);
    loader->Add(hb, resume_.offset);
  }
  return loader->EndFile(false, read_issues_);
}

std::vector<std::pair<uint64_t, const trace::Record*>> FileWindow::Records() const {
  std::vector<std::pair<uint64_t, const trace::Record*>> out;
  for (const Entry& e : entries_)
    if (!e.dead && e.kind != Kind::kEarlyDone) out.emplace_back(e.offset, e.record.get());
  if (latest_batch_ != nullptr) out.emplace_back(latest_batch_offset_, latest_batch_.get());
  return out;
}

uint64_t FileWindow::bytes() const {
  uint64_t n = latest_batch_ != nullptr ? latest_batch_->ByteSizeLong() : 0;
  for (const Entry& e : entries_)
    if (!e.dead) n += e.bytes;
  return n;
}

void FileWindow::Annotate(Proc* p, bool at_end) const {
  p->settled_ops = settled_ops_;
  p->settled_completed = settled_completed_;
  p->cut_ops = cut_ops_;
  // The facts ModelLoader::EndFile (loader.cc) sets when its reader meets
  // damage, at the real file's offsets.
  if (damaged_) {
    if (!p->damaged || damaged_at_ < p->damaged_at) p->damaged_at = damaged_at_;
    p->damaged = true;
    p->damaged_end |= damaged_end_;
    p->issues.insert(p->issues.end(), issues_.begin(), issues_.end());
  }
  if (at_end && tail_) {
    p->cut_tail = true;
    p->issues.push_back(tail_line_);  // the reader's words, as diagnose says it
    if (p->damaged) p->damaged_end = true;
  }
}

void FileWindow::LetGo(const std::unordered_map<OpKey, bool, OpKeyHash>& settled) {
  if (settled.empty()) return;
  for (Entry& e : entries_) {
    if (e.dead || e.kind != Kind::kOp) continue;
    auto it = settled.find(e.key);
    if (it == settled.end()) continue;
    e.dead = true;
    ++settled_ops_;
    settled_completed_ += it->second;
    ++generation_;
  }
  Compact();
}

uint64_t FileWindow::Cut(uint64_t max_ops, const std::unordered_set<OpKey, OpKeyHash>& unfinished) {
  uint64_t cut = 0;
  for (int pass = 0; pass < 2 && ops_ > max_ops; ++pass)
    for (Entry& e : entries_) {
      if (ops_ <= max_ops) break;
      if (e.dead || e.kind != Kind::kOp || (pass == 0 && unfinished.count(e.key))) continue;
      e.dead = true;
      --ops_;
      ++cut;
    }
  cut_ops_ += cut;
  if (cut > 0) {
    ++generation_;
    Compact();
  }
  return cut;
}

void FileWindow::Compact() {
  size_t out = 0;
  for (size_t i = 0; i < entries_.size(); ++i)
    if (!entries_[i].dead) {
      if (out != i) entries_[out] = std::move(entries_[i]);
      ++out;
    }
  entries_.resize(out);
  op_by_event_.clear();
  early_done_.clear();
  early_order_.clear();
  stucks_.clear();
  heartbeat_ = drops_ = gpu_clock_ = SIZE_MAX;
  ops_ = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    switch (e.kind) {
      case Kind::kOp:
        ++ops_;
        if (e.event_id != 0) op_by_event_[e.event_id] = i;
        break;
      case Kind::kEarlyDone:
        early_done_[e.event_id] = i;
        early_order_.push_back(i);
        break;
      case Kind::kStuck: stucks_.push_back(i); break;
      case Kind::kHeartbeat: heartbeat_ = i; break;
      case Kind::kDrops: drops_ = i; break;
      case Kind::kGpuClock: gpu_clock_ = i; break;
      case Kind::kDef: break;
    }
  }
}

}  // namespace ncclwatch::tools

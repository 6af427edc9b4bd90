// One trace file followed while its process writes it, held as a bounded
// window: what the model needs of the file's past, not the file.
//
// Each Follow() reads only the bytes the file gained since the last one
// (pread from the offset consumed, at most a chunk), with the reader's own
// rules (TraceReader::OpenPiece): a record the end of the data cuts short
// waits for the next call (a file being written ends so), while damage is
// damage. A corrupt length ends the follow, since nothing after it can be
// framed; a record that does not parse is skipped, as diagnose skips it.
// A file that shrinks or is replaced (another inode) is read again from
// its start, with a note.
//
// What is kept: the definitions for ever (header, strings, communicators'
// inits and finalizes, the process's finalize, and each change of NCCL's
// event mask, which says what later silences prove), operations until the
// caller lets them go (LetGo, Cut), each completion folded into its
// operation, and only the latest heartbeat, drop counters, GPU clock and
// Batch and the latest few stuck reports: the model reads nothing older of
// those (a heartbeat count, a maximum time, cumulative counters), and the
// plugin repeats every operation in flight in each new stuck report. Raw
// events are not kept: the model reads none. Operations are re-encoded
// with absolute start times, so that letting records go cannot shift the
// Op start_delta_ns chain.
//
// Feed() gives the window's records to a ModelLoader as one file, each at
// its offset in the real file; Annotate then tells the model what the
// records cannot (where the real file is damaged, what was let go).
//
// A file whose first record is not its header is no trace the model can
// read: nothing of it is kept, and the follow ends with a note.
//
// Records are kept parsed, as read: a poll feeds them to the loader
// without parsing them again (a parse was half of a poll's model building:
// BENCHMARKS.md). A parsed operation takes about 340 bytes (trace::Record,
// Op and its folded OpDone), some 6 times its serialized size.
//
// Memory, whatever the file holds: one chunk while reading (one record
// longer than a chunk: up to TraceReader::kMaxRecordBytes), the operations
// the caller keeps (Cut), each trimmed to the fields the model reads when
// larger than 4 KiB serialized (the plugin's are about 50 bytes), at most
// 64 MiB of definitions, serialized (past that the follow ends, as
// damage), the latest 16 stuck reports within 16 MiB serialized (the
// latest one always), and one each of the latest heartbeat, drops, GPU
// clock and Batch, trimmed alike.
// Thread safety: one thread.

#ifndef TOOLS_MODEL_FILE_WINDOW_H_
#define TOOLS_MODEL_FILE_WINDOW_H_

#include <stdint.h>
#include <sys/types.h>

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "proto/trace.pb.h"
#include "tools/model/inputs.h"
#include "tools/model/loader.h"
#include "tools/model/model.h"
#include "tools/model/op_key.h"
#include "tools/model/p2p_numbering.h"
#include "tools/reader/reader.h"

namespace ncclwatch::tools {

class FileWindow {
 public:
  FileWindow(std::string path, FuncIds* names) : path_(std::move(path)), names_(names) {}

  // Reads what the file gained: at most `chunk` bytes, more only for one
  // record longer than that. Says what happened to the file (replaced,
  // damaged, unreadable) on `notes`, a line each, naming it.
  void Follow(uint64_t chunk, std::vector<std::string>* notes);
  // Instead of following: the whole file at once through `reader` (opened
  // on it), whose records also go to `tee` when given (BeginFile, each
  // record as read, EndFile: what ModelLoader::Read does), so that one
  // read of the file makes both the window and a whole-file model
  // (ncclwatch summarize). What `tee`'s EndFile returns (true without one).
  bool ReadWhole(TraceReader* reader, ModelLoader* tee, std::vector<std::string>* notes);

  const std::string& path() const { return path_; }
  // A record other than a Batch was read: the loader can judge the file.
  bool has_records() const { return has_records_; }
  bool finalized() const { return finalized_; }
  // Damage ended the follow: nothing more will be read from it.
  bool stopped() const { return stopped_; }
  // The last Follow read something; more is there than it read.
  bool grew() const { return grew_; }
  bool backlog() const { return backlog_; }
  uint64_t ops() const { return ops_; }
  // Grows whenever what Feed gives may have changed (records read, let go
  // or cut, the file read again): a caller that fed the same generation
  // of every window may keep the model it built.
  uint64_t generation() const { return generation_; }
  uint64_t let_go() const { return settled_ops_ + cut_ops_; }

  // The window's records to `loader`, as one file (BeginFile to EndFile),
  // in file order at their offsets in the file; with `until` (a time of the
  // file, ns after its header's mono_base_ns), as the process had written
  // it by then: records of later times left out, completions after it too
  // (the operation was in flight then), and a heartbeat at `until` when
  // the process wrote later (it was alive then). What EndFile returns.
  bool Feed(ModelLoader* loader, uint64_t until = UINT64_MAX) const;
  // The records Feed() gives, each with its offset in the file, in the
  // same order (a per-node summary keeps them: tools/summary/). They stay
  // the window's: valid until its next Follow, LetGo or Cut.
  std::vector<std::pair<uint64_t, const trace::Record*>> Records() const;
  // What the model of Feed() cannot know: where the real file is damaged
  // (its offsets, as LoadModel would set them), the operations let go, and,
  // `at_end`, that it ends in a cut record.
  void Annotate(Proc* p, bool at_end) const;
  // The process header's facts, for the screening of copies and jobs
  // (inputs.h), its size the bytes read; `found` false before the header.
  TraceHeaderFacts header() const {
    TraceHeaderFacts h = header_;
    h.size = resume_.offset;
    return h;
  }
  // The bytes of the records the window keeps (serialized, unframed).
  uint64_t bytes() const;

  // Lets go of the operations `settled` names (with whether each completed):
  // every rank finished them (tools/watch/settled.h).
  void LetGo(const std::unordered_map<OpKey, bool, OpKeyHash>& settled);
  // Keeps at most `max_ops` operations: lets go of the oldest, first those
  // `unfinished` does not name. Returns how many it let go.
  uint64_t Cut(uint64_t max_ops, const std::unordered_set<OpKey, OpKeyHash>& unfinished);

 private:
  enum class Kind : uint8_t { kDef, kOp, kEarlyDone, kHeartbeat, kDrops, kGpuClock, kStuck };
  struct Entry {
    Kind kind;
    bool dead = false;
    bool completed = false;  // kOp: its completion is folded in
    OpKey key;
    uint64_t event_id = 0;  // kOp, kEarlyDone
    uint64_t offset = 0;    // in the file
    uint64_t bytes = 0;     // the record's serialized size, which the bounds count
    std::unique_ptr<trace::Record> record;  // parsed once, as read
  };
  void Reset();
  void Ingest(trace::Record* rec, uint64_t offset, std::vector<std::string>* notes);
  // Keeps `rec` (trimmed first when it may be: see Trim in the .cc).
  void Append(Kind kind, trace::Record* rec, uint64_t offset, size_t* latest);
  void FoldDone(Entry* op, const trace::OpDone& done);
  void Damage(uint64_t offset, const std::string& what, bool ends, std::vector<std::string>* notes);
  // What a reader met: damage, a cut tail, what the loader is to say.
  void TakeIssues(const std::vector<ReadIssue>& issues, std::vector<std::string>* notes);
  // Drops dead entries and re-indexes the rest.
  void Compact();

  std::string path_;
  FuncIds* names_;
  // Point-to-point numbers where the file gives none (API v1 to v3): a
  // window that let the first ones go could not count them later.
  P2pNumbering p2p_;
  bool known_ = false;  // dev_/ino_ set
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  TraceReader::Resume resume_;
  bool has_records_ = false, finalized_ = false, stopped_ = false, grew_ = false, backlog_ = false;
  bool tail_ = false;  // the file ends in a record not yet whole
  std::string tail_line_;  // what the reader said of it
  bool unreadable_said_ = false;
  bool said_unknown_ = false;  // read_issues_ holds the first record with unknown fields

  std::vector<Entry> entries_;
  std::unique_ptr<trace::Record> latest_batch_;  // emitted last (a sign of life)
  uint64_t latest_batch_offset_ = 0;
  uint64_t last_time_ = 0;    // the latest write's time (file time)
  uint64_t ops_ = 0, defs_ = 0, def_bytes_ = 0;
  std::unordered_map<uint64_t, size_t> op_by_event_;     // live kOp entries with an event_id
  std::unordered_map<uint64_t, size_t> early_done_;      // OpDone before its Op
  std::deque<size_t> early_order_, stucks_;
  size_t heartbeat_ = SIZE_MAX, drops_ = SIZE_MAX, gpu_clock_ = SIZE_MAX;
  std::unordered_map<uint32_t, uint64_t> comm_hash_;     // file-local comm -> hash, as of now
  std::unordered_map<uint32_t, std::string> strings_;    // StringDef id -> text

  // Damage, as LoadModel records it (Proc::damaged...).
  bool damaged_ = false, damaged_end_ = false;
  uint64_t damaged_at_ = 0;
  std::vector<std::string> issues_;
  // What the reader said of the file that is no damage (a newer schema,
  // the first record with fields it does not know): the loader's to say.
  std::vector<ReadIssue> read_issues_;
  TraceHeaderFacts header_;
  uint64_t settled_ops_ = 0, settled_completed_ = 0, cut_ops_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_FILE_WINDOW_H_

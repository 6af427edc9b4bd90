// What the files of the loader share (//tools/model:loader, not for
// other users): the open file's state, the bounds on a file's times, how
// damage is recorded, and one handler per record kind. ModelLoader::Add
// (loader.cc) hands each record to its kind's handler: the definitions'
// in loader_defs.cc, the operations' in loader_ops.cc; the checks only a
// file's end allows are in loader_file_end.cc, and the rules that need
// every file in finish_load.cc.
//
// Thread safety: as ModelLoader's, one thread.

#ifndef TOOLS_MODEL_LOADER_INTERNAL_H_
#define TOOLS_MODEL_LOADER_INTERNAL_H_

#include <stdint.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "proto/trace.pb.h"
#include "tools/model/loader.h"
#include "tools/model/model.h"
#include "tools/model/p2p_numbering.h"
#include "tools/reader/reader.h"

namespace ncclwatch::tools {

// The open file's maps and counts (ModelLoader::BeginFile to EndFile).
struct ModelLoader::FileState {
  bool have_header = false;
  bool window = false;  // BeginWindow: not a whole file
  std::unordered_map<uint32_t, uint16_t> strings;          // file id -> model id
  std::unordered_map<uint32_t, uint32_t> comms;            // file comm -> model comm
  // file comm -> index in Comm::members of the model comm it maps to now (a
  // file comm that a later CommInit maps to another hash gets a new member).
  std::unordered_map<uint32_t, uint32_t> member_of_comm;
  std::unordered_map<uint64_t, uint32_t> op_by_event;      // event_id -> model op
  std::unordered_map<uint64_t, trace::OpDone> early_done;  // OpDone before its Op
  uint64_t early_done_offset = UINT64_MAX;                 // the first one's record
  uint64_t base = 0;                                       // header.mono_base_ns
  // File string ids defined twice with different texts (damage): an op
  // naming one is suspect.
  std::unordered_set<uint32_t> conflicted_strings;
  // Offsets of this file's ops' records, in file order (as Proc::ops is
  // until OrderProc).
  std::vector<uint64_t> op_offsets;
  // Batches (trace.proto): each opens a write and says how many records
  // were written before it, its sequence number and its time. Records of
  // the write stay within it (see TimeInLine).
  uint64_t records = 0;                // records read so far
  bool in_batch = false;
  uint64_t batch_seq = 0, batch_offset = 0;
  int64_t batch_time = 0;              // relative to base, the write's
  int64_t prev_batch_time = kNoTime;   // the write before's
  // The write's own range of record times, where its Batch declares one
  // (Batch.time_range): the times of records that waited before the write.
  bool batch_range = false;
  int64_t batch_oldest = 0, batch_newest = 0;
  size_t batch_first_op = 0;           // Proc::ops index of the write's first op
  uint32_t damage_issues = 0;          // consistency issues listed (at most kMaxDamageIssues)
  // Ops without completion tracking, none saying why (Op.no_completion),
  // and the first one's offset; whether any op had it.
  uint64_t untracked = 0, untracked_offset = 0;
  bool any_tracked = false;
  P2pNumbering p2p;  // where the file numbers none (API v1 to v3)
  // LoadOptions::kernel_phases: raw KernelCh event_id -> its parent's (an
  // op's), and the phases read, their op named by event_id until EndFile
  // (a folded Op record follows its phases: it waits for its completion,
  // which the last channel's stop brings, after that channel's phases).
  std::unordered_map<uint64_t, uint64_t> kernel_ch_parent;
  std::unordered_map<uint64_t, size_t> phase_by_event;  // -> phases
  std::vector<std::pair<uint64_t, KernelPhaseSpan>> phases;  // parent event_id, span (op unset)
};

namespace loader_internal {

using FileState = ModelLoader::FileState;

constexpr uint32_t kMaxDamageIssues = 8;

// How far a record's time may lie outside its write: after the write's
// time (the batch's) or before the previous write's, or outside the range
// of record times the write declares (Batch.time_range). Records of real files
// (testdata/, every one) lie within 0.1 s after and 0.24 s before; a
// damaged byte from the fifth of a time's varint on moves it by 34 s or more.
constexpr int64_t kWriteSlackNs = 1'000'000'000;
// How far a write's time may go back from the write before (files the
// tests build go back a little; the plugin's one writer never does).
constexpr int64_t kBatchBackSlackNs = 250'000'000;

// Times in a file are bounded so that no arithmetic on them can overflow,
// whatever a corrupt file says: CLOCK_MONOTONIC bases and times relative to
// them up to kMaxRelNs (9 years), CLOCK_REALTIME up to kMaxRealtimeNs (the
// year 2116). Real files are far inside.
constexpr int64_t kMaxRelNs = int64_t{1} << 58;
constexpr uint64_t kMaxRealtimeNs = uint64_t{1} << 62;

inline int64_t Rel(uint64_t t) { return static_cast<int64_t>(std::min<uint64_t>(t, kMaxRelNs)); }

// Where a record lands: the model, the open file's state and process, the
// record's offset (where damage found in it is said to be), and what the
// load keeps. Each record kind's handler reads it.
struct Place {
  Model* m;
  FileState* fs;
  uint32_t pi;
  Proc* p;
  uint64_t off;
  bool whole;          // a whole file, not a window of one
  bool kernel_phases;  // LoadOptions::kernel_phases
  int64_t base() const { return static_cast<int64_t>(fs->base); }
  // Whether a record time `t` lies within its write; else the file is
  // damaged there (`what` names the record).
  bool TimeOk(uint64_t t, const char* what) const;
};

// The process saw time `t` (its first and last).
void Seen(Proc* p, int64_t t);
// The file is damaged at `off`: a value there failed a consistency check
// (`what`, one phrase). The first few are listed in the file's issues.
void Damaged(Proc* p, uint32_t* listed, uint64_t off, const std::string& what);
// Whether a record's time `t` (relative to the base) lies within the write
// that holds it (kWriteSlackNs). Without batches (older files) any time does.
bool TimeInLine(const FileState& fs, int64_t t);
// The model communicator of the file's communicator id (kNone: none).
uint32_t CommFor(FileState* fs, uint32_t file_comm);

// One handler per record kind (loader_defs.cc, loader_ops.cc).
void AddHeader(const Place& at, const trace::ProcessHeader& h);
// `records_before`: the records the file held before this one.
void AddBatch(const Place& at, const trace::Batch& b, uint64_t records_before);
void AddStringDef(const Place& at, const trace::StringDef& d);
void AddCommInit(const Place& at, const trace::CommInit& c);
void AddCommFinalize(const Place& at, const trace::CommFinalize& c);
void AddHeartbeat(const Place& at, const trace::Heartbeat& hb);
void AddDrops(const Place& at, const trace::Drops& d);
void AddMaskChange(const Place& at, const trace::MaskChange& c);
void AddFinalize(const Place& at, const trace::Finalize& f);
void AddOp(const Place& at, const trace::Op& o);
void AddOpDone(const Place& at, const trace::OpDone& d);
void AddStuck(const Place& at, const trace::StuckReport& s);
// Kernel phases (LoadOptions::kernel_phases, whole files only).
void AddEventStart(const Place& at, const trace::EventStart& e);
void AddEventState(const Place& at, const trace::EventState& e);

// At a file's end (loader_file_end.cc).
// What only a file's end tells: its sequence numbers, completions it should
// have, operations whose completion it may have lost. `whole`: a whole file.
void CheckFileEnd(Model* m, uint32_t pi, FileState* fs, bool whole);
// The file's kernel phases, each given its op. Left out: those whose op
// the file lacks (dropped, or named by a damaged record), and those without
// both times or with a time outside the file's span (a damaged GPU delta:
// a phase ran after the process started and before the record saying so).
void KeepPhases(Model* m, uint32_t pi, FileState* fs);
// "FILE: offset N: what" for each issue, as TraceReader::IssueLines says them.
std::vector<std::string> IssueLines(const std::string& path, const std::vector<ReadIssue>& issues);

// The checks across files and the rules that need every file, once every
// file is in (finish_load.cc). False with `error` when the model cannot be
// used: no process, or processes of several jobs.
bool FinishLoad(Model* m, std::string* error);

}  // namespace loader_internal
}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_LOADER_INTERNAL_H_

// What a group summary's processes share, stored once: the group writer
// lets a process refer to an earlier record of the same file for what it
// has in common with it, and every reader puts it back on read, so that
// each process read is, field for field, the process that was written.
//
// A group holds many members of each communicator. Ranks whose chains
// agree have the same checkpoints (positions, hashes, seqs, functions) but
// perhaps the last few: a prefix then holds only the count it takes from
// the first record holding that communicator's checkpoints whole with the
// longest common leading run, and its own after them
// (CommPrefix.checkpoints_from, checkpoints_shared). Members sampling the
// same collectives (same stride, positions, functions, seqs, buckets,
// first seqs) differ only in their times: their samples then hold, per
// sample, the start and duration minus the referenced one's, and their
// held times as written (ArrivalSamples.times_from, times). A reference is
// only ever to a record whose list is whole, never to one that refers on,
// so resolving one costs one copy, never a chain. Where nothing is shared
// a field is written whole.
//
// Not for: a node's own summary (its processes share nothing it knows of:
// one rank a process), or anything but checkpoints and samples.
//
// Memory: the writer keeps, per communicator, up to kMaxReferenced
// records' prefixes and samples (pointers, and the samples decoded); the
// reader, which records were read and which of their lists are whole.
// Thread safety: each object is one thread's.

#ifndef TOOLS_MODEL_SUMMARY_SHARING_H_
#define TOOLS_MODEL_SUMMARY_SHARING_H_

#include <stddef.h>
#include <stdint.h>

#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "proto/summary.pb.h"
#include "tools/model/arrival_samples.h"

namespace ncclwatch::tools {

// The first format version whose processes may refer to earlier records.
inline constexpr uint32_t kFirstSharingVersion = 4;
// A file's references take at most one checkpoint per this many of its
// bytes up to the record taking it: what reading a summary costs must
// follow its bytes (docs/security.md), and a reference of a few bytes can
// name hundreds of checkpoints, each about 90 bytes parsed. The 16k
// benchmark's groups, deflated, take one per 19 bytes; the writer keeps to
// the bound with the bytes it wrote before the record, fewer than the
// reader counts. Samples need no bound: their times are two bytes a
// sample at least.
inline constexpr uint64_t kBytesPerSharedCheckpoint = 4;

// Decides, process by process in file order, what each shares with the
// ones written before it.
class SharingWriter {
 public:
  // Records of one communicator compared with a new one at most: the first
  // ones holding it whole. Ranks whose chains agree match the first.
  static constexpr size_t kMaxReferenced = 16;

  // `sp`, to be written as record `record` (the header is 0) after
  // `written` bytes, which must outlive this object. True with `out` its
  // form referring to earlier records where that is smaller; false where
  // it shares nothing (write `sp` as it is).
  bool Share(uint64_t record, uint64_t written, const summary::SummaryProcess& sp, summary::SummaryProcess* out);

 private:
  struct WholeSamples {
    uint64_t record;
    const summary::ArrivalSamples* samples;
    std::vector<ArrivalSample> decoded;
  };
  // Per communicator: records holding its checkpoints whole, then samples.
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, const summary::CommPrefix*>>> prefixes_;
  std::unordered_map<uint64_t, std::vector<WholeSamples>> samples_;
  uint64_t taken_ = 0;  // checkpoints taken by reference
};

// Puts back, on read, what a file's processes refer to.
class SharingReader {
 public:
  // `version`: the file's header's. Before kFirstSharingVersion a
  // reference is damage.
  explicit SharingReader(uint32_t version) : version_(version) {}

  // Record `record`'s process `sp`, whose record ends at byte `end`, with
  // its references resolved against the records read before it (Read).
  // False with `why`, a phrase naming the field and the problem
  // ("prefixes[2] (comm 0x...) takes 9 checkpoints from record 3, which
  // has 7"), on a reference out of range, forward, to a record not read,
  // to a list not whole, to a communicator that record has not, for more
  // than it holds, or past kBytesPerSharedCheckpoint; `sp` is then
  // damaged.
  bool Resolve(uint64_t record, uint64_t end, const std::vector<summary::SummaryProcess>& procs,
               summary::SummaryProcess* sp, std::string* why);
  // Record `record` was read whole, as procs[i]: later records may refer
  // to it. Call after Resolve.
  void Read(uint64_t record, size_t i) { read_[record] = i; }
  // The records `record` took something from (none: empty).
  const std::set<uint64_t>& From(uint64_t record) const;

 private:
  uint32_t version_;
  std::unordered_map<uint64_t, size_t> read_;
  // (record, comm) whose checkpoints or samples came by reference: not
  // whole, so not to be referred to.
  std::set<std::pair<uint64_t, uint64_t>> shared_prefixes_, shared_samples_;
  std::unordered_map<uint64_t, std::set<uint64_t>> from_;
  uint64_t taken_ = 0;  // checkpoints taken by reference
};

// The samples `a` refers to (`a` sets times_from and times) rebuilt from
// `whole`'s, decoded as `decoded`: every field as the member's node wrote
// it. False where `a`'s times are not one pair per sample.
bool ExpandSamples(const summary::ArrivalSamples& whole, const std::vector<ArrivalSample>& decoded,
                   summary::ArrivalSamples* a);

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_SUMMARY_SHARING_H_

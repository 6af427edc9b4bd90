// Reads an ncclwatch trace file: a stream of length-delimited
// ncclwatch.trace.Record messages, as the plugin writes it.
//
// It streams the file in chunks and never allocates from an unchecked length:
// a record longer than kMaxRecordBytes, or longer than what is left of the
// file, ends the read with an issue naming the file and the offset. A cut
// tail (the process died mid-write) is the normal end of a killed process's
// file and is reported as such, not as an error. A record that does not
// parse is skipped (the framing is intact) and reported.
//
// It also resolves encodings meant only to save bytes: Op.start_ns is filled
// from the start_delta_ns chain, so consumers read absolute times.
//
// Thread safety: one TraceReader per thread.

#ifndef TOOLS_READER_READER_H_
#define TOOLS_READER_READER_H_

#include <stdint.h>
#include <stdio.h>

#include <string>
#include <vector>

#include "proto/trace.pb.h"

namespace ncclwatch::tools {

struct ReadIssue {
  enum Kind { kCutTail, kCorrupt, kUnparsable, kUnknownFields, kNewerSchema, kNoHeader, kIoError };
  Kind kind;
  uint64_t offset;
  std::string what;  // one sentence, without the file name
};

// "a FIFO", "a character device", ... for a stat(2) st_mode.
std::string FileTypeName(unsigned mode);

// A file opened for reading only if it is a regular file: opened with
// O_NONBLOCK (a FIFO never blocks the open), then checked with fstat (a
// FIFO would block the reads, a device never end). On return the
// descriptor blocks again. Every input the tools read goes through it.
struct RegularFile {
  int fd = -1;               // the caller closes it; -1: not opened
  uint64_t size = 0;
  bool not_regular = false;  // fd < 0 because of its type (`why` names it)
  std::string why;           // fd < 0: strerror, or "not a regular file (a FIFO)"
};
RegularFile OpenRegularFile(const std::string& path);

// Up to `max` bytes from the start of the regular file `path` into `bytes`,
// and its size. False with `file.why` set when it cannot be read.
bool ReadFileHead(const std::string& path, uint64_t max, std::string* bytes, RegularFile* file);

class TraceReader {
 public:
  static constexpr uint64_t kMaxRecordBytes = 64ull << 20;

  TraceReader() = default;
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // False with `error` ("cannot open FILE: reason") when the file cannot be
  // read or is not a regular file (a FIFO is never waited on).
  bool Open(const std::string& path, std::string* error);
  // Reads from memory instead (tests, fuzzing); `name` is used in messages.
  void OpenBytes(const std::string& name, std::string bytes);

  // Where a read of a growing file stopped, to go on from there later
  // (ncclwatch watch): the offset after the last record Next returned (a
  // record the bytes cut short begins there), and the reader's state at it:
  // the Op start chain (trace.proto, Batch) and whether the first record
  // was checked to be the header.
  struct Resume {
    uint64_t offset = 0;
    uint64_t chain_ns = 0;
    bool header_checked = false;
  };
  // Reads `bytes`, the file's bytes from `from.offset` on, as the
  // continuation of an earlier read that stopped at `from` (resume()).
  // Offsets (Next, issues) are the file's. A record cut by the end of
  // `bytes` is reported as a cut tail; the next piece starts at it.
  void OpenPiece(const std::string& name, std::string bytes, const Resume& from);
  Resume resume() const { return {base_ + pos_, chain_ns_, header_checked_}; }

  // The next record and its byte offset; false at the end of the usable data.
  bool Next(trace::Record* record, uint64_t* offset);

  const std::string& path() const { return path_; }
  const std::vector<ReadIssue>& issues() const { return issues_; }
  bool cut_tail() const { return cut_tail_; }
  uint64_t records_read() const { return records_; }
  // "FILE: offset N: what" for each issue.
  std::vector<std::string> IssueLines() const;

 private:
  // Makes at least `n` bytes available at pos_ (fewer at end of file).
  size_t Fill(size_t n);
  // Whether a Batch that opens one of the next writes (by its seq) begins
  // in buf_[from, to): a record length that runs past the end of the file
  // over it was damaged, not cut by a kill.
  bool NextBatchWithin(size_t from, size_t to) const;
  void AddIssue(ReadIssue::Kind kind, uint64_t offset, std::string what);

  std::string path_;
  FILE* file_ = nullptr;
  std::string buf_;
  size_t pos_ = 0;       // read position in buf_
  uint64_t base_ = 0;    // file offset of buf_[0]
  bool eof_ = false;
  bool done_ = false;
  bool cut_tail_ = false;
  bool unknown_reported_ = false;
  bool header_checked_ = false;  // the first record that is not a Batch must be the header
  uint64_t chain_ns_ = 0;  // Op.start_delta_ns chain (see trace.proto Batch)
  uint64_t batch_seq_ = 0;  // the last Batch's seq (0: none yet)
  uint64_t records_ = 0;
  std::vector<ReadIssue> issues_;
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_READER_READER_H_

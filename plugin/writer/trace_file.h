// The trace file as the writer thread sees it: a stream of whole batches
// (length-delimited trace.proto records) appended with write(2), never a
// torn one, and an exact count of the records that did not make it.
//
// A batch is appended whole or not at all: a write that fails part way
// (disk full, RLIMIT_FSIZE, an I/O error) is cut off again, so later batches
// extend a clean stream and the page cache keeps every whole batch through
// an abort or a kill. After a failure the writer appends a loss notice
// (AppendNotice); where even that does not fit, the newest whole batches
// are given up for it, so a file that lost data always says so.
//
// No allocation after Create. Thread safety: one thread (the writer's).

#ifndef PLUGIN_WRITER_TRACE_FILE_H_
#define PLUGIN_WRITER_TRACE_FILE_H_

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <string>

namespace ncclwatch::plugin {

class TraceFile {
 public:
  TraceFile() = default;
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  // Creates `base` + `suffix` with mode `mode` (own_file.h: exclusively,
  // never through a link, the umask ignored); when the name is taken,
  // `base`.1 + `suffix`, `base`.2 + `suffix`, ... The first taken name is
  // kept in taken(), for the caller to say once.
  bool Create(const std::string& base, const std::string& suffix, uint32_t mode, std::string* error);
  // Closes the file; Create's failure path also removes it (Discard).
  void Close();
  void Discard();

  // Appends one batch: `head` (its Batch record) then `body`, holding
  // `records` records in all, of which `completions` carry an operation's
  // completion. On failure they are counted lost, the error kept, and false
  // returned; the file is as it was before.
  bool AppendBatch(const uint8_t* head, size_t head_len, const uint8_t* body, size_t body_len, uint64_t records,
                   uint64_t completions = 0);

  // Appends a loss notice of `records` records, which `encode` writes into
  // `buf` (at most `cap` bytes) from the counts as they stand, returning its
  // size (0: give up). It replaces a notice that still ends the file (its
  // counts are running totals); where it does not fit, the newest whole
  // batches after the first (the header's) are given up for it, counted
  // lost, and `encode` is called again.
  void AppendNotice(uint64_t records, const std::function<size_t(uint8_t* buf, size_t cap)>& encode);

  bool open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  uint64_t records_written() const { return records_written_; }  // records in the file
  uint64_t bytes_written() const { return bytes_written_; }
  uint64_t records_lost() const { return records_lost_; }       // records that failed to reach it
  uint64_t completions_lost() const { return completions_lost_; }  // completions among them
  const std::string& last_error() const { return last_error_; }  // strerror of the last failure
  const std::string& taken() const { return taken_; }  // what was at the first name taken; empty: none

 private:
  // Bookkeeping of a whole batch that reached the file, and its undoing.
  void Written(uint64_t bytes, uint64_t records, uint64_t completions, bool notice);
  bool Unwrite();

  int fd_ = -1;
  std::string path_;
  uint64_t good_size_ = 0;  // file size after the last whole batch
  uint64_t records_written_ = 0;
  uint64_t bytes_written_ = 0;
  uint64_t records_lost_ = 0;
  uint64_t completions_lost_ = 0;
  std::string last_error_;
  std::string taken_;
  uint8_t notice_buf_[512];
  // The newest whole batches after the first, for AppendNotice to give up.
  struct TailBatch {
    uint64_t at;  // file offset where it starts
    uint64_t bytes;
    uint64_t records;
    uint64_t completions;
    bool notice;
  };
  static constexpr uint32_t kTailBatches = 8;
  TailBatch tail_[kTailBatches] = {};
  uint32_t tail_next_ = 0;   // index of the next entry to fill, modulo kTailBatches
  uint32_t tail_count_ = 0;  // valid entries, newest at tail_next_ - 1
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_TRACE_FILE_H_

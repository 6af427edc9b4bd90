#include "plugin/writer/trace_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "plugin/writer/own_file.h"

namespace ncclwatch::plugin {

TraceFile::~TraceFile() { Close(); }

bool TraceFile::Create(const std::string& base, const std::string& suffix, uint32_t mode, std::string* error) {
  std::string why;
  for (int attempt = 0; attempt < 100; ++attempt) {
    path_ = base + (attempt == 0 ? "" : "." + std::to_string(attempt)) + suffix;
    bool taken = false;
    fd_ = CreateOwnFile(path_, mode, O_APPEND, &taken, &why);
    if (fd_ >= 0 || !taken) break;
    if (taken_.empty()) taken_ = why;
  }
  if (fd_ < 0) {
    *error = "cannot create the trace file: " + why;
    return false;
  }
  return true;
}

void TraceFile::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void TraceFile::Discard() {
  Close();
  unlink(path_.c_str());
}

bool TraceFile::AppendBatch(const uint8_t* head, size_t head_len, const uint8_t* body, size_t body_len,
                            uint64_t records, uint64_t completions) {
  if (fd_ < 0) return false;
  iovec iov[2] = {{const_cast<uint8_t*>(head), head_len}, {const_cast<uint8_t*>(body), body_len}};
  const size_t total = head_len + body_len;
  size_t done = 0;
  int err = 0;
  while (done < total) {
    // Advance the iovecs past what was written.
    iovec v[2];
    int cnt = 0;
    size_t skip = done;
    for (auto& x : iov) {
      if (skip >= x.iov_len) {
        skip -= x.iov_len;
        continue;
      }
      v[cnt].iov_base = static_cast<uint8_t*>(x.iov_base) + skip;
      v[cnt].iov_len = x.iov_len - skip;
      skip = 0;
      ++cnt;
    }
    ssize_t w = writev(fd_, v, cnt);
    if (w < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    if (w == 0) {
      err = EIO;
      break;
    }
    done += static_cast<size_t>(w);
  }
  if (err == 0) {
    Written(total, records, completions, false);
    return true;
  }
  // Cut off any part of the batch that did reach the file (O_APPEND: the
  // next write goes to the new end). If the cut fails too, the reader stops
  // at the torn record: nothing more to do here.
  if (done > 0) (void)!ftruncate(fd_, static_cast<off_t>(good_size_));
  records_lost_ += records;
  completions_lost_ += completions;
  last_error_ = strerror(err);
  return false;
}

void TraceFile::Written(uint64_t bytes, uint64_t records, uint64_t completions, bool notice) {
  // The first batch holds the header: it is never given up (Unwrite).
  if (good_size_ > 0) {
    tail_[tail_next_ % kTailBatches] = {good_size_, bytes, records, completions, notice};
    ++tail_next_;
    if (tail_count_ < kTailBatches) ++tail_count_;
  }
  good_size_ += bytes;
  records_written_ += records;
  bytes_written_ += bytes;
}

bool TraceFile::Unwrite() {
  if (tail_count_ == 0) return false;
  const TailBatch b = tail_[--tail_next_ % kTailBatches];
  --tail_count_;
  if (ftruncate(fd_, static_cast<off_t>(b.at)) != 0) return false;
  good_size_ = b.at;
  records_written_ -= b.records;
  bytes_written_ -= b.bytes;
  // A notice's records are superseded by the next one; data is lost.
  if (!b.notice) {
    records_lost_ += b.records;
    completions_lost_ += b.completions;
  }
  return true;
}

void TraceFile::AppendNotice(uint64_t records, const std::function<size_t(uint8_t* buf, size_t cap)>& encode) {
  if (fd_ < 0) return;
  if (tail_count_ > 0 && tail_[(tail_next_ - 1) % kTailBatches].notice) Unwrite();
  for (;;) {
    const size_t n = encode(notice_buf_, sizeof(notice_buf_));
    if (n == 0) return;
    const ssize_t w = write(fd_, notice_buf_, n);
    if (w == static_cast<ssize_t>(n)) {
      Written(n, records, 0, true);
      return;
    }
    if (w > 0 && ftruncate(fd_, static_cast<off_t>(good_size_)) != 0) return;
    if (!Unwrite()) return;
  }
}

}  // namespace ncclwatch::plugin

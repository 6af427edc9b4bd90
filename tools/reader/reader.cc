#include "tools/reader/reader.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/unknown_field_set.h>

#include <algorithm>

namespace ncclwatch::tools {
namespace {

constexpr size_t kChunk = 1 << 20;

bool HasUnknownFields(const google::protobuf::Message& m) {
  const auto* refl = m.GetReflection();
  if (!refl->GetUnknownFields(m).empty()) return true;
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  refl->ListFields(m, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < refl->FieldSize(m, f); ++i)
        if (HasUnknownFields(refl->GetRepeatedMessage(m, f, i))) return true;
    } else if (HasUnknownFields(refl->GetMessage(m, f))) {
      return true;
    }
  }
  return false;
}

// Whether `m` holds, at any depth, an unknown field whose number its
// message type knows: a known field of the wrong wire type, which no plugin
// writes (a newer one adds numbers, it does not retype them). A damaged
// tag byte makes one.
bool HasMistypedFields(const google::protobuf::Message& m) {
  const auto* refl = m.GetReflection();
  const google::protobuf::UnknownFieldSet& unknown = refl->GetUnknownFields(m);
  for (int i = 0; i < unknown.field_count(); ++i)
    if (m.GetDescriptor()->FindFieldByNumber(unknown.field(i).number()) != nullptr) return true;
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  refl->ListFields(m, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < refl->FieldSize(m, f); ++i)
        if (HasMistypedFields(refl->GetRepeatedMessage(m, f, i))) return true;
    } else if (HasMistypedFields(refl->GetMessage(m, f))) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string FileTypeName(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "of unknown type";
  }
}

RegularFile OpenRegularFile(const std::string& path) {
  RegularFile f;
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    f.why = strerror(errno);
    return f;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    f.why = strerror(errno);
    close(fd);
    return f;
  }
  if (!S_ISREG(st.st_mode)) {
    f.not_regular = true;
    f.why = "not a regular file (" + FileTypeName(st.st_mode) + ")";
    close(fd);
    return f;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  f.fd = fd;
  f.size = static_cast<uint64_t>(st.st_size);
  return f;
}

bool ReadFileHead(const std::string& path, uint64_t max, std::string* bytes, RegularFile* file) {
  *file = OpenRegularFile(path);
  if (file->fd < 0) return false;
  // Room for the whole file at once (it may still grow while read): the
  // merge reads thousands of summaries, and growing each string step by
  // step was a tenth of its time (BENCHMARKS.md).
  bytes->reserve(bytes->size() + static_cast<size_t>(std::min<uint64_t>(max, file->size + 1)));
  char buf[1 << 16];
  bool ok = true;
  while (bytes->size() < max) {
    const ssize_t n = read(file->fd, buf, std::min<uint64_t>(sizeof(buf), max - bytes->size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      file->why = strerror(errno);
      ok = false;
    }
    if (n <= 0) break;
    bytes->append(buf, static_cast<size_t>(n));
  }
  close(file->fd);
  file->fd = -1;
  return ok;
}

TraceReader::~TraceReader() {
  if (file_ != nullptr) fclose(file_);
}

bool TraceReader::Open(const std::string& path, std::string* error) {
  path_ = path;
  RegularFile f = OpenRegularFile(path);
  if (f.fd < 0) {
    *error = f.not_regular ? path + ": " + f.why + "; trace files are regular files" : "cannot open " + path + ": " + f.why;
    return false;
  }
  file_ = fdopen(f.fd, "rb");
  if (file_ == nullptr) {
    *error = "cannot open " + path + ": " + strerror(errno);
    close(f.fd);
    return false;
  }
  return true;
}

void TraceReader::OpenBytes(const std::string& name, std::string bytes) {
  path_ = name;
  buf_ = std::move(bytes);
  eof_ = true;
}

void TraceReader::OpenPiece(const std::string& name, std::string bytes, const Resume& from) {
  OpenBytes(name, std::move(bytes));
  base_ = from.offset;
  chain_ns_ = from.chain_ns;
  header_checked_ = from.header_checked;
}

size_t TraceReader::Fill(size_t n) {
  if (buf_.size() - pos_ >= n || eof_) return buf_.size() - pos_;
  // Drop what was consumed, then read until `n` bytes are there or EOF.
  buf_.erase(0, pos_);
  base_ += pos_;
  pos_ = 0;
  while (buf_.size() < n && !eof_) {
    // One chunk at a time: the buffer grows with the data actually read, never
    // by a record's claimed length (up to kMaxRecordBytes) ahead of it.
    const size_t want = kChunk;
    size_t old = buf_.size();
    buf_.resize(old + want);
    size_t got = fread(&buf_[old], 1, want, file_);
    buf_.resize(old + got);
    if (got < want) {
      if (ferror(file_)) AddIssue(ReadIssue::kIoError, base_ + buf_.size(), std::string("read error: ") + strerror(errno));
      eof_ = true;
    }
  }
  return buf_.size() - pos_;
}

bool TraceReader::NextBatchWithin(size_t from, size_t to) const {
  if (batch_seq_ == 0) return false;
  // A later write's Batch: the next one's own length may be what was damaged.
  // A Batch record: its length, the tag of Record.batch (field 15, length
  // delimited: 0x7a), the message's length, then Batch.seq (field 1: 0x08).
  for (size_t q = from; q + 4 <= to; ++q) {
    if (static_cast<uint8_t>(buf_[q + 1]) != 0x7a || static_cast<uint8_t>(buf_[q + 3]) != 0x08) continue;
    const size_t len = static_cast<uint8_t>(buf_[q]);
    if (len >= 0x80 || q + 1 + len > to) continue;
    trace::Record r;
    if (r.ParseFromArray(buf_.data() + q + 1, static_cast<int>(len)) && r.has_batch() &&
        r.batch().seq() > batch_seq_ && r.batch().seq() <= batch_seq_ + 64)
      return true;
  }
  return false;
}

void TraceReader::AddIssue(ReadIssue::Kind kind, uint64_t offset, std::string what) {
  issues_.push_back({kind, offset, std::move(what)});
}

bool TraceReader::Next(trace::Record* record, uint64_t* offset) {
  while (!done_) {
    size_t avail = Fill(10);
    if (avail == 0) {
      done_ = true;
      break;
    }
    const uint64_t at = base_ + pos_;
    // Varint length.
    uint64_t len = 0;
    size_t i = 0;
    bool complete = false;
    for (; i < avail && i < 10; ++i) {
      uint8_t b = static_cast<uint8_t>(buf_[pos_ + i]);
      len |= uint64_t(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        complete = true;
        ++i;
        break;
      }
    }
    if (!complete) {
      if (avail < 10 && eof_) {
        cut_tail_ = true;
        AddIssue(ReadIssue::kCutTail, at, "cut tail: the last record's length is incomplete");
      } else {
        AddIssue(ReadIssue::kCorrupt, at, "corrupt record length (varint longer than 10 bytes); stopped reading");
      }
      done_ = true;
      break;
    }
    if (len == 0) {
      // The plugin never writes an empty record; zeros are a preallocated or
      // damaged region (a tail of zeros would otherwise read as millions of
      // empty records).
      AddIssue(ReadIssue::kCorrupt, at, "zero bytes where a record should begin; the file is damaged from here, stopped reading");
      done_ = true;
      break;
    }
    if (len > kMaxRecordBytes) {
      AddIssue(ReadIssue::kCorrupt, at,
               "record length " + std::to_string(len) + " exceeds the " + std::to_string(kMaxRecordBytes >> 20) +
                   " MiB limit; the file is corrupt from here, stopped reading");
      done_ = true;
      break;
    }
    size_t have = Fill(i + len);
    if (have < i + len && eof_ && NextBatchWithin(pos_ + 1, pos_ + have)) {
      // A killed process's last write is cut short at the end of the file;
      // a length whose record would run past the end while the plugin's
      // next write follows on was damaged.
      AddIssue(ReadIssue::kCorrupt, at,
               "record length " + std::to_string(len) + " runs past the end of the file, yet a later write of the plugin follows; the file is damaged from here, stopped reading");
      done_ = true;
      break;
    }
    if (have < i + len) {
      cut_tail_ = true;
      AddIssue(ReadIssue::kCutTail, at,
               "cut tail: the last record is incomplete (" + std::to_string(have - i) + " of " + std::to_string(len) +
                   " bytes)");
      done_ = true;
      break;
    }
    const char* p = buf_.data() + pos_ + i;
    pos_ += i + len;
    record->Clear();
    if (!record->ParseFromArray(p, static_cast<int>(len))) {
      AddIssue(ReadIssue::kUnparsable, at, "record of " + std::to_string(len) + " bytes does not parse; skipped");
      continue;
    }
    if (!header_checked_ && !record->has_batch()) {
      header_checked_ = true;
      if (!record->has_header()) {
        AddIssue(ReadIssue::kNoHeader, at, "the first record is not a process header");
      } else if (record->header().schema_version() > trace::SCHEMA_VERSION_CURRENT) {
        AddIssue(ReadIssue::kNewerSchema, at,
                 "written with schema version " + std::to_string(record->header().schema_version()) +
                     ", newer than this reader's " + std::to_string(trace::SCHEMA_VERSION_CURRENT) +
                     "; fields it does not know are ignored");
      }
    }
    // Unknown fields: operations (nearly every record) are checked directly,
    // the rest through reflection.
    bool unknown = false;
    if (record->has_op()) {
      auto has = [](const google::protobuf::Message& x) { return !x.GetReflection()->GetUnknownFields(x).empty(); };
      unknown = has(*record) || has(record->op()) || (record->op().has_completion() && has(record->op().completion()));
    } else if (record->has_op_done() || record->has_batch()) {  // as common as operations: no reflection
      auto has = [](const google::protobuf::Message& x) { return !x.GetReflection()->GetUnknownFields(x).empty(); };
      unknown = has(*record) || (record->has_op_done() ? has(record->op_done()) : has(record->batch()));
    } else {
      unknown = HasUnknownFields(*record);
    }
    if (unknown && HasMistypedFields(*record)) {
      AddIssue(ReadIssue::kUnparsable, at, "record of " + std::to_string(len) +
                                               " bytes has a known field of the wrong type (damaged); skipped");
      continue;
    }
    if (unknown && !unknown_reported_) {
      unknown_reported_ = true;
      AddIssue(ReadIssue::kUnknownFields, at, "record has fields this reader does not know (a newer plugin?); ignored");
    }
    // Resolve Op start times (a delta chain within each Batch) to start_ns.
    if (record->has_batch()) {
      chain_ns_ = record->batch().time_ns();
      batch_seq_ = record->batch().seq();
    } else if (record->has_op() && record->op().start_delta_ns() != 0) {
      // Unsigned: a corrupt delta wraps instead of overflowing (undefined).
      chain_ns_ += static_cast<uint64_t>(record->op().start_delta_ns());
      record->mutable_op()->set_start_ns(chain_ns_);
    } else if (record->has_op() && record->op().start_ns() == 0) {
      record->mutable_op()->set_start_ns(chain_ns_);  // a delta of zero
    }
    ++records_;
    *offset = at;
    return true;
  }
  return false;
}

std::vector<std::string> TraceReader::IssueLines() const {
  std::vector<std::string> out;
  for (const auto& i : issues_) out.push_back(path_ + ": offset " + std::to_string(i.offset) + ": " + i.what);
  return out;
}

}  // namespace ncclwatch::tools

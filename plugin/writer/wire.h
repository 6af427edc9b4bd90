// Append-only protobuf wire-format encoder, so the plugin writes trace.proto
// without linking libprotobuf (the host process may carry its own copy).
//
// Wire is a view over a caller-owned byte buffer; nothing allocates. Fields
// with default values (0, false, empty) are skipped, as proto3 does. A nested
// message is opened with BeginMessage(), which reserves one length byte, and
// closed with EndMessage(), which moves the body when its length needs more
// bytes. If the buffer would overflow, the writer marks itself failed and
// stops writing; the caller checks ok() and discards the partial record.
//
// Thread safety: none; one Wire per thread.

#ifndef PLUGIN_WRITER_WIRE_H_
#define PLUGIN_WRITER_WIRE_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

namespace ncclwatch::plugin {

class Wire {
 public:
  Wire(uint8_t* buf, size_t cap) : buf_(buf), cap_(cap) {}

  size_t size() const { return pos_; }
  bool ok() const { return ok_; }
  const uint8_t* data() const { return buf_; }
  void Reset() {
    pos_ = 0;
    ok_ = true;
  }
  // Drops everything after `mark` (e.g. a record that did not fit).
  void Truncate(size_t mark) {
    pos_ = mark;
    ok_ = true;
  }

  // A varint's bytes: 7 bits each, low first (1 to 10).
  static size_t VarintSize(uint64_t v) { return 1 + (63 - static_cast<size_t>(__builtin_clzll(v | 1))) / 7; }
  // Writes `v` as a varint at `p` (room for VarintSize(v) bytes); returns
  // the byte after it. The one varint writer of the plugin's encoding, and of
  // the test trace builder's framing.
  static uint8_t* PutVarint(uint8_t* p, uint64_t v) {
    while (v >= 0x80) {
      *p++ = static_cast<uint8_t>(v | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<uint8_t>(v);
    return p;
  }

  void Varint(uint64_t v) {
    if (!Reserve(10)) return;
    pos_ = static_cast<size_t>(PutVarint(buf_ + pos_, v) - buf_);
  }
  void Tag(uint32_t field, uint32_t wire_type) { Varint((uint64_t{field} << 3) | wire_type); }

  // Integer fields (varint). Signed int32/int64 fields use two's complement.
  void U64(uint32_t field, uint64_t v) {
    if (v == 0) return;
    Tag(field, 0);
    Varint(v);
  }
  void I64(uint32_t field, int64_t v) { U64(field, static_cast<uint64_t>(v)); }
  void I32(uint32_t field, int32_t v) { U64(field, static_cast<uint64_t>(static_cast<int64_t>(v))); }
  void Bool(uint32_t field, bool v) { U64(field, v ? 1 : 0); }
  // sint32/sint64 (zigzag).
  void S64(uint32_t field, int64_t v) {
    U64(field, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void Double(uint32_t field, double v) {
    if (v == 0) return;
    Tag(field, 1);
    if (!Reserve(8)) return;
    memcpy(buf_ + pos_, &v, 8);
    pos_ += 8;
  }
  void Bytes(uint32_t field, const void* p, size_t n) {
    if (n == 0) return;
    Tag(field, 2);
    Varint(n);
    if (!Reserve(n)) return;
    memcpy(buf_ + pos_, p, n);
    pos_ += n;
  }
  void String(uint32_t field, const char* s) {
    if (s != nullptr) Bytes(field, s, strlen(s));
  }

  // Nested messages. Returns a token for EndMessage. An empty message is kept
  // (a oneof member must be present even when all its fields are default).
  size_t BeginMessage(uint32_t field) {
    Tag(field, 2);
    size_t at = pos_;
    if (Reserve(1)) buf_[pos_++] = 0;
    return at;
  }
  void EndMessage(size_t at) {
    if (!ok_) return;
    size_t body = pos_ - at - 1;
    size_t lsize = VarintSize(body);
    if (lsize > 1) {
      if (!Reserve(lsize - 1)) return;
      memmove(buf_ + at + lsize, buf_ + at + 1, body);
      pos_ += lsize - 1;
    }
    PutVarint(buf_ + at, body);
  }

  // A top-level length-delimited record: varint length, then the message.
  size_t BeginRecord() {
    size_t at = pos_;
    if (Reserve(1)) buf_[pos_++] = 0;
    return at;
  }
  void EndRecord(size_t at) { EndMessage(at); }

 private:
  bool Reserve(size_t n) {
    if (!ok_ || pos_ + n > cap_) {
      ok_ = false;
      return false;
    }
    return true;
  }

  uint8_t* buf_;
  size_t cap_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace ncclwatch::plugin

#endif  // PLUGIN_WRITER_WIRE_H_

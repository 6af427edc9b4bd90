#include "tools/fr/pickle.h"

#include <stdint.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ncclwatch::tools {
namespace {

using Kind = PyValue::Kind;

// Bytes with NULs in them; the pickles below come from Python's
// pickle.dumps unless they say they are made by hand.
template <size_t N>
std::string P(const char (&s)[N]) {
  return std::string(s, N - 1);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Dump(int rank) { return ReadAll("testdata/gpu/torch_skip/fr/nccl_trace_rank_" + std::to_string(rank)); }

PyRef Parse(const std::string& bytes) {
  PickleResult r = ParsePickle(bytes);
  EXPECT_TRUE(r.value != nullptr) << r.error;
  EXPECT_EQ(r.error, "");
  return r.value;
}

std::string Error(const std::string& bytes) {
  PickleResult r = ParsePickle(bytes);
  EXPECT_EQ(r.value, nullptr);
  return r.error;
}

// What a walk of the tree sees, to compare with the same walk in Python
// (bool counted apart from int, as in FR dumps they mean different things).
struct Totals {
  uint64_t values = 0;
  uint64_t int_sum = 0;  // modulo 2^64
  uint64_t str_bytes = 0;
  uint64_t trues = 0;
  uint64_t nones = 0;
  int depth = 0;
};

void Walk(const PyValue& v, int depth, Totals* t) {
  ++t->values;
  t->depth = std::max(t->depth, depth);
  switch (v.kind) {
    case Kind::kInt: t->int_sum += static_cast<uint64_t>(v.i); break;
    case Kind::kStr: t->str_bytes += v.s.size(); break;
    case Kind::kBool: t->trues += v.b; break;
    case Kind::kNone: ++t->nones; break;
    case Kind::kList:
    case Kind::kTuple:
      for (const PyRef& x : v.items) Walk(*x, depth + 1, t);
      break;
    case Kind::kDict:
      for (const auto& [k, x] : v.entries) {
        Walk(*k, depth + 1, t);
        Walk(*x, depth + 1, t);
      }
      break;
    default: break;
  }
}

TEST(Pickle, FlightRecorderDumpRank0) {
  const std::string bytes = Dump(0);
  ASSERT_EQ(bytes.size(), 3239u);
  PyRef d = Parse(bytes);
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->kind, Kind::kDict);
  std::vector<std::string> keys;
  for (const auto& [k, v] : d->entries) {
    ASSERT_TRUE(k->IsStr());
    keys.push_back(k->s);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"version", "pg_config", "comm_lib_version", "pg_status", "entries"}));
  ASSERT_NE(d->Get("version"), nullptr);
  EXPECT_EQ(d->Get("version")->s, "2.10");
  EXPECT_EQ(d->Get("comm_lib_version")->s, "2.28.9");
  EXPECT_EQ(d->Get("nope"), nullptr);
  EXPECT_EQ(d->Get("version")->Get("x"), nullptr);  // not a dict

  const PyValue* pg = d->Get("pg_config")->Get("0");
  ASSERT_NE(pg, nullptr);
  EXPECT_EQ(pg->Get("name")->s, "0");
  EXPECT_EQ(pg->Get("desc")->s, "default_pg");
  EXPECT_EQ(pg->Get("ranks")->s, "[0, 1, 2, 3]");
  const PyValue* status = d->Get("pg_status")->Get("0");
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(status->Get("last_enqueued_collective")->i, 15);
  EXPECT_EQ(status->Get("last_started_collective")->i, -1);
  EXPECT_EQ(status->Get("last_completed_collective")->i, 12);

  const PyValue* entries = d->Get("entries");
  ASSERT_EQ(entries->kind, Kind::kList);
  ASSERT_EQ(entries->items.size(), 15u);
  EXPECT_EQ(entries->items[0]->Get("time_created_ns")->i, 1795301141905063087);  // LONG1 of 8 bytes
  const PyValue& last = *entries->items.back();
  EXPECT_EQ(last.Get("collective_seq_id")->i, 15);
  EXPECT_EQ(last.Get("profiling_name")->s, "nccl:broadcast");
  EXPECT_EQ(last.Get("state")->s, "scheduled");
  EXPECT_TRUE(last.Get("time_discovered_completed_ns")->IsNone());
  EXPECT_EQ(last.Get("retired")->kind, Kind::kBool);
  EXPECT_FALSE(last.Get("retired")->b);
  const PyValue* group = last.Get("process_group");
  ASSERT_EQ(group->kind, Kind::kTuple);
  ASSERT_EQ(group->items.size(), 2u);
  EXPECT_EQ(group->items[0]->s, "0");
  EXPECT_EQ(group->items[1]->s, "default_pg");
  const PyValue* sizes = last.Get("input_sizes");
  ASSERT_EQ(sizes->items.size(), 1u);
  EXPECT_EQ(sizes->items[0]->items[0]->i, 262144);
  const PyValue* frames = last.Get("frames");
  ASSERT_EQ(frames->items.size(), 4u);
  EXPECT_EQ(frames->items[2]->Get("line")->i, 131);
  EXPECT_EQ(frames->items[2]->Get("name")->s, "main");
  EXPECT_EQ(frames->items[0]->Get("line")->i, 2968);
}

// Totals of the same walk in Python over pickle.load of each dump.
TEST(Pickle, FlightRecorderDumpsMatchPython) {
  const Totals want[4] = {
      {1212, 0xa0b327adb942831eull, 9878, 12, 18, 0},
      {1212, 0xa0b327adaf097477ull, 9878, 12, 18, 0},
      {1212, 0xa0b327adc49993d3ull, 9878, 12, 18, 0},
      {1133, 0x87c8f6cd0c15692aull, 9236, 12, 16, 0},
  };
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE(rank);
    PyRef d = Parse(Dump(rank));
    ASSERT_NE(d, nullptr);
    Totals t;
    Walk(*d, 1, &t);
    EXPECT_EQ(t.values, want[rank].values);
    EXPECT_EQ(t.int_sum, want[rank].int_sum);
    EXPECT_EQ(t.str_bytes, want[rank].str_bytes);
    EXPECT_EQ(t.trues, want[rank].trues);
    EXPECT_EQ(t.nones, want[rank].nones);
    EXPECT_EQ(d->Get("entries")->items.size(), rank == 3 ? 14u : 15u);
  }
}

// {'a': [1, -1, 255, 256, 65535, 65536, -2**31, 2**31-1, 2**31, -2**40, 2**63-1, -2**63],
//  'f': 1.5, 'g': -0.0, 't': (1, (2, 3), (), ('a',), ('a', 'b', 'c', 'd')),
//  'n': None, 'y': True, 'z': False}, protocol 2.
TEST(Pickle, Protocol2Scalars) {
  PyRef d = Parse(P(
      "\x80\x02}q\x00(X\x01\x00\x00\x00"
      "aq\x01]q\x02(K\x01J\xff\xff\xff\xffK\xffM\x00\x01M\xff\xffJ\x00\x00\x01\x00J\x00\x00\x00\x80J\xff\xff\xff"
      "\x7f\x8a\x05\x00\x00\x00\x80\x00\x8a\x06\x00\x00\x00\x00\x00\xff\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f"
      "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"
      "eX\x01\x00\x00\x00"
      "fq\x03G?\xf8\x00\x00\x00\x00\x00\x00X\x01\x00\x00\x00gq\x04G\x80\x00\x00\x00\x00\x00\x00\x00X\x01\x00\x00"
      "\x00tq\x05(K\x01K\x02K\x03\x86q\x06)h\x01\x85q\x07(h\x01X\x01\x00\x00\x00"
      "bq\x08X\x01\x00\x00\x00"
      "cq\x09X\x01\x00\x00\x00"
      "dq\x0atq\x0btq\x0cX\x01\x00\x00\x00nq\x0dNX\x01\x00\x00\x00yq\x0e\x88X\x01\x00\x00\x00zq\x0f\x89u."));
  ASSERT_NE(d, nullptr);
  const PyValue* a = d->Get("a");
  ASSERT_EQ(a->kind, Kind::kList);
  const std::vector<int64_t> ints = {1,         -1,         255,        256,           65535,     65536,
                                     INT32_MIN, INT32_MAX,  2147483648, -1099511627776, INT64_MAX, INT64_MIN};
  ASSERT_EQ(a->items.size(), ints.size());
  for (size_t i = 0; i < ints.size(); ++i) {
    EXPECT_EQ(a->items[i]->kind, Kind::kInt);
    EXPECT_EQ(a->items[i]->i, ints[i]) << i;
  }
  EXPECT_EQ(d->Get("f")->kind, Kind::kFloat);
  EXPECT_EQ(d->Get("f")->f, 1.5);
  EXPECT_EQ(d->Get("g")->f, 0.0);
  EXPECT_TRUE(std::signbit(d->Get("g")->f));
  EXPECT_TRUE(d->Get("n")->IsNone());
  EXPECT_EQ(d->Get("y")->kind, Kind::kBool);
  EXPECT_TRUE(d->Get("y")->b);
  EXPECT_FALSE(d->Get("z")->b);

  const PyValue* t = d->Get("t");
  ASSERT_EQ(t->kind, Kind::kTuple);
  ASSERT_EQ(t->items.size(), 5u);
  EXPECT_EQ(t->items[0]->i, 1);
  ASSERT_EQ(t->items[1]->items.size(), 2u);  // TUPLE2
  EXPECT_EQ(t->items[1]->items[1]->i, 3);
  EXPECT_EQ(t->items[2]->kind, Kind::kTuple);  // EMPTY_TUPLE
  EXPECT_TRUE(t->items[2]->items.empty());
  ASSERT_EQ(t->items[3]->items.size(), 1u);  // TUPLE1 of a memo reference
  EXPECT_EQ(t->items[3]->items[0]->s, "a");
  ASSERT_EQ(t->items[4]->items.size(), 4u);  // TUPLE over a MARK
  EXPECT_EQ(t->items[4]->items[3]->s, "d");
  EXPECT_EQ(t->items[4]->items[0].get(), d->entries[0].first.get());  // 'a' pickled once
}

// {'b': b'xy', 'u': 'zzz'}, protocol 3; then BINBYTES, made by hand.
TEST(Pickle, Protocol3Bytes) {
  PyRef d = Parse(P("\x80\x03}q\x00(X\x01\x00\x00\x00"
                    "bq\x01"
                    "C\x02xyq\x02X\x01\x00\x00\x00uq\x03X\x03\x00\x00\x00zzzq\x04u."));
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->Get("b")->kind, Kind::kBytes);
  EXPECT_EQ(d->Get("b")->s, "xy");
  EXPECT_EQ(d->Get("u")->kind, Kind::kStr);
  EXPECT_EQ(d->Get("u")->s, "zzz");
  PyRef b = Parse(P("\x80\x03"
                    "B\x03\x00\x00\x00"
                    "a\0c."));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->kind, Kind::kBytes);
  EXPECT_EQ(b->s, std::string("a\0c", 3));
}

// {'k': ['s', b'b', (1, 2)], 'e': 2.5}, protocol 4: FRAME, MEMOIZE, SHORT_BINUNICODE.
TEST(Pickle, Protocol4) {
  PyRef d = Parse(P(
      "\x80\x04\x95(\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01k\x94]\x94(\x8c\x01s\x94"
      "C\x01"
      "b\x94K\x01K\x02\x86\x94"
      "e\x8c\x01"
      "e\x94G@\x04\x00\x00\x00\x00\x00\x00u."));
  ASSERT_NE(d, nullptr);
  const PyValue* k = d->Get("k");
  ASSERT_EQ(k->items.size(), 3u);
  EXPECT_EQ(k->items[0]->s, "s");
  EXPECT_EQ(k->items[1]->kind, Kind::kBytes);
  EXPECT_EQ(k->items[1]->s, "b");
  EXPECT_EQ(k->items[2]->items[1]->i, 2);
  EXPECT_EQ(d->Get("e")->f, 2.5);
}

// [b'', 'é', 1e100], protocol 5.
TEST(Pickle, Protocol5) {
  PyRef l = Parse(P("\x80\x05\x95\x16\x00\x00\x00\x00\x00\x00\x00]\x94(C\x00\x94\x8c\x02\xc3\xa9\x94"
                    "GT\xb2I\xad%\x94\xc3}e."));
  ASSERT_NE(l, nullptr);
  ASSERT_EQ(l->items.size(), 3u);
  EXPECT_EQ(l->items[0]->kind, Kind::kBytes);
  EXPECT_EQ(l->items[0]->s, "");
  EXPECT_EQ(l->items[1]->s, "\xc3\xa9");
  EXPECT_EQ(l->items[2]->f, 1e100);
}

// By hand, the opcodes Python's pickler does not write for small values:
// POP (of an object and of a MARK), POP_MARK, DUP, BINUNICODE8, BINBYTES8,
// LONG_BINPUT, LONG_BINGET, LONG4, LONG1 of 0 and 3 bytes, SETITEM.
// Python loads it as ['hi', b'z', 'hi', 32767, 0, 0, -8388608, (1, 2, 3, 4), {'k': 5}].
TEST(Pickle, RareOpcodes) {
  PyRef l = Parse(P(
      "\x80\x02](K\x07"
      "0N1(0\x8d\x02\x00\x00\x00\x00\x00\x00\x00hir\x00\x01\x00\x00"
      "a20\x8e\x01\x00\x00\x00\x00\x00\x00\x00zaj\x00\x01\x00\x00"
      "a\x8b\x02\x00\x00\x00\xff\x7f"
      "a\x8b\x00\x00\x00\x00"
      "a\x8a\x00"
      "a\x8a\x03\x00\x00\x80"
      "a(K\x01K\x02K\x03K\x04ta}X\x01\x00\x00\x00kK\x05sa."));
  ASSERT_NE(l, nullptr);
  ASSERT_EQ(l->items.size(), 9u);
  EXPECT_EQ(l->items[0]->s, "hi");
  EXPECT_EQ(l->items[1]->kind, Kind::kBytes);
  EXPECT_EQ(l->items[1]->s, "z");
  EXPECT_EQ(l->items[2].get(), l->items[0].get());
  EXPECT_EQ(l->items[3]->i, 32767);
  EXPECT_EQ(l->items[4]->i, 0);
  EXPECT_EQ(l->items[5]->i, 0);
  EXPECT_EQ(l->items[6]->i, -8388608);
  ASSERT_EQ(l->items[7]->items.size(), 4u);
  EXPECT_EQ(l->items[7]->items[3]->i, 4);
  EXPECT_EQ(l->items[8]->Get("k")->i, 5);
}

// A list memoized while empty, filled, then referenced twice: the references
// see it filled (as the FR dumps' dicts are memoized before SETITEMS).
TEST(Pickle, MemoSeesLaterItems) {
  PyRef l = Parse(P("\x80\x02]q\x00(K\x01K\x02"
                    "e0](h\x00h\x00"
                    "e."));
  ASSERT_NE(l, nullptr);
  ASSERT_EQ(l->items.size(), 2u);
  ASSERT_EQ(l->items[0]->items.size(), 2u);
  EXPECT_EQ(l->items[0]->items[1]->i, 2);
  EXPECT_EQ(l->items[0].get(), l->items[1].get());
}

// A repeated key: both kept in order, Get gives the last, as Python's dict.
TEST(Pickle, RepeatedKey) {
  PyRef d = Parse(P("\x80\x02}(X\x01\x00\x00\x00"
                    "aK\x01X\x01\x00\x00\x00"
                    "aK\x02X\x01\x00\x00\x00"
                    "bK\x03u."));
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->entries.size(), 3u);
  EXPECT_EQ(d->Get("a")->i, 2);
  EXPECT_EQ(d->Get("b")->i, 3);
}

// Non-str keys are kept; Get looks up str keys only.
TEST(Pickle, OtherKeys) {
  PyRef d = Parse(P("\x80\x02}(K\x01K\x02NK\x03(K\x01K\x02tK\x04u."));  // {1: 2, None: 3, (1, 2): 4}
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->entries.size(), 3u);
  EXPECT_EQ(d->entries[0].first->i, 1);
  EXPECT_TRUE(d->entries[1].first->IsNone());
  EXPECT_EQ(d->entries[2].first->kind, Kind::kTuple);
  EXPECT_EQ(d->entries[2].second->i, 4);
  EXPECT_EQ(d->Get("1"), nullptr);
}

TEST(Pickle, UnsupportedOpcodes) {
  // collections.OrderedDict(), protocol 2: GLOBAL then REDUCE.
  EXPECT_EQ(Error(P("\x80\x02"
                    "ccollections\x0aOrderedDict\x0aq\x00)Rq\x01.")),
            "offset 2: opcode 0x63 (GLOBAL) not supported: not a Flight Recorder dump");
  // The same, protocol 4: STACK_GLOBAL.
  EXPECT_EQ(Error(P("\x80\x04\x95\x22\x00\x00\x00\x00\x00\x00\x00\x8c\x0b"
                    "collections\x94\x8c\x0bOrderedDict\x94\x93\x94)R\x94.")),
            "offset 39: opcode 0x93 (STACK_GLOBAL) not supported: not a Flight Recorder dump");
  // {1}, protocol 4: EMPTY_SET.
  EXPECT_EQ(Error(P("\x80\x04\x95\x07\x00\x00\x00\x00\x00\x00\x00\x8f\x94(K\x01\x90.")),
            "offset 11: opcode 0x8f (EMPTY_SET) not supported: not a Flight Recorder dump");
  EXPECT_EQ(Error(P("\x80\x02NR.")), "offset 3: opcode 0x52 (REDUCE) not supported: not a Flight Recorder dump");
  EXPECT_EQ(Error(P("I1\n.")), "offset 0: opcode 0x49 (INT) not supported: not a Flight Recorder dump");
  EXPECT_EQ(Error(P("\x80\x02\xff.")), "offset 2: byte 0xff is not a pickle opcode");
  EXPECT_EQ(Error(P("\x80\x06N.")), "offset 0: protocol 6 is newer than Python's highest, 5");
}

// l = []; l.append(l), protocol 2; and a = []; a.append([a]); and d = {}; d['d'] = d.
TEST(Pickle, ReferenceCyclesAreRefused) {
  EXPECT_EQ(Error(P("\x80\x02]q\x00h\x00"
                    "a.")),
            "offset 7: APPEND puts a list into itself (a reference cycle)");
  EXPECT_EQ(Error(P("\x80\x02]q\x00]q\x01h\x00"
                    "aa.")),
            "offset 11: APPEND into a list already inside another container "
            "(pickle.dumps writes that only for a reference cycle)");
  EXPECT_EQ(Error(P("\x80\x02}q\x00X\x01\x00\x00\x00"
                    "dq\x01h\x00s.")),
            "offset 15: SETITEM puts a dict into itself (a reference cycle)");
  // Through APPENDS, and a list changed after it was placed (no cycle, but
  // no pickle.dumps writes it).
  EXPECT_EQ(Error(P("\x80\x02]q\x00(h\x00"
                    "e.")),
            "offset 8: APPENDS puts a list into itself (a reference cycle)");
  EXPECT_EQ(Error(P("\x80\x02]q\x00]h\x00"
                    "a0h\x00K\x01"
                    "a.")),
            "offset 14: APPEND into a list already inside another container "
            "(pickle.dumps writes that only for a reference cycle)");
}

std::string NestedLists(int depth) {
  return "\x80\x02" + std::string(depth, ']') + std::string(depth - 1, 'a') + ".";
}

TEST(Pickle, Depth) {
  PyRef l = Parse(NestedLists(kMaxDepth));
  ASSERT_NE(l, nullptr);
  Totals t;
  Walk(*l, 1, &t);
  EXPECT_EQ(t.depth, kMaxDepth);
  EXPECT_EQ(Error(NestedLists(kMaxDepth + 1)),
            "offset " + std::to_string(2 + kMaxDepth + 1 + kMaxDepth - 1) + ": containers nested more than 64 deep");
  // Tuples: () then TUPLE1 64 times.
  EXPECT_EQ(Error("\x80\x02)" + std::string(kMaxDepth, '\x85') + "."),
            "offset " + std::to_string(3 + kMaxDepth - 1) + ": containers nested more than 64 deep");
  EXPECT_NE(Parse("\x80\x02)" + std::string(kMaxDepth - 1, '\x85') + "."), nullptr);
}

// L0 = [], L(k+1) = [Lk, Lk] through the memo: 10 bytes a level, 2^(k+1) - 1
// values to a walk. Refused once a copy would pass kMaxValueBytes.
std::string Doubling(int levels) {
  std::string s = P("\x80\x02]");
  for (int i = 0; i < levels; ++i) s += P("q\x00" "0](h\x00h\x00" "e");
  return s + ".";
}

TEST(Pickle, SharingCannotExplodeAWalk) {
  // A list costs kValueCost: 2^23 - 1 lists fit in kMaxValueBytes, 2^24 - 1 do not.
  static_assert(kMaxValueBytes == (uint64_t{1} << 28) && kValueCost == 32);
  PyRef l = Parse(Doubling(22));
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->items[0].get(), l->items[1].get());
  const std::string hostile = Doubling(23);
  EXPECT_EQ(Error(hostile),
            "offset " + std::to_string(hostile.size() - 2) +
                ": APPENDS makes a value that a copy would make more than 268435456 bytes of (a value the memo "
                "shares counts at each reference)");
}

// A Flight Recorder dump of `entries` references to one memoized entry,
// whose frames are `frames` references to one memoized frame with a file
// name of `name_bytes` (by hand: pickle.dumps of such a dict writes these
// opcodes). `*last_appends` is the offset of the APPENDS that fills the
// entries.
std::string SharedEntries(size_t entries, size_t frames, size_t name_bytes, size_t* last_appends) {
  auto str = [](const std::string& v) {
    std::string s = "X";
    const uint32_t n = static_cast<uint32_t>(v.size());
    for (int i = 0; i < 4; ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
    return s + v;
  };
  std::string s = P("\x80\x02}(") + str("entries") + "](}(" + str("collective_seq_id") + "K\x01" +
                  str("profiling_name") + str("nccl:all_reduce") + str("frames") + "](}(" + str("filename") +
                  str(std::string(name_bytes, 'f')) + str("line") + "K\x07" + str("name") + str("main") + "u" +
                  P("q\x01");
  for (size_t i = 1; i < frames; ++i) s += P("h\x01");
  s += "eu" + P("q\x02");
  for (size_t i = 1; i < entries; ++i) s += P("h\x02");
  *last_appends = s.size();
  return s + "eu.";
}

// A hostile dump: 14 KB that a copy expands to 8 GB (a
// thousand references to an entry of a thousand references to an 8 KB
// frame). It used to pass (7 M values, under the old count of values) and
// made the Flight Recorder reader copy the frame a million times, until
// std::bad_alloc. It is refused where the copy passes kMaxValueBytes,
// before anything is copied; the same with 32 entries fits.
TEST(Pickle, MemoReferencesAreCountedInBytes) {
  size_t at = 0;
  const std::string hostile = SharedEntries(1000, 1000, 8192, &at);
  EXPECT_LT(hostile.size(), 16u << 10);
  EXPECT_EQ(Error(hostile), "offset " + std::to_string(at) +
                                ": APPENDS makes a value that a copy would make more than 268435456 bytes of (a "
                                "value the memo shares counts at each reference)");
  PyRef ok = Parse(SharedEntries(30, 1000, 8192, &at));
  ASSERT_NE(ok, nullptr);
  const PyValue* entries = ok->Get("entries");
  ASSERT_NE(entries, nullptr);
  ASSERT_EQ(entries->items.size(), 30u);
  EXPECT_EQ(entries->items[0].get(), entries->items[29].get());  // shared, not copied
  const PyValue* frames = entries->items[0]->Get("frames");
  ASSERT_NE(frames, nullptr);
  ASSERT_EQ(frames->items.size(), 1000u);
  EXPECT_EQ(frames->items[0]->Get("filename")->s.size(), 8192u);
}

// What the parser holds is counted too: a large input of small values
// (each None costs a node) is refused once they pass kMaxValueBytes,
// before the input's end.
TEST(Pickle, HeldValuesAreCountedInBytes) {
  std::string s = P("\x80\x02]");
  s += std::string(3u << 20, 'N');  // 3 M Nones on the stack: refused
  s += ".";
  const std::string e = Error(s);
  EXPECT_NE(e.find(": the values read take more than 268435456 bytes"), std::string::npos) << e;
  EXPECT_LT(std::stoul(e.substr(7)), s.size() - 1) << e;
  // The same values put in the list as they come (( N ... e): as many, in a
  // list instead of on the stack, also refused.
  std::string t = P("\x80\x02](");
  t += std::string(3u << 20, 'N');
  t += "e.";
  EXPECT_NE(Error(t).find("take more than 268435456 bytes"), std::string::npos);
  // 100,000 are nothing.
  std::string u = P("\x80\x02](") + std::string(100000, 'N') + "e.";
  PyRef l = Parse(u);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->items.size(), 100000u);
}

TEST(Pickle, HugeLengths) {
  EXPECT_EQ(Error(P("\x80\x02X\xff\xff\xff\xff"
                    "abc.")),
            "offset 2: BINUNICODE of 4294967295 bytes, only 4 left");
  EXPECT_EQ(Error(P("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff"
                    "a.")),
            "offset 2: BINUNICODE8 of 18446744073709551615 bytes, only 2 left");
  EXPECT_EQ(Error(P("\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x80.")),
            "offset 2: BINBYTES8 of 9223372036854775808 bytes, only 1 left");
  EXPECT_EQ(Error(P("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff.")),
            "offset 2: FRAME of 18446744073709551615 bytes, only 1 left");
  EXPECT_EQ(Error(P("\x80\x02\x8b\xff\xff\xff\x7f.")),
            "offset 2: LONG4 of 2147483647 bytes: ints beyond 64 bits are refused");
  EXPECT_EQ(Error(P("\x80\x02\x8b\xff\xff\xff\xff.")),
            "offset 2: LONG4 of 4294967295 bytes: ints beyond 64 bits are refused");
  // 2**63, protocol 2: 9 bytes.
  EXPECT_EQ(Error(P("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00.")),
            "offset 2: LONG1 of 9 bytes: ints beyond 64 bits are refused");
  // A memo index of 2^32 - 1 is only a key.
  PyRef n = Parse(P("\x80\x02Nr\xff\xff\xff\xff"
                    "0j\xff\xff\xff\xff."));
  ASSERT_NE(n, nullptr);
  EXPECT_TRUE(n->IsNone());
}

TEST(Pickle, InputLargerThanTheLimit) {
  // Pages never touched: no memory is used for them.
  const size_t n = kMaxPickleBytes + 1;
  void* p = mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  PickleResult r = ParsePickle(std::string_view(static_cast<const char*>(p), n));
  EXPECT_EQ(r.value, nullptr);
  EXPECT_EQ(r.error, "offset 0: 268435457 bytes is more than the limit of 268435456");
  munmap(p, n);
}

TEST(Pickle, StackAndStructureErrors) {
  EXPECT_EQ(Error(""), "offset 0: the input ends without STOP");
  EXPECT_EQ(Error(P("\x80\x02N")), "offset 3: the input ends without STOP");
  EXPECT_EQ(Error(P("\x80\x02N.N")), "offset 4: 1 byte after STOP");
  EXPECT_EQ(Error(P("\x80\x02N.\0\0")), "offset 4: 2 bytes after STOP");
  EXPECT_EQ(Error(P("\x80\x02.")), "offset 2: STOP with 0 objects on the stack, not 1");
  EXPECT_EQ(Error(P("\x80\x02NN.")), "offset 4: STOP with 2 objects on the stack, not 1");
  EXPECT_EQ(Error(P("\x80\x02(N.")), "offset 4: STOP inside an unclosed MARK");
  EXPECT_EQ(Error(P("\x80\x02]Ne.")), "offset 4: APPENDS without a MARK");
  EXPECT_EQ(Error(P("\x80\x02]Nu.")), "offset 4: SETITEMS without a MARK");
  EXPECT_EQ(Error(P("\x80\x02Nt.")), "offset 3: TUPLE without a MARK");
  EXPECT_EQ(Error(P("\x80\x02" "1.")), "offset 2: POP_MARK without a MARK");
  EXPECT_EQ(Error(P("\x80\x02" "a.")), "offset 2: APPEND needs 2 objects above the last MARK, the stack has 0");
  EXPECT_EQ(Error(P("\x80\x02](Na.")), "offset 5: APPEND needs 2 objects above the last MARK, the stack has 1");
  EXPECT_EQ(Error(P("\x80\x02}NNN(u.")), "offset 7: SETITEMS into None, not a dict");
  EXPECT_EQ(Error(P("\x80\x02}Na.")), "offset 4: APPEND into a dict, not a list");
  EXPECT_EQ(Error(P("\x80\x02)(e.")), "offset 4: APPENDS into a tuple, not a list");
  EXPECT_EQ(Error(P("\x80\x02]NNs.")), "offset 5: SETITEM into a list, not a dict");
  EXPECT_EQ(Error(P("\x80\x02}(Nu.")), "offset 5: SETITEMS with an odd number of objects (1)");
  EXPECT_EQ(Error(P("\x80\x02}]Ns.")), "offset 5: SETITEM with an unhashable key (a list)");
  EXPECT_EQ(Error(P("\x80\x02}}\x85Ns.")), "offset 6: SETITEM with an unhashable key (a tuple)");
  EXPECT_EQ(Error(P("\x80\x02" "0.")), "offset 2: POP needs 1 object above the last MARK, the stack has 0");
  EXPECT_EQ(Error(P("\x80\x02N(2.")), "offset 4: DUP needs 1 object above the last MARK, the stack has 0");
  EXPECT_EQ(Error(P("\x80\x02N\x86.")), "offset 3: TUPLE2 needs 2 objects above the last MARK, the stack has 1");
  EXPECT_EQ(Error(P("\x80\x02(q\x00.")), "offset 3: BINPUT needs 1 object above the last MARK, the stack has 0");
  EXPECT_EQ(Error(P("\x80\x02\x94.")), "offset 2: MEMOIZE needs 1 object above the last MARK, the stack has 0");
  EXPECT_EQ(Error(P("\x80\x02h\x05.")), "offset 2: BINGET of memo entry 5, which was never stored");
  EXPECT_EQ(Error(P("\x80\x02j\x00\x00\x00\x01.")),
            "offset 2: LONG_BINGET of memo entry 16777216, which was never stored");
  EXPECT_EQ(Error(P("\x80\x02J\x01\x02")), "offset 2: BININT needs 4 bytes for its argument, only 2 left");
  EXPECT_EQ(Error(P("\x80")), "offset 0: PROTO needs 1 byte for its argument, only 0 left");
  EXPECT_EQ(Error(P("\x80\x02G\x00")), "offset 2: BINFLOAT of 8 bytes, only 1 left");
  // POP takes a MARK when one is on top, as Python's unpickler does.
  PyRef n = Parse(P("\x80\x02N(0."));
  ASSERT_NE(n, nullptr);
  EXPECT_TRUE(n->IsNone());
}

// Every prefix of a real dump, and bytes changed in it: an error or a value,
// never a crash (under ASan too), and a value is a tree within the bounds.
TEST(Pickle, DamagedDumps) {
  for (int rank = 0; rank < 4; ++rank) {
    const std::string bytes = Dump(rank);
    ASSERT_GT(bytes.size(), 1000u);
    // Every length for one rank, every 7th for the others (they are alike).
    for (size_t n = 0; n < bytes.size(); n += rank == 0 ? 1 : 7) {
      PickleResult r = ParsePickle(std::string_view(bytes).substr(0, n));
      ASSERT_EQ(r.value, nullptr) << n;
      ASSERT_EQ(r.error.rfind("offset ", 0), 0u) << n << ": " << r.error;
      ASSERT_LE(std::stoul(r.error.substr(7)), n) << r.error;
    }
    uint64_t s = 0x9e3779b97f4a7c15ull * (rank + 1);
    size_t parsed = 0;
    for (int i = 0; i < 500; ++i) {
      std::string x = bytes;
      for (int j = 0; j < 1 + i % 3; ++j) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[(s >> 33) % x.size()] = static_cast<char>(s >> 17);
      }
      PickleResult r = ParsePickle(x);
      if (r.value == nullptr) {
        ASSERT_EQ(r.error.rfind("offset ", 0), 0u) << r.error;
        continue;
      }
      ++parsed;
      Totals t;
      Walk(*r.value, 1, &t);
      ASSERT_LE(t.depth, kMaxDepth + 1);  // the deepest scalar is one below its container
      ASSERT_LE(t.values * kValueCost + t.str_bytes, kMaxValueBytes);
    }
    EXPECT_GT(parsed, 0u);  // most changes land in strings and ints
  }
}

}  // namespace
}  // namespace ncclwatch::tools

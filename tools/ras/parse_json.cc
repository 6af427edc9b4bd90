// RAS's JSON answer (tools/ras/parse.h; NCCL 2.28.7 and later): a dump of
// every communicator's ranks with their status and launch counts, and of
// the ranks RAS got no data from. What RAS's text answer concludes (status
// groups, errors, the ranks behind each launch count) is computed here the
// way its text does (src/ras/client_support.cc).

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "tools/ras/parse.h"

namespace ncclwatch::tools {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

constexpr int kMaxComms = 65536;
constexpr double kMaxRank = 1 << 20;

// Where a protobuf JSON error points: its message is what was wrong, the
// text around the error (it may span lines) and a line with a caret under
// the error; that text found once in `json` gives the line.
std::string SyntaxError(absl::string_view json, const std::string& message) {
  absl::string_view m = message;
  absl::ConsumePrefix(&m, "INVALID_ARGUMENT:");
  const size_t first = m.find('\n'), last = m.rfind('\n');
  const absl::string_view what = m.substr(0, first);
  if (first != absl::string_view::npos && last > first + 1) {
    const absl::string_view around = m.substr(first + 1, last - first - 1);
    const size_t caret = m.substr(last + 1).find('^');
    const size_t at = json.find(around);
    if (at != absl::string_view::npos && json.find(around, at + 1) == absl::string_view::npos &&
        caret != absl::string_view::npos) {
      const size_t pos = std::min(at + caret, json.size());
      const size_t line = 1 + static_cast<size_t>(std::count(json.begin(), json.begin() + pos, '\n'));
      return "JSON line " + std::to_string(line) + ": " + std::string(what);
    }
  }
  return "JSON: " + std::string(what);
}

// Reads the fields of one JSON object, each named by its path in errors.
class Obj {
 public:
  Obj(const Struct& s, std::string path, std::string* error) : s_(s), path_(std::move(path)), error_(error) {}

  const std::string& path() const { return path_; }
  std::string At(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  bool Fail(const std::string& key, const std::string& why) const {
    *error_ = "JSON " + At(key) + ": " + why;
    return false;
  }

  const Value* Get(const std::string& key) const {
    auto it = s_.fields().find(key);
    return it == s_.fields().end() || it->second.kind_case() == Value::kNullValue ? nullptr : &it->second;
  }

  // An integer in [lo, hi]; absent: `*v` unchanged, true unless required.
  bool Int(const std::string& key, double lo, double hi, bool required, int64_t* v) const {
    const Value* x = Get(key);
    if (x == nullptr) return !required || Fail(key, "missing");
    if (x->kind_case() != Value::kNumberValue) return Fail(key, "expected a number, got " + Kind(*x));
    const double d = x->number_value();
    if (!(d >= lo && d <= hi) || std::floor(d) != d)
      return Fail(key, "expected a whole number from " + Num(lo) + " to " + Num(hi) + ", got " + Num(d));
    *v = static_cast<int64_t>(d);
    return true;
  }
  bool Bool(const std::string& key, bool* v) const {
    const Value* x = Get(key);
    if (x == nullptr) return true;
    if (x->kind_case() != Value::kBoolValue) return Fail(key, "expected true or false, got " + Kind(*x));
    *v = x->bool_value();
    return true;
  }
  bool Str(const std::string& key, bool required, std::string* v) const {
    const Value* x = Get(key);
    if (x == nullptr) return !required || Fail(key, "missing");
    if (x->kind_case() != Value::kStringValue) return Fail(key, "expected a string, got " + Kind(*x));
    *v = x->string_value().substr(0, 256);
    return true;
  }
  // An object field; absent: an empty one.
  bool Sub(const std::string& key, const Struct** v) const {
    static const Struct kEmpty;
    const Value* x = Get(key);
    *v = &kEmpty;
    if (x == nullptr) return true;
    if (x->kind_case() != Value::kStructValue) return Fail(key, "expected an object, got " + Kind(*x));
    *v = &x->struct_value();
    return true;
  }
  // A list of objects; absent: none.
  bool List(const std::string& key, std::vector<const Struct*>* v) const {
    const Value* x = Get(key);
    v->clear();
    if (x == nullptr) return true;
    if (x->kind_case() != Value::kListValue) return Fail(key, "expected a list, got " + Kind(*x));
    for (int i = 0; i < x->list_value().values_size(); ++i) {
      const Value& e = x->list_value().values(i);
      if (e.kind_case() != Value::kStructValue)
        return Fail(key + "[" + std::to_string(i) + "]", "expected an object, got " + Kind(e));
      v->push_back(&e.struct_value());
    }
    return true;
  }

  static std::string Kind(const Value& x) {
    switch (x.kind_case()) {
      case Value::kNumberValue: return "a number";
      case Value::kStringValue: return "a string";
      case Value::kBoolValue: return "a boolean";
      case Value::kStructValue: return "an object";
      case Value::kListValue: return "a list";
      default: return "null";
    }
  }
  static std::string Num(double d) {
    char b[32];
    snprintf(b, sizeof(b), "%.17g", d);
    return b;
  }

 private:
  const Struct& s_;
  std::string path_;
  std::string* error_;
};

// The status RAS gives a rank, its order the order of RAS's status bits
// (the communicator's status is its ranks' furthest along).
int StatusOrder(const std::string& s) {
  static const char* const kOrder[] = {"NOCOMM", "INIT", "RUNNING", "FINALIZE", "ABORT"};
  for (int i = 0; i < 5; ++i)
    if (s == kOrder[i]) return i;
  return -1;
}

struct RankFacts {
  int64_t rank = 0;
  std::string status;
  int64_t init_state = 0, async_error = 0;
  std::vector<std::pair<std::string, uint64_t>> counts;
};

void Fill(report::RasRanks* to, const std::vector<int32_t>& ranks) {
  to->set_count(static_cast<uint32_t>(ranks.size()));
  for (int32_t r : ranks) to->add_ranks(r);
}

bool ReadComm(const Obj& o, report::RasView* v, std::string* error) {
  report::RasComm* c = v->add_comms();
  std::string hash;
  if (!o.Str("hash", true, &hash)) return false;
  absl::string_view h = hash;
  uint64_t value = 0;
  if (!absl::ConsumePrefix(&h, "0x") || !absl::SimpleHexAtoi(h, &value))
    return o.Fail("hash", "expected a hexadecimal number '0x...', got '" + hash + "'");
  c->set_hash(value);
  int64_t size = 0;
  if (!o.Int("size", 0, kMaxRank, false, &size)) return false;
  c->set_size(static_cast<uint32_t>(size));

  std::vector<RankFacts> ranks;
  std::vector<const Struct*> list;
  if (!o.List("ranks", &list)) return false;
  std::map<int64_t, int> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const Obj r(*list[i], o.At("ranks[" + std::to_string(i) + "]"), error);
    RankFacts f;
    const Struct *status = nullptr, *counts = nullptr;
    bool finalize = false, destroy = false, abort = false;
    if (!r.Int("rank", 0, kMaxRank, true, &f.rank) || !r.Sub("status", &status) || !r.Sub("collective_counts", &counts))
      return false;
    const Obj s(*status, r.At("status"), error);
    if (!s.Int("init_state", 0, 1e6, false, &f.init_state) || !s.Int("async_error", 0, 1e6, false, &f.async_error) ||
        !s.Bool("finalize_called", &finalize) || !s.Bool("destroy_flag", &destroy) || !s.Bool("abort_flag", &abort))
      return false;
    if (++seen[f.rank] > 1) return r.Fail("rank", "rank " + std::to_string(f.rank) + " listed twice");
    // As RAS's text decides it (an abort wins; a destroy without finalize is finalizing too).
    f.status = abort ? "ABORT" : finalize || destroy ? "FINALIZE" : f.init_state == 0 ? "RUNNING" : "INIT";
    const Obj k(*counts, r.At("collective_counts"), error);
    for (const auto& [func, value] : counts->fields()) {
      int64_t n = 0;
      if (func.empty() || func.size() > 40) return k.Fail(func.substr(0, 40), "not a collective's name");
      if (!k.Int(func, 0, 9007199254740992.0, true, &n)) return false;
      f.counts.emplace_back(func, static_cast<uint64_t>(n));
    }
    // Protobuf's map is unordered: RAS's order (ncclFunc_t) is lost, a
    // fixed one keeps the output stable.
    std::sort(f.counts.begin(), f.counts.end());
    ranks.push_back(std::move(f));
  }

  std::vector<int32_t> unresponsive, dead, nocomm;
  if (!o.List("missing_ranks", &list)) return false;
  for (size_t i = 0; i < list.size(); ++i) {
    const Obj r(*list[i], o.At("missing_ranks[" + std::to_string(i) + "]"), error);
    int64_t rank = 0, pid = -1, cuda = -1;
    std::string host;
    const Struct* status = nullptr;
    bool no_answer = false, is_dead = false;
    if (!r.Int("rank", 0, kMaxRank, true, &rank) || !r.Int("pid", -1, 1e12, false, &pid) ||
        !r.Int("cuda_dev", -1, 1e6, false, &cuda) || !r.Str("host", false, &host) || !r.Sub("status", &status))
      return false;
    const Obj s(*status, r.At("status"), error);
    if (!s.Bool("unresponsive", &no_answer) || !s.Bool("considered_dead", &is_dead)) return false;
    if (++seen[rank] > 1) return r.Fail("rank", "rank " + std::to_string(rank) + " listed twice");
    if (!no_answer && !is_dead) {
      nocomm.push_back(static_cast<int32_t>(rank));
      continue;
    }
    unresponsive.push_back(static_cast<int32_t>(rank));
    if (is_dead) dead.push_back(static_cast<int32_t>(rank));
    bool known = false;
    for (const report::RasPeer& p : v->peers()) known |= p.host() == host && p.pid() == pid;
    if (!known) {
      report::RasPeer* p = v->add_peers();
      p->set_host(host);
      p->set_pid(pid);
      if (cuda >= 0) p->set_gpus(std::to_string(cuda));
      p->set_dead(is_dead);
      if (is_dead) v->set_dead_processes(v->dead_processes() + 1);
      else v->set_unresponsive_processes(v->unresponsive_processes() + 1);
    }
  }
  if (size > 0 && static_cast<int64_t>(seen.size()) > size)
    return o.Fail("size", std::to_string(seen.size()) + " ranks listed, more than its size " + std::to_string(size));
  Fill(c->mutable_unresponsive(), unresponsive);
  Fill(c->mutable_dead(), dead);

  // Statuses: the communicator's, and groups where its ranks differ.
  std::map<std::string, std::vector<int32_t>> by_status;
  for (const RankFacts& f : ranks) by_status[f.status].push_back(static_cast<int32_t>(f.rank));
  if (!nocomm.empty()) by_status["NOCOMM"] = nocomm;
  std::string top;
  for (const auto& [status, members] : by_status)
    if (top.empty() || StatusOrder(status) > StatusOrder(top)) top = status;
  c->set_status(top);
  if (by_status.size() > 1)
    for (const auto& [status, members] : by_status) {
      report::RasStatusGroup* g = c->add_statuses();
      g->set_status(status);
      Fill(g->mutable_ranks(), members);
    }
  // Errors: what is neither success nor in progress.
  for (const char* kind : {"init", "async"}) {
    std::map<int64_t, std::vector<int32_t>> by_code;
    for (const RankFacts& f : ranks) {
      const int64_t code = kind[0] == 'i' ? f.init_state : f.async_error;
      if (code != 0 && code != 7) by_code[code].push_back(static_cast<int32_t>(f.rank));
    }
    for (const auto& [code, members] : by_code) {
      report::RasRankError* e = c->add_errors();
      e->set_kind(kind);
      e->set_error(RasErrorName(code));
      Fill(e->mutable_ranks(), members);
    }
  }
  // Launches: per collective, the ranks behind each count, most ranks first.
  std::map<std::string, std::map<uint64_t, std::vector<int32_t>>> by_func;
  for (const RankFacts& f : ranks)
    for (const auto& [func, n] : f.counts) by_func[func][n].push_back(static_cast<int32_t>(f.rank));
  bool differ = false;
  for (const auto& [func, groups] : by_func) {
    report::RasLaunches* l = c->add_launches();
    l->set_func(func);
    std::vector<std::pair<uint64_t, const std::vector<int32_t>*>> order;
    for (const auto& [n, members] : groups) order.emplace_back(n, &members);
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.second->size() > b.second->size(); });
    for (const auto& [n, members] : order) {
      report::RasLaunchGroup* g = l->add_groups();
      g->set_launches(n);
      Fill(g->mutable_ranks(), *members);
    }
    differ |= groups.size() > 1;
  }
  if (unresponsive.empty() && by_status.size() <= 1 && c->errors_size() == 0 && !differ)
    v->set_comms_ok(v->comms_ok() + 1);
  return true;
}

}  // namespace

bool ParseRasJson(std::string_view text, report::RasView* view, std::string* error) {
  const absl::string_view answer(text.data(), text.size());
  view->Clear();
  view->set_format("json");
  if (answer.size() > kMaxRasAnswerBytes) {
    *error = "the answer holds " + std::to_string(answer.size()) + " bytes, more than 64 MiB";
    return false;
  }
  Struct root;
  const auto status = google::protobuf::util::JsonStringToMessage(std::string(answer), &root);
  if (!status.ok()) {
    *error = SyntaxError(answer, status.ToString());
    return false;
  }
  const Obj o(root, "", error);
  std::string version;
  if (!o.Str("nccl_version", false, &version)) return false;
  view->set_nccl_version(version);
  if (o.Get("communicators") == nullptr)
    return o.Fail("communicators", "missing: not an answer of NCCL's RAS (its STATUS query in JSON)");
  std::vector<const Struct*> comms;
  if (!o.List("communicators", &comms)) return false;
  if (comms.size() > static_cast<size_t>(kMaxComms)) return o.Fail("communicators", "more than 65,536");
  for (size_t i = 0; i < comms.size(); ++i)
    if (!ReadComm(Obj(*comms[i], "communicators[" + std::to_string(i) + "]", error), view, error)) return false;
  view->set_comms_total(static_cast<uint32_t>(comms.size()));
  const Struct* ras = nullptr;
  int64_t timeouts = 0;
  if (!o.Sub("ras", &ras) || !Obj(*ras, "ras", error).Int("timeouts_count", 0, 1e9, false, &timeouts)) return false;
  view->set_timeouts(static_cast<uint32_t>(timeouts));
  return true;
}

}  // namespace ncclwatch::tools

// RAS's text answer (tools/ras/parse.h). Its shape, from NCCL's
// src/ras/client_support.cc (2.24 to 2.30):
//
//   NCCL version 2.29.7+cuda12.9 compiled with CUDA 12.9
//   Job summary / ===== / a table of nodes, processes and GPUs
//   Communicators... (0.002s) / ===== / the group table, one row a group:
//     number, comms in it, nodes per comm, ranks per node, ranks per comm,
//     ranks in the group, status, errors
//   Errors / ===== / entries          Warnings / ===== / entries
//
// An entry is a heading at the start of a line (INCOMPLETE, DEAD, TIMEOUT,
// or "#G-C (HASH) KIND" for communicator C of group G), indented lines
// under it, and a blank line. Ranks that RAS names follow the line that
// counts them ("3 ranks have status INIT", then "Rank 2 -- GPU 2 managed
// by process 41 on node 10.0.0.7").

#include <stdint.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tools/ras/parse.h"

namespace ncclwatch::tools {
namespace {

constexpr int kMaxComms = 65536;
constexpr int64_t kMaxRanks = 1 << 20;
constexpr int64_t kMaxCount = 1ll << 53;

// A decimal number at the front of `s`, consumed with it.
bool TakeInt(absl::string_view* s, int64_t* v) {
  size_t n = 0;
  while (n < s->size() && absl::ascii_isdigit(static_cast<unsigned char>((*s)[n]))) ++n;
  if (n == 0 || n > 16 || !absl::SimpleAtoi(s->substr(0, n), v)) return false;
  s->remove_prefix(n);
  return true;
}

bool StartsWithDigit(absl::string_view s) { return !s.empty() && absl::ascii_isdigit(static_cast<unsigned char>(s[0])); }

struct GroupRow {
  int64_t comms = 0, size = 0;
  std::string status, errors;
};

// One pass over the answer's lines, a section and an entry at a time:
// fills the view, or stops at the first damaged line with its number.
// Ranks named under a count go to `group_`, the count's RasRanks.
class TextParser {
 public:
  TextParser(report::RasView* view, std::string* error) : v_(view), error_(error) {}

  bool Run(absl::string_view answer) {
    v_->set_format("text");
    for (absl::string_view line : absl::StrSplit(answer, '\n')) {
      ++line_no_;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!Line(line)) return false;
    }
    line_no_ = 0;
    if (!seen_ras_) {
      std::string first(answer.substr(0, std::min<size_t>(answer.find('\n'), 80)));
      *error_ = answer.empty() ? std::string("empty answer")
                               : "not an answer of NCCL's RAS: it begins '" + first +
                                     "' (expected 'NCCL version', 'Job summary' or 'Communicators...')";
      return false;
    }
    if (!seen_table_) return End("the answer ends before RAS's table of communicators (cut short?)");
    if (!seen_errors_ || !seen_warnings_)
      return End(std::string("the answer ends before its ") + (seen_errors_ ? "Warnings" : "Errors") +
                 " section (cut short?)");
    for (report::RasComm& c : *v_->mutable_comms()) {
      // "#G-C": communicator C of group G in the table.
      int64_t g = -1;
      absl::string_view id = c.id();
      if (absl::ConsumePrefix(&id, "#") && TakeInt(&id, &g) && g < static_cast<int64_t>(rows_.size()) &&
          !rows_[g].status.empty()) {
        c.set_size(static_cast<uint32_t>(rows_[g].size));
        c.set_status(rows_[g].status);
      }
    }
    return true;
  }

 private:
  enum Section { kStart, kComms, kTable, kErrors, kWarnings };
  enum Entry { kNone, kJobIncomplete, kJobDead, kTimeout, kComm, kOther };

  bool Fail(const std::string& why) {
    *error_ = "line " + std::to_string(line_no_) + ": " + why;
    return false;
  }
  bool End(const std::string& why) {
    *error_ = why;
    return false;
  }
  void Unparsed(absl::string_view line) {
    if (v_->unparsed_size() < 1000)
      v_->add_unparsed("line " + std::to_string(line_no_) + ": " + std::string(line.substr(0, 200)));
  }

  bool Line(absl::string_view line) {
    const absl::string_view bare = absl::StripAsciiWhitespace(line);
    if (section_ == kTable) {
      if (bare.empty()) {
        section_ = kComms;
        return true;
      }
      return TableRow(line);
    }
    if (section_ == kErrors || section_ == kWarnings) {
      if (bare == "Warnings") {
        section_ = kWarnings;
        seen_warnings_ = true;
        entry_ = kNone;
        return true;
      }
      if (bare.empty() || absl::StartsWith(bare, "====")) {
        entry_ = kNone;
        return true;
      }
      if (section_ == kErrors) v_->add_errors(std::string(line));
      else v_->add_warnings(std::string(line));
      return line[0] == ' ' ? Detail(line) : Heading(bare);
    }
    if (absl::StartsWith(line, "NCCL version ")) {
      seen_ras_ = true;
      absl::string_view rest = line.substr(13);
      v_->set_nccl_version(std::string(rest.substr(0, rest.find(' '))));
    } else if (line == "Job summary") {
      seen_ras_ = true;
    } else if (absl::StartsWith(line, "Communicators...")) {
      seen_ras_ = true;
      section_ = kComms;
    } else if (section_ == kComms && absl::StartsWith(line, "Group ")) {
      section_ = kTable;
      seen_table_ = true;
    } else if (section_ == kComms && line == "No communicator data collected!") {
      seen_table_ = true;
    } else if (bare == "Errors" && seen_table_) {
      section_ = kErrors;
      seen_errors_ = true;
    } else if (absl::StartsWith(line, "ERROR:") && !seen_ras_) {
      return Fail("RAS answered '" + std::string(line.substr(0, 200)) + "'");
    }
    // The job summary's table and RAS's other lines: not evidence.
    return true;
  }

  // "    0         1         4       7-8        32        32   RUNNING  INCOMPLETE"; the
  // second header line ("    #  in group ...") is skipped.
  bool TableRow(absl::string_view line) {
    std::vector<absl::string_view> col = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!col.empty() && col[0] == "#") return true;
    int64_t group = 0, comms = 0, size = 0;
    if (col.size() != 8 || !absl::SimpleAtoi(col[0], &group) || !absl::SimpleAtoi(col[1], &comms) ||
        !absl::SimpleAtoi(col[4], &size))
      return Fail("a row of the communicators table needs 8 columns, the 1st, 2nd and 5th numbers: '" +
                  std::string(line.substr(0, 200)) + "'");
    if (group != static_cast<int64_t>(rows_.size()) || comms < 0 || comms > kMaxComms || size < 0 || size > kMaxRanks)
      return Fail("group " + std::string(col[0]) + " of " + std::string(col[1]) + " communicators of " +
                  std::string(col[4]) + " ranks: out of order or out of range");
    GroupRow r;
    r.comms = comms;
    r.size = size;
    r.status = std::string(col[6]);
    r.errors = std::string(col[7]);
    v_->set_comms_total(v_->comms_total() + static_cast<uint32_t>(comms));
    if (r.errors == "OK") v_->set_comms_ok(v_->comms_ok() + static_cast<uint32_t>(comms));
    rows_.push_back(r);
    return true;
  }

  bool Heading(absl::string_view h) {
    comm_ = nullptr;
    group_ = nullptr;
    launches_ = nullptr;
    if (h == "INCOMPLETE") entry_ = kJobIncomplete;
    else if (h == "DEAD") entry_ = kJobDead;
    else if (h == "TIMEOUT") entry_ = kTimeout;
    else if (h[0] == '#') return CommHeading(h);
    else {
      entry_ = kOther;
      Unparsed(h);
    }
    return true;
  }

  // "#0-0 (27a079b828ff1a75) MISMATCH"
  bool CommHeading(absl::string_view h) {
    const size_t open = h.find(" ("), close = h.find(") ");
    uint64_t hash = 0;
    int64_t g = 0, c = 0;
    absl::string_view id = h.substr(0, open);
    absl::string_view gc = id.substr(1);
    if (open == absl::string_view::npos || close == absl::string_view::npos || close < open || !TakeInt(&gc, &g) ||
        !absl::ConsumePrefix(&gc, "-") || !TakeInt(&gc, &c) || !gc.empty() ||
        !absl::SimpleHexAtoi(h.substr(open + 2, close - open - 2), &hash))
      return Fail("a communicator's heading is '#GROUP-COMM (HASH) KIND', not '" + std::string(h.substr(0, 200)) + "'");
    entry_kind_ = std::string(absl::StripAsciiWhitespace(h.substr(close + 2)));
    entry_ = kComm;
    comm_ = nullptr;
    for (report::RasComm& k : *v_->mutable_comms())
      if (k.id() == id && k.hash() == hash) comm_ = &k;
    if (comm_ == nullptr) {
      if (v_->comms_size() >= kMaxComms) return Fail("more than 65,536 communicators");
      comm_ = v_->add_comms();
      comm_->set_id(std::string(id));
      comm_->set_hash(hash);
    }
    if (entry_kind_ == "INCOMPLETE") group_ = comm_->mutable_unresponsive();
    return true;
  }

  bool Detail(absl::string_view line) {
    const absl::string_view d = absl::StripLeadingAsciiWhitespace(line);
    switch (entry_) {
      case kJobIncomplete:
      case kJobDead: {
        const bool dead = entry_ == kJobDead;
        absl::string_view s = d;
        int64_t n = 0;
        if (absl::ConsumePrefix(&s, "Missing communicator data from ") ||
            (dead && StartsWithDigit(s) && absl::StrContains(s, " considered dead"))) {
          if (!TakeInt(&s, &n) || n > kMaxRanks) return Fail("expected a count of processes: '" + std::string(d) + "'");
          if (dead) v_->set_dead_processes(static_cast<uint32_t>(n));
          else v_->set_unresponsive_processes(static_cast<uint32_t>(n));
          return true;
        }
        if (absl::StartsWith(d, "Process ")) return ProcessLine(d, dead);
        if (!absl::StartsWith(d, "[could not find")) Unparsed(d);
        return true;
      }
      case kTimeout: {
        absl::string_view s = d;
        int64_t n = 0;
        if (absl::ConsumePrefix(&s, "Encountered ")) {
          if (!TakeInt(&s, &n) || n > kMaxRanks) return Fail("expected a count of timeouts: '" + std::string(d) + "'");
          v_->set_timeouts(static_cast<uint32_t>(n));
        } else {
          Unparsed(d);
        }
        return true;
      }
      case kComm:
        return CommDetail(d);
      default:
        Unparsed(d);
        return true;
    }
  }

  // "Process 3487984 on node 172.16.64.213 managing GPU 5" (GPUs "0,1", or "5 (NVML 7)").
  bool ProcessLine(absl::string_view d, bool dead) {
    absl::string_view s = d.substr(8);
    int64_t pid = 0;
    const size_t managing = s.find(" managing GPU");
    if (!TakeInt(&s, &pid) || !absl::ConsumePrefix(&s, " on node ") || managing == absl::string_view::npos)
      return Fail("expected 'Process PID on node HOST managing GPU N': '" + std::string(d) + "'");
    const size_t at = s.find(" managing GPU");
    report::RasPeer* p = v_->add_peers();
    p->set_pid(pid);
    p->set_host(std::string(s.substr(0, at)));
    absl::string_view gpus = s.substr(at + 13);
    absl::ConsumePrefix(&gpus, "s");
    p->set_gpus(std::string(absl::StripAsciiWhitespace(gpus)));
    p->set_dead(dead);
    return true;
  }

  bool AddRank(int64_t rank, report::RasRanks* to) {
    if (rank < 0 || rank >= kMaxRanks) return Fail("rank " + std::to_string(rank) + " out of range");
    if (++ranks_kept_ > kMaxRanks) return Fail("more than 1,048,576 ranks named");
    to->add_ranks(static_cast<int32_t>(rank));
    return true;
  }

  // "21,22" (2.24 and 2.25 name ranks in a list; an empty item may lead).
  bool RankList(absl::string_view list, report::RasRanks* to) {
    for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
      int64_t r = 0;
      if (!absl::SimpleAtoi(item, &r)) return Fail("expected a list of ranks: '" + std::string(list.substr(0, 200)) + "'");
      if (!AddRank(r, to)) return false;
    }
    return true;
  }

  // "N ranks ..." / "N rank..." at the front of `s`, consumed.
  bool TakeCount(absl::string_view* s, int64_t* n, absl::string_view d) {
    if (!TakeInt(s, n) || *n > kMaxCount) return Fail("expected a count: '" + std::string(d.substr(0, 200)) + "'");
    return true;
  }

  report::RasRanks* NewLaunchGroup(int64_t launches, int64_t count) {
    report::RasLaunchGroup* g = launches_->add_groups();
    g->set_launches(static_cast<uint64_t>(launches));
    g->mutable_ranks()->set_count(static_cast<uint32_t>(std::min<int64_t>(count, UINT32_MAX)));
    return g->mutable_ranks();
  }

  bool CommDetail(absl::string_view d) {
    absl::string_view s = d;
    int64_t n = 0, r = 0;
    // Ranks named under the line that counted them.
    if (absl::ConsumePrefix(&s, "Rank ")) {
      if (!StartsWithDigit(s)) return Fail("expected a rank: '" + std::string(d.substr(0, 200)) + "'");
      absl::string_view rest = s;
      if (absl::StrContains(rest, " -- ")) rest = rest.substr(0, rest.find(" -- "));
      absl::string_view num = rest;
      TakeInt(&num, &r);
      if (absl::ConsumePrefix(&num, " has status ") || (absl::StartsWith(num, ",") && absl::StrContains(num, " has status "))) {
        // "Rank 2 has status INIT -- ..." or 2.24's "Rank 1,3 has status INIT".
        const size_t at = rest.find(" has status ");
        report::RasStatusGroup* g = comm_->add_statuses();
        g->set_status(std::string(absl::StripAsciiWhitespace(rest.substr(at + 12))));
        if (!RankList(rest.substr(0, at), g->mutable_ranks())) return false;
        g->mutable_ranks()->set_count(static_cast<uint32_t>(g->ranks().ranks_size()));
        group_ = g->mutable_ranks();
        return true;
      }
      if (absl::ConsumePrefix(&num, " has launched up to operation ") || absl::StartsWith(num, " has not launched")) {
        int64_t launches = 0;
        if (!absl::StartsWith(num, " has not launched") && !TakeCount(&num, &launches, d)) return false;
        if (launches_ == nullptr) return Fail("a rank's launches before the line that names the collective");
        return AddRank(r, NewLaunchGroup(launches, 1));
      }
      if (absl::ConsumePrefix(&num, " reported ")) {
        if (error_kind_.empty()) return Fail("a rank's error before the line that says which kind");
        report::RasRankError* e = comm_->add_errors();
        e->set_kind(error_kind_);
        e->set_error(std::string(num));
        e->mutable_ranks()->set_count(1);
        return AddRank(r, e->mutable_ranks());
      }
      if (!num.empty()) return Fail("expected 'Rank N -- ...' or 'Rank N has ...': '" + std::string(d.substr(0, 200)) + "'");
      if (group_ == nullptr) return Fail("a rank named before the line that counts it");
      return AddRank(r, group_);
    }
    if (absl::ConsumePrefix(&s, "Missing communicator data from ")) {
      if (!TakeCount(&s, &n, d)) return false;
      comm_->mutable_unresponsive()->set_count(static_cast<uint32_t>(std::min<int64_t>(n, UINT32_MAX)));
      group_ = comm_->mutable_unresponsive();
      return true;
    }
    if (absl::ConsumePrefix(&s, "The missing rank")) {
      const size_t colon = s.find(": ");
      if (colon == absl::string_view::npos) return Fail("expected 'The missing ranks: LIST'");
      return RankList(s.substr(colon + 2), comm_->mutable_unresponsive());
    }
    if (absl::ConsumePrefix(&s, "The unknown ranks: ")) {
      if (group_ == nullptr) return Fail("ranks named before the line that counts them");
      return RankList(s, group_);
    }
    if (absl::StartsWith(s, "Initialization error") || absl::StartsWith(s, "Asynchronous error")) {
      error_kind_ = s[0] == 'I' ? "init" : "async";
      group_ = nullptr;
      return true;
    }
    if (absl::ConsumePrefix(&s, "Communicator ranks have different ")) {
      group_ = nullptr;
      if (s == "status") {
        launches_ = nullptr;
        return true;
      }
      absl::string_view func = s;
      if (!absl::ConsumeSuffix(&func, " operation counts") || func.empty() || func.size() > 40)
        return Fail("expected 'Communicator ranks have different FUNC operation counts': '" + std::string(d.substr(0, 200)) + "'");
      launches_ = comm_->add_launches();
      launches_->set_func(std::string(func));
      return true;
    }
    if (StartsWithDigit(s)) {
      if (!TakeCount(&s, &n, d)) return false;
      absl::string_view rest = s;
      if (absl::ConsumePrefix(&rest, " ranks have status ")) {
        report::RasStatusGroup* g = comm_->add_statuses();
        g->set_status(std::string(rest));
        g->mutable_ranks()->set_count(static_cast<uint32_t>(n));
        group_ = g->mutable_ranks();
        return true;
      }
      if (absl::ConsumePrefix(&rest, " ranks have launched up to operation ") || absl::StartsWith(rest, " ranks have not launched")) {
        int64_t launches = 0;
        if (!absl::StartsWith(rest, " ranks have not launched") && !TakeCount(&rest, &launches, d)) return false;
        if (launches_ == nullptr) return Fail("launch counts before the line that names the collective");
        group_ = NewLaunchGroup(launches, n);
        return true;
      }
      if (absl::ConsumePrefix(&rest, " ranks reported ")) {
        if (error_kind_.empty()) return Fail("an error count before the line that says which kind");
        report::RasRankError* e = comm_->add_errors();
        e->set_kind(error_kind_);
        e->set_error(std::string(rest));
        e->mutable_ranks()->set_count(static_cast<uint32_t>(n));
        group_ = e->mutable_ranks();
        return true;
      }
    }
    Unparsed(d);
    return true;
  }

  report::RasView* v_;
  std::string* error_;
  int line_no_ = 0;
  Section section_ = kStart;
  Entry entry_ = kNone;
  bool seen_ras_ = false, seen_table_ = false, seen_errors_ = false, seen_warnings_ = false;
  std::vector<GroupRow> rows_;
  report::RasComm* comm_ = nullptr;
  std::string entry_kind_;             // INCOMPLETE, ERROR or MISMATCH
  std::string error_kind_;             // init or async
  report::RasRanks* group_ = nullptr;  // where "Rank R -- ..." lines go
  report::RasLaunches* launches_ = nullptr;
  int64_t ranks_kept_ = 0;
};

}  // namespace

bool ParseRasText(std::string_view text, report::RasView* view, std::string* error) {
  const absl::string_view answer(text.data(), text.size());
  view->Clear();
  if (answer.size() > kMaxRasAnswerBytes) {
    *error = "the answer holds " + std::to_string(answer.size()) + " bytes, more than 64 MiB";
    return false;
  }
  return TextParser(view, error).Run(answer);
}

std::string RasErrorName(int64_t code) {
  switch (code) {
    case 0: return "Success";
    case 1: return "Unhandled CUDA error";
    case 2: return "System error";
    case 3: return "Internal error";
    case 4: return "Invalid argument";
    case 5: return "Invalid usage";
    case 6: return "Remote process error";
    case 7: return "NCCL operation in progress";
    default: return "error " + std::to_string(code);
  }
}

bool ParseRasAnswer(std::string_view answer, report::RasView* view, std::string* error) {
  const size_t first = answer.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && answer[first] == '{') return ParseRasJson(answer, view, error);
  return ParseRasText(answer, view, error);
}

}  // namespace ncclwatch::tools

#include "tools/dump.h"

#include <google/protobuf/text_format.h>
#include <stdio.h>

#include <algorithm>
#include <map>

#include "tools/model/inputs.h"
#include "tools/model/semantics.h"
#include "tools/reader/reader.h"
#include "tools/summary/summary.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {

namespace {

// Strings and bytes as protobuf's text format writes them (C escapes, so
// no control reaches the terminal), but a name of a megabyte cut to
// kMaxNameBytes first: no record's line grows with it.
class CutStringPrinter : public google::protobuf::TextFormat::FastFieldValuePrinter {
 public:
  void PrintString(const std::string& val,
                   google::protobuf::TextFormat::BaseTextGenerator* generator) const override {
    FastFieldValuePrinter::PrintString(CutName(val), generator);
  }
  void PrintBytes(const std::string& val, google::protobuf::TextFormat::BaseTextGenerator* generator) const override {
    FastFieldValuePrinter::PrintBytes(CutName(val), generator);
  }
};

// One record a line.
void SingleLine(google::protobuf::TextFormat::Printer* printer) {
  printer->SetSingleLineMode(true);
  printer->SetDefaultFieldValuePrinter(new CutStringPrinter());
}

// "mask change at 4.010 s: Coll|P2p|KernelCh -> Coll|P2p (0x46 -> 0x6),
// last read 4.000 s, completions from KernelCh: stops completions".
std::string MaskChangeLine(const trace::MaskChange& c) {
  char head[160];
  snprintf(head, sizeof(head), "mask change at %.3f s (file time; last read of the old mask %.3f s): ",
           static_cast<double>(c.time_ns()) / 1e9, static_cast<double>(c.since_ns()) / 1e9);
  char hex[64];
  snprintf(hex, sizeof(hex), " (0x%llx -> 0x%llx)", static_cast<unsigned long long>(c.old_mask()),
           static_cast<unsigned long long>(c.new_mask()));
  std::string s = head + EventMaskNames(c.old_mask()) + " -> " + EventMaskNames(c.new_mask()) + hex +
                  ", completions from " + EventMaskNames(c.completion_source());
  auto lost = [&](uint64_t bits) { return (c.old_mask() & bits) != 0 && (c.new_mask() & bits) == 0; };
  std::string stops;
  if (c.completion_source() != 0 && lost(c.completion_source())) stops += ", completions";
  if (lost(kMaskColl)) stops += ", collectives";
  if (lost(kMaskP2p)) stops += ", point-to-point operations";
  s += stops.empty() ? ": stops nothing the analyses need" : ": stops" + stops.substr(1);
  return s;
}

// A per-node summary (tools/summary/): its header, then per process what
// it keeps and what it let go; with opts.records, each window record.
bool DumpSummary(const std::string& path, const DumpOptions& opts, std::ostream& out, std::ostream& err) {
  SummaryResult s;
  std::string error;
  const bool ok = ReadSummaryFile(path, &s, &error);
  out << "== " << Printable(path) << ": per-node summary, format " << s.header.format() << " v" << s.header.version()
      << ", window " << s.header.window() << ", " << s.procs.size() << " processes\n";
  google::protobuf::TextFormat::Printer printer;
  SingleLine(&printer);
  for (const summary::SummaryProcess& p : s.procs) {
    out << "  " << Printable(p.path()) << ": " << p.records_size() << " window records, " << p.let_go_ops()
        << " operations let go" << (p.damaged() ? ", damaged at offset " + std::to_string(p.damaged_at()) : "")
        << (p.cut_tail() ? ", cut tail" : "") << "\n";
    for (const summary::CommPrefix& c : p.prefixes()) {
      char hash[32];
      snprintf(hash, sizeof(hash), "0x%llx", static_cast<unsigned long long>(c.comm_hash()));
      // The second round's ranges (summarize --collectives), where asked.
      std::string asked;
      for (const summary::PositionRange& r : c.asked())
        asked += (asked.empty() ? ", asked #" : ", #") + std::to_string(r.from()) + "-#" + std::to_string(r.to());
      out << "    comm " << hash << " rank " << c.rank() << ": " << c.ops() << " let go, " << c.collectives()
          << " collectives chained, " << c.checkpoints_size() << " checkpoints" << asked << "\n";
    }
    for (const summary::ArrivalSamples& a : p.samples()) {
      char hash[32];
      snprintf(hash, sizeof(hash), "0x%llx", static_cast<unsigned long long>(a.comm_hash()));
      out << "    comm " << hash << ": " << a.count() << " arrivals sampled, one in "
          << (uint64_t{1} << std::min<uint32_t>(a.stride_log2(), 63)) << " of " << a.collectives() << " collectives"
          << (a.buckets().empty() ? "" : ", with sizes") << (a.held().empty() ? "" : ", with GPU-held times") << "\n";
    }
    if (p.asked_collectives_size() > 0)
      out << "    " << p.asked_collectives_size() << " let-go collectives kept as asked\n";
    if (!opts.records) continue;
    trace::Record rec;
    for (const summary::WindowRecord& w : p.records()) {
      std::string line;
      if (rec.ParseFromString(w.record())) printer.PrintToString(rec, &line);
      out << "    @" << w.offset() << " " << (line.empty() ? "(does not parse)" : line) << "\n";
    }
    for (const summary::PastCollective& a : p.asked_collectives()) {
      std::string line;
      if (rec.ParseFromString(a.record())) printer.PrintToString(rec, &line);
      out << "    asked #" << a.position() << " @" << a.offset() << " " << (line.empty() ? "(does not parse)" : line)
          << "\n";
    }
  }
  if (!ok) err << "ncclwatch dump: " << error << "\n";
  return ok;
}

}  // namespace

int Dump(const std::vector<std::string>& paths, const DumpOptions& opts, std::ostream& out, std::ostream& err) {
  TraceInputs in = ListTraceInputs(paths);
  int status = 0;
  for (const std::string& e : in.errors) {
    err << "ncclwatch dump: " << e << "\n";
    status = 2;
  }
  for (const std::string& f : in.files) {
    std::string head;
    RegularFile file;
    if (ReadFileHead(f, 4096, &head, &file) && LooksLikeSummary(head)) {
      if (!DumpSummary(f, opts, out, err)) status = std::max(status, 1);
      continue;
    }
    TraceReader reader;
    std::string error;
    if (!reader.Open(f, &error)) {
      err << "ncclwatch dump: " << error << "\n";
      status = 2;
      continue;
    }
    out << "== " << Printable(f) << "\n";
    std::map<uint32_t, std::string> strings;
    trace::Record rec;
    uint64_t off = 0;
    uint64_t ops = 0, done = 0, gpu = 0, tracked = 0, raw = 0, stuck = 0, heartbeats = 0;
    std::map<uint64_t, bool> pending;  // tracked ops without completion yet
    std::string drops;
    std::vector<std::string> mask_changes;
    google::protobuf::TextFormat::Printer printer;
    SingleLine(&printer);
    while (reader.Next(&rec, &off)) {
      switch (rec.body_case()) {
        case trace::Record::kStringDef:
          strings[rec.string_def().id()] = rec.string_def().text();
          break;
        case trace::Record::kOp: {
          ++ops;
          const auto& o = rec.op();
          if (o.completion_tracked() || o.has_completion()) ++tracked;
          if (o.has_completion()) {
            ++done;
            if (o.completion().gpu_timing() || o.completion().gpu_duration_ns() > 0) ++gpu;
          } else if (o.completion_tracked()) {
            pending[o.event_id()] = true;
          }
          break;
        }
        case trace::Record::kOpDone:
          ++done;
          if (rec.op_done().gpu_timing() || rec.op_done().gpu_duration_ns() > 0) ++gpu;
          pending.erase(rec.op_done().event_id());
          break;
        case trace::Record::kEventStart:
        case trace::Record::kEventStop:
        case trace::Record::kEventState:
          ++raw;
          break;
        case trace::Record::kStuck:
          ++stuck;
          break;
        case trace::Record::kHeartbeat:
          ++heartbeats;
          break;
        case trace::Record::kDrops: {
          std::string s;
          printer.PrintToString(rec.drops(), &s);
          drops = s;
          break;
        }
        case trace::Record::kMaskChange:
          mask_changes.push_back(MaskChangeLine(rec.mask_change()));
          break;
        default:
          break;
      }
      if (opts.records) {
        std::string s;
        printer.PrintToString(rec, &s);
        if (rec.has_op()) {
          const auto& o = rec.op();
          auto name = [&](uint32_t id) {
            if (id == 0) return std::string("-");
            return strings.count(id) ? Printable(CutName(strings[id])) : std::string("?");
          };
          s = name(o.func()) + " " + name(o.datatype()) + " " + name(o.algo()) + "/" + name(o.proto()) + "  " + s;
        } else if (rec.has_mask_change()) {
          s = mask_changes.back() + "  " + s;
        }
        out << "@" << off << " " << s << "\n";
      }
    }
    out << "-- " << reader.records_read() << " records: " << ops << " operations enqueued (" << tracked
        << " with completion tracking), " << done << " completed, " << gpu << " with GPU timing, " << pending.size()
        << " never completed; " << raw << " raw event records; " << heartbeats << " heartbeats; " << stuck
        << " stuck reports\n";
    if (!drops.empty()) out << "-- drops: " << drops << "\n";
    for (const std::string& m : mask_changes) out << "-- " << m << "\n";
    for (const std::string& line : reader.IssueLines()) out << "-- " << line << "\n";
    // A cut tail is how a killed process's file ends; anything else means
    // the file is not (all) what the plugin wrote.
    for (const ReadIssue& i : reader.issues())
      if (i.kind != ReadIssue::kCutTail && i.kind != ReadIssue::kUnknownFields) status = std::max(status, 1);
  }
  return status;
}

}  // namespace ncclwatch::tools

// libFuzzer target: an answer of NCCL's RAS (`ncclwatch ras`, read by
// `diagnose --ras` and `watch --ras`) on arbitrary bytes.
//
// Each parser (text, JSON, and the choice between them) must refuse with a
// message or accept. What is accepted must hold up: its lines are made,
// and it goes under a verdict (AddRasEvidence) that keeps its verdict,
// exit status and culprits, and is printed as text and JSON. Nothing may
// crash, hang or allocate unbounded memory.
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>

#include "proto/report.pb.h"
#include "tools/diagnose/diagnose.h"
#include "tools/json.h"
#include "tools/ras/evidence.h"
#include "tools/ras/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ncclwatch;         // NOLINT: a fuzz target's one function
  using namespace ncclwatch::tools;  // NOLINT
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (auto parse : {&ParseRasText, &ParseRasJson, &ParseRasAnswer}) {
    report::RasView v;
    std::string error;
    if (!parse(bytes, &v, &error) && error.empty()) __builtin_trap();
  }
  const report::RasReport r = RasReportOf("fuzz", bytes);
  if (r.error().empty() == !r.has_view()) __builtin_trap();
  if (r.error().empty() && r.lines_size() == 0) __builtin_trap();
  // Under a verdict whose first finding names a communicator the answer may
  // hold, with a cause RAS may tell more about.
  report::Diagnosis d;
  d.set_verdict("HANG: the traces' verdict");
  d.set_exit_status(1);
  report::Finding* f = d.add_findings();
  f->set_comm_hash(r.view().comms_size() > 0 ? r.view().comms(0).hash() : 1);
  f->set_cause(report::CAUSE_UNKNOWN);
  report::ProcRef* p = f->add_culprits();
  p->set_name("rank 1");
  p->set_comm_rank(1);
  const report::Diagnosis before = d;
  AddRasEvidence(r, {1, 2}, &d);
  if (d.verdict() != before.verdict() || d.exit_status() != before.exit_status() ||
      d.findings(0).culprits_size() != 1 || d.findings(0).culprits(0).name() != "rank 1")
    __builtin_trap();
  std::string sink = FormatText(d) + ReportJson(d);
  (void)sink;
  return 0;
}

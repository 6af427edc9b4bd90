#include "tools/model/model.h"

#include <stdio.h>

#include <utility>

#include "tools/model/inputs.h"
#include "tools/model/loader.h"
#include "tools/reader/reader.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {

uint16_t Model::Intern(const std::string& raw) {
  // Function, datatype, algorithm and protocol names: a real one is a few
  // bytes, a longer one is held and shown cut.
  const std::string s = CutName(raw);
  auto it = string_ids.find(s);
  if (it != string_ids.end()) return it->second;
  if (strings.size() >= 65535) return 0;
  uint16_t id = static_cast<uint16_t>(strings.size());
  strings.push_back(s);
  string_ids.emplace(s, id);
  return id;
}

std::string Comm::Label() const {
  std::string n;
  // A sentence shows the name escaped (tools/text/safe_text.h): it cannot
  // end the line or steer a terminal, whichever output carries it.
  if (!name.empty()) {
    n = "'" + Printable(name) + "'";
  } else {
    char buf[32];
    snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(hash));
    n = buf;
  }
  const std::string size = size_guessed ? "size unknown, " + std::to_string(members.size()) + " given"
                                        : std::to_string(nranks) + " ranks";
  if (name.empty() && !process_group.empty()) return n + tag + " (process group '" + Printable(process_group) + "', " + size + ")";
  return n + tag + " (" + size + ")";
}

std::string ProcName(const Model& m, uint32_t proc) {
  if (proc >= m.procs.size()) return "unknown process";
  const Proc& p = m.procs[proc];
  if (p.launcher_rank >= 0) return "rank " + std::to_string(p.launcher_rank);
  // The rank in the largest communicator it belongs to (the world, usually).
  int32_t best_rank = -1, best_size = -1;
  for (const Comm& c : m.comms)
    for (const CommMember& mem : c.members)
      // A communicator of unknown size (profiler API v1 to v3) says 0 for
      // every rank: no name comes from it (seen on NCCL 2.23.4: both of a
      // job's processes named "rank 0").
      if (mem.proc == proc && mem.rank >= 0 && c.nranks > 0 && !c.size_guessed && c.nranks > best_size) {
        best_size = c.nranks;
        best_rank = mem.rank;
      }
  if (best_rank >= 0) return "rank " + std::to_string(best_rank);
  return "pid " + std::to_string(p.pid) + "@" + p.host;
}

bool LoadModel(const std::vector<std::string>& inputs, const LoadOptions& opts, Model* m, std::string* error) {
  TraceInputs in = ListTraceInputs(inputs);
  if (!ScreenTraceInputs(opts.job, &in, error)) {
    m->errors.insert(m->errors.end(), in.errors.begin(), in.errors.end());
    return false;
  }
  ModelLoader loader(opts);
  for (std::string& e : in.errors) loader.AddError(std::move(e));
  for (std::string& n : in.notes) loader.AddNote(std::move(n));
  loader.ReserveForBytes(in.data_bytes);
  for (const std::string& path : in.files) {
    TraceReader reader;
    std::string open_error;
    if (!(reader.Open(path, &open_error) ? loader.Read(&reader) : loader.FileError(open_error))) break;
  }
  return loader.Finish(m, error);
}

bool LoadModelFromBytes(const std::vector<std::pair<std::string, std::string>>& named_files, const LoadOptions& opts,
                        Model* m, std::string* error) {
  std::vector<std::pair<std::string, std::string>> files = named_files;
  std::vector<std::string> notes;
  if (!ScreenTraceBytes(opts.job, &files, &notes, error)) {
    m->notes.insert(m->notes.end(), notes.begin(), notes.end());
    return false;
  }
  ModelLoader loader(opts);
  for (std::string& n : notes) loader.AddNote(std::move(n));
  uint64_t bytes = 0;
  for (const auto& f : files) bytes += f.second.size();
  loader.ReserveForBytes(bytes);
  for (auto& [name, data] : files) {
    TraceReader reader;
    reader.OpenBytes(name, std::move(data));
    if (!loader.Read(&reader)) break;
  }
  return loader.Finish(m, error);
}

bool BuildModel(const std::vector<std::string>& inputs, const LoadOptions& opts, Model* model, std::string* error) {
  if (!LoadModel(inputs, opts, model, error)) return false;
  MatchOps(model);
  AlignClocks(model);
  return true;
}

std::vector<std::pair<int32_t, uint32_t>> Present(const Model& m, const Match& mt) {
  std::vector<std::pair<int32_t, uint32_t>> v;
  for (size_t s = 0; s < mt.ops.size(); ++s)
    if (mt.ops[s] != kNone)
      v.push_back({mt.kind == OpKind::kColl ? RankOfSlot(m, mt, s) : static_cast<int32_t>(s), mt.ops[s]});
  return v;
}

}  // namespace ncclwatch::tools

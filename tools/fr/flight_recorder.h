// PyTorch's Flight Recorder dumps joined to the NCCL records, so that a
// verdict names the process group of each communicator and the Python line
// of each rank's call.
//
// PyTorch writes one dump per rank on a watchdog timeout
// (TORCH_FR_DUMP_TEMP_FILE, default /tmp/nccl_trace_rank_<rank>): a pickled
// dict whose `entries` are the rank's last collectives, each with its
// process group, its sequence number in that group (`collective_seq_id`,
// from 1) and the Python frames of the call (tools/fr/pickle.h reads it).
//
// The join: a group's ranks (pg_config) give the communicator's size and
// the dump's position in it. Among the communicators of that size that the
// rank's process belongs to, the one whose collectives, in program order,
// have the functions of the group's entries in seq order is the group's:
// entry #k is the rank's k-th collective on it. A group that lines up with
// no communicator, or with several, is left out with a note; so is an entry
// NCCL runs as point-to-point operations (all_to_all, gather, scatter), and
// everything after it.
//
// Thread safety: no state of their own, but not pure: JoinFlightRecorder
// reads the dump files and writes each joined communicator's
// Comm::process_group into the model it is given, and
// AddFlightRecorderEvidence writes the Diagnosis it is given; nothing else
// may use those meanwhile.
#ifndef TOOLS_FR_FLIGHT_RECORDER_H_
#define TOOLS_FR_FLIGHT_RECORDER_H_

#include <stdint.h>

#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "proto/report.pb.h"
#include "tools/model/model.h"

namespace ncclwatch::tools {

struct FrFrame {
  std::string file;
  int64_t line = 0;
  std::string name;
};

struct FrEntry {
  std::string pg;             // the group's key in pg_config ("0")
  std::string pg_desc;        // "default_pg", or the user's description
  int64_t collective_seq_id = 0;
  bool is_p2p = false;
  std::string profiling_name;  // "nccl:all_reduce"
  std::string state;           // "scheduled", "started", "completed"
  std::vector<FrFrame> frames;  // innermost first, as PyTorch records them
};

struct FrGroup {
  std::string desc;
  std::vector<int64_t> ranks;  // global ranks, in group rank order
};

struct FrDump {
  std::string path;
  int64_t rank = -1;  // the global rank: the file name's trailing number
  std::string version;
  std::string nccl_version;  // comm_lib_version
  std::map<std::string, FrGroup> groups;
  std::vector<FrEntry> entries;
};

// Parses one dump; false with `error` ("offset N: ..." or what is missing).
bool ParseFrDump(const std::string& path, std::string_view bytes, FrDump* dump, std::string* error);

// A file that looks like a Flight Recorder dump: a pickle (protocol 2 to 5)
// whose name ends in a rank number.
bool LooksLikeFrDump(const std::string& path, std::string_view head);
// The name test alone, for searching folders: it ends in a rank number.
bool MayBeFrDumpName(const std::string& name);

// One rank's call as Flight Recorder saw it.
struct FrCall {
  const FrEntry* entry = nullptr;
  int64_t rank = -1;
};

struct FrJoin {
  std::vector<FrDump> dumps;
  // Model::ops index -> the rank's Flight Recorder entry for it.
  std::unordered_map<uint32_t, FrCall> by_op;
  // Model::procs index -> the call it is in: its oldest entry not completed,
  // or its newest when all completed.
  std::unordered_map<uint32_t, FrCall> last_by_proc;
  std::vector<std::string> notes;  // dumps that could not be used or joined, with why
};

// Reads the dumps among `files` (those LooksLikeFrDump accepts, and every
// file named in `explicit_files`), joins them to `model`, and names each
// joined communicator's process group (Comm::process_group).
FrJoin JoinFlightRecorder(const std::vector<std::string>& files, const std::vector<std::string>& explicit_files,
                          Model* model);

// Adds the Python calls of each finding's ranks (Finding.python_calls and an
// evidence line each) and the join's notes (input issues).
void AddFlightRecorderEvidence(const Model& model, const FrJoin& join, report::Diagnosis* d);

}  // namespace ncclwatch::tools

#endif  // TOOLS_FR_FLIGHT_RECORDER_H_

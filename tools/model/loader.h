// Builds the job's Model from trace records fed one at a time, file by file.
//
// LoadModel reads files through a TraceReader; `watch` holds windows of
// growing files as records; a per-node summarizer reads a node's files and
// lets them go. All of them feed the same loader, so the model, its checks
// (damage, consistency of every value, sequence numbers, communicator
// members, host clocks) and its rules (aborts, lost completions) are one
// code path whatever the records come from:
//
//   ModelLoader loader(opts);
//   loader.BeginFile(path);
//   for each record of the file, in file order: loader.Add(record, offset);
//   loader.EndFile(reader.cut_tail(), reader.issues());
//   ... more files ...
//   loader.Finish(&model, &error);
//
// A record is what TraceReader::Next returns: an Op's start_ns resolved
// from the start_delta_ns chain (an Op whose start_ns is absolute and whose
// delta is 0 reads the same). `offset` is the record's byte offset in its
// file: where damage found in it is said to be.
//
// Contract: files one after another (BeginFile ... EndFile, never nested);
// Finish once, last. What a file adds stays in the model while the next
// ones are read: memory is the Model's (an Op is 96 bytes) plus, while a
// file is open, its maps of string, communicator and event ids. Nothing of
// a record is kept but what the Model holds. Finish runs the checks across
// files and the rules that need every file (FinishLoad in the .cc).
//
// Must not be used to update a model already finished: the rules that need
// every file have run, and a record added after them would not be judged by
// them. Build a new one (watch does, every poll).
//
// Thread safety: one thread; one loader per model.

#ifndef TOOLS_MODEL_LOADER_H_
#define TOOLS_MODEL_LOADER_H_

#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "proto/trace.pb.h"
#include "tools/model/model.h"
#include "tools/reader/reader.h"

namespace ncclwatch::tools {

class ModelLoader {
 public:
  // `opts.windows`: the files are windows of files (ncclwatch watch), so
  // the checks of a whole file are not made; `opts.keep_going`: whether an
  // unusable file stops the load (see EndFile). `opts.job` is the caller's:
  // screen the files first (inputs.h).
  explicit ModelLoader(const LoadOptions& opts);
  ~ModelLoader();
  ModelLoader(const ModelLoader&) = delete;
  ModelLoader& operator=(const ModelLoader&) = delete;

  // Room for the operations of `file_bytes` bytes of trace files (a folded
  // operation takes ~45 bytes), or of `ops` operations: growing by doubling
  // would briefly hold 1.5 copies. Optional; before the first file.
  void ReserveForBytes(uint64_t file_bytes);
  void ReserveOps(uint64_t ops);

  // About the input, beside the files: a path that could not be used
  // (Model::errors; it does not stop the load) and a note (Model::notes).
  void AddError(std::string error);
  void AddNote(std::string note);

  // A file (`path`: its name in the model and in messages) that could not
  // be opened: Model::errors. False when the load stops there
  // (!keep_going): Finish then fails with `error`.
  bool FileError(std::string error);

  // Starts a file: its records follow, in file order.
  void BeginFile(const std::string& path);
  // The same for a window of a file (a per-node summary's, beside whole
  // files): the checks of a whole file are not made on it, as with
  // LoadOptions::windows.
  void BeginWindow(const std::string& path);
  void Add(const trace::Record& record, uint64_t offset);
  // Ends the file with what its reader knew: whether its tail was cut, and
  // the issues it met (ReadIssue: damage where the framing or a record
  // broke). A file without a process header is no trace: it is dropped and
  // named in Model::errors, and then, without keep_going, the load stops
  // (false; Finish fails).
  bool EndFile(bool cut_tail, const std::vector<ReadIssue>& issues);

  // BeginFile, each record of `reader`, EndFile: a whole file.
  bool Read(TraceReader* reader);

  // The model (replacing `*model`), after the checks across files and the
  // rules that need every file. False with `error` when the load stopped
  // (FileError, EndFile), when no file was usable, or when the files hold
  // processes of several jobs; `*model` then holds what was read (its
  // errors and notes).
  bool Finish(Model* model, std::string* error);

  // What the open file's records built so far (the loader's own).
  struct FileState;

 private:
  LoadOptions opts_;
  Model model_;
  std::unique_ptr<FileState> fs_;  // the open file's
  uint32_t pi_ = kNone;            // its Model::procs index
  std::string stop_error_;         // why the load stopped ("" while it goes on)
};

}  // namespace ncclwatch::tools

#endif  // TOOLS_MODEL_LOADER_H_

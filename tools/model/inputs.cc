#include "tools/model/inputs.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "proto/trace.pb.h"
#include "tools/reader/reader.h"
#include "tools/text/safe_text.h"

namespace ncclwatch::tools {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class Lister {
 public:
  // `accept`: which names a folder's search keeps; `what`: them, for the
  // error of a folder without any (empty: no such error).
  Lister(bool (*accept)(const std::string& name), std::string what) : accept_(accept), what_(std::move(what)) {}

  TraceInputs Run(const std::vector<std::string>& paths) {
    for (const std::string& p : paths) {
      struct stat st;
      if (stat(p.c_str(), &st) != 0) {
        out_.errors.push_back("cannot open " + p + ": " + strerror(errno));
      } else if (S_ISDIR(st.st_mode)) {
        const size_t before = out_.files.size() + dup_count_;
        const size_t errors_before = out_.errors.size();
        Folder(p, 0);
        if (!what_.empty() && out_.files.size() + dup_count_ == before && out_.errors.size() == errors_before)
          out_.errors.push_back(p + ": folder holds no " + what_ + " (searched recursively)");
      } else {
        File(p, st);
      }
    }
    return std::move(out_);
  }

 private:
  void Folder(const std::string& dir, int depth) {
    if (depth > kMaxFolderDepth) {
      out_.errors.push_back(dir + ": more than " + std::to_string(kMaxFolderDepth) + " folders deep; not searched");
      return;
    }
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) {
      out_.errors.push_back("cannot read folder " + dir + ": " + strerror(errno));
      return;
    }
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string path = dir + "/" + name;
      struct stat lst;
      if (lstat(path.c_str(), &lst) != 0) continue;
      // Linked folders are not followed: a link back up would never end.
      if (S_ISDIR(lst.st_mode)) {
        Folder(path, depth + 1);
      } else if (accept_(name)) {
        struct stat st;
        if (stat(path.c_str(), &st) != 0) {
          out_.errors.push_back("cannot open " + path + ": " + strerror(errno));
          continue;
        }
        File(path, st);
      }
    }
  }

  void File(const std::string& path, const struct stat& st) {
    if (!S_ISREG(st.st_mode)) {
      out_.errors.push_back(path + ": not a regular file (" + FileTypeName(st.st_mode) +
                            "); trace files are regular files");
      return;
    }
    auto [it, fresh] = seen_.emplace(std::make_pair(st.st_dev, st.st_ino), path);
    if (!fresh) {
      ++dup_count_;
      out_.notes.push_back(path + " is " + it->second + " again: read once");
      return;
    }
    out_.files.push_back(path);
    // Allocated bytes, not the size: a file made sparse (truncate -s 16G)
    // must not size the model's reservations.
    out_.data_bytes += std::min<uint64_t>(static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_blocks) * 512);
  }

  bool (*accept_)(const std::string& name);
  std::string what_;
  TraceInputs out_;
  std::map<std::pair<dev_t, ino_t>, std::string> seen_;
  size_t dup_count_ = 0;
};

}  // namespace

bool IsTraceFileName(const std::string& name) { return EndsWith(name, ".ncclwatch"); }
bool IsSummaryFileName(const std::string& name) { return EndsWith(name, ".ncclsummary"); }
bool IsInputFileName(const std::string& name) { return IsTraceFileName(name) || IsSummaryFileName(name); }

TraceInputs ListTraceInputs(const std::vector<std::string>& paths) {
  return Lister(&IsInputFileName, "*.ncclwatch or *.ncclsummary file").Run(paths);
}

TraceInputs ListFiles(const std::vector<std::string>& paths, bool (*accept)(const std::string& name)) {
  return Lister(accept, "").Run(paths);
}

std::string ListFew(const std::vector<std::string>& files) {
  std::string s;
  for (size_t i = 0; i < files.size() && i < 3; ++i) s += (i ? ", " : "") + files[i];
  if (files.size() > 3) s += " and " + std::to_string(files.size() - 3) + " more";
  return s;
}

namespace {

using HeaderFacts = TraceHeaderFacts;

// A file's header is the first record after its batch's opening: a few
// records into its first kHeadBytes.
constexpr size_t kHeadBytes = 64 << 10;

HeaderFacts ReadHeaderFacts(const std::string& name, std::string head, uint64_t size) {
  HeaderFacts h;
  h.size = size;
  TraceReader r;
  r.OpenBytes(name, std::move(head));
  trace::Record rec;
  uint64_t offset = 0;
  for (int i = 0; i < 4 && r.Next(&rec, &offset); ++i)
    if (rec.has_header()) return HeaderFactsOf(rec.header(), size);
  return h;
}

// A header's CLOCK_REALTIME as "2026-11-25 14:02:11 UTC".
std::string UtcTime(uint64_t realtime_ns) {
  const time_t t = static_cast<time_t>(realtime_ns / 1000000000ull);
  struct tm tm;
  char buf[64];
  if (gmtime_r(&t, &tm) == nullptr || strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
    return "at an unreadable time";
  return buf;
}

// `--job=ID`, quoted for a shell where the id needs it.
std::string JobFlag(const std::string& id) {
  const bool plain = std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._:+@%/-", c);
  });
  if (plain) return "--job=" + id;
  std::string q = "--job='";
  for (char c : id) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The error for files of several jobs: each job's id as the flag that picks
// it, its first file and its start, oldest first (a reused folder holds the
// runs in the order they ran).
std::string SeveralJobs(const std::vector<HeaderFacts>& facts, const std::vector<std::string>& names,
                        const std::vector<bool>& keep, const std::map<std::string, std::vector<std::string>>& by_job) {
  struct Job {
    std::string id;
    size_t files = 0;
    size_t first = 0;  // the file of its earliest process
  };
  std::map<std::string, Job> jobs;
  for (size_t i = 0; i < facts.size(); ++i) {
    if (!keep[i] || !facts[i].found || facts[i].job_id.empty()) continue;
    auto [it, fresh] = jobs.try_emplace(facts[i].job_id);
    Job& j = it->second;
    j.id = facts[i].job_id;
    if (fresh || facts[i].realtime_base_ns < facts[j.first].realtime_base_ns) j.first = i;
    ++j.files;
  }
  std::vector<Job> order;
  for (auto& [id, j] : jobs) order.push_back(j);
  std::stable_sort(order.begin(), order.end(), [&](const Job& a, const Job& b) {
    return facts[a.first].realtime_base_ns < facts[b.first].realtime_base_ns;
  });
  std::string e = "the files hold " + std::to_string(by_job.size()) + " jobs; read one with --job: ";
  for (size_t k = 0; k < order.size(); ++k) {
    const Job& j = order[k];
    e += (k ? "; " : "") + JobFlag(j.id) + " (started " + UtcTime(facts[j.first].realtime_base_ns) + ", " +
         std::to_string(j.files) + (j.files == 1 ? " file" : " files") + ", first " + names[j.first] + ")";
  }
  return e;
}

// Which of `names` (with their headers' facts) to keep: see ScreenTraceInputs.
bool Screen(const std::string& job, const std::vector<HeaderFacts>& facts, const std::vector<std::string>& names,
            std::vector<bool>* keep_out, std::vector<std::string>* notes, std::string* error) {
  // One file per process: the same host, pid and start cannot be two processes.
  std::map<std::tuple<std::string, int64_t, uint64_t, uint64_t>, size_t> first;
  std::vector<bool> keep(names.size(), true);
  for (size_t i = 0; i < facts.size(); ++i) {
    if (!facts[i].found) continue;
    auto key = std::make_tuple(facts[i].host, facts[i].pid, facts[i].mono_base_ns, facts[i].realtime_base_ns);
    auto [it, fresh] = first.emplace(key, i);
    if (fresh) continue;
    size_t& kept = it->second;
    const size_t dropped = facts[i].size > facts[kept].size ? kept : i;
    if (dropped == kept) kept = i;
    keep[dropped] = false;
    notes->push_back(names[dropped] + " holds the same process as " + names[kept] + " (pid " +
                        std::to_string(facts[i].pid) + "@" + facts[i].host + "): read once, the longer file");
  }

  // One job.
  std::map<std::string, std::vector<std::string>> by_job;
  for (size_t i = 0; i < facts.size(); ++i)
    if (keep[i] && facts[i].found && !facts[i].job_id.empty()) by_job[facts[i].job_id].push_back(names[i]);
  if (!job.empty()) {
    if (!by_job.count(job)) {
      std::string ids;
      for (const auto& [id, files] : by_job) ids += (ids.empty() ? "" : ", ") + ("'" + id + "'");
      *error = "no file of job '" + job + "'" + (ids.empty() ? " (the files record no job id)" : " (jobs found: " + ids + ")");
      return false;
    }
    for (size_t i = 0; i < facts.size(); ++i)
      if (keep[i] && facts[i].found && facts[i].job_id != job) {
        keep[i] = false;
        notes->push_back(names[i] + ": job '" + facts[i].job_id + "', not '" + job + "': skipped");
      }
  } else if (by_job.size() > 1) {
    *error = SeveralJobs(facts, names, keep, by_job);
    return false;
  }
  *keep_out = keep;
  return true;
}

}  // namespace

TraceHeaderFacts HeaderFactsOf(const trace::ProcessHeader& header, uint64_t size) {
  TraceHeaderFacts h;
  h.found = true;
  h.host = CutName(header.hostname());
  h.pid = header.pid();
  h.mono_base_ns = header.mono_base_ns();
  h.realtime_base_ns = header.realtime_base_ns();
  h.job_id = CutName(header.job_id());
  h.size = size;
  return h;
}

bool ScreenTraceHeaders(const std::string& job, const std::vector<TraceHeaderFacts>& facts,
                        const std::vector<std::string>& names, std::vector<bool>* keep,
                        std::vector<std::string>* notes, std::string* error) {
  return Screen(job, facts, names, keep, notes, error);
}

bool ScreenTraceInputs(const std::string& job, TraceInputs* in, std::string* error) {
  std::vector<HeaderFacts> facts;
  facts.reserve(in->files.size());
  for (const std::string& f : in->files) {
    std::string head;
    RegularFile file;
    facts.push_back(ReadFileHead(f, kHeadBytes, &head, &file) ? ReadHeaderFacts(f, std::move(head), file.size)
                                                              : HeaderFacts{});
  }
  std::vector<bool> keep;
  if (!Screen(job, facts, in->files, &keep, &in->notes, error)) return false;
  std::vector<std::string> files;
  for (size_t i = 0; i < in->files.size(); ++i)
    if (keep[i]) files.push_back(in->files[i]);
  in->files.swap(files);
  return true;
}

bool ScreenTraceBytes(const std::string& job, std::vector<std::pair<std::string, std::string>>* files,
                      std::vector<std::string>* notes, std::string* error) {
  std::vector<HeaderFacts> facts;
  std::vector<std::string> names;
  for (const auto& [name, bytes] : *files) {
    facts.push_back(ReadHeaderFacts(name, bytes.substr(0, std::min(bytes.size(), kHeadBytes)), bytes.size()));
    names.push_back(name);
  }
  std::vector<bool> keep;
  if (!Screen(job, facts, names, &keep, notes, error)) return false;
  std::vector<std::pair<std::string, std::string>> kept;
  for (size_t i = 0; i < files->size(); ++i)
    if (keep[i]) kept.push_back(std::move((*files)[i]));
  files->swap(kept);
  return true;
}

}  // namespace ncclwatch::tools

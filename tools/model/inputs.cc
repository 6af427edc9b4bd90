#include "tools/model/inputs.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <utility>

#include "tools/reader/reader.h"

namespace ncclwatch::tools {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class Lister {
 public:
  TraceInputs Run(const std::vector<std::string>& paths) {
    for (const std::string& p : paths) {
      struct stat st;
      if (stat(p.c_str(), &st) != 0) {
        out_.errors.push_back("cannot open " + p + ": " + strerror(errno));
      } else if (S_ISDIR(st.st_mode)) {
        const size_t before = out_.files.size() + dup_count_;
        const size_t errors_before = out_.errors.size();
        Folder(p, 0);
        if (out_.files.size() + dup_count_ == before && out_.errors.size() == errors_before)
          out_.errors.push_back(p + ": folder holds no *.ncclwatch file (searched recursively)");
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
      } else if (EndsWith(name, ".ncclwatch")) {
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

  TraceInputs out_;
  std::map<std::pair<dev_t, ino_t>, std::string> seen_;
  size_t dup_count_ = 0;
};

}  // namespace

TraceInputs ListTraceInputs(const std::vector<std::string>& paths) { return Lister().Run(paths); }

}  // namespace ncclwatch::tools

// damage_scan DIR [STRIDE]: changes one byte at a time of every trace file
// in DIR (every STRIDE-th offset, default 1; each byte XORed with 0x01, 0x02,
// 0x04, 0x08, 0x10, 0x20, 0x40, 0x80 and 0xff) and prints each verdict that
// fails the check of damage.h (CheckOneByte), one line each. Exit 1 when any
// was printed. A tool for finding the classes of damage the analyses still
// believe; damage_regression_test makes the same check on a sample.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/fuzz/damage.h"

int main(int argc, char** argv) {
  using namespace ncclwatch::fuzz;
  if (argc < 2) {
    fprintf(stderr, "usage: damage_scan DIR [STRIDE]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const size_t stride = argc > 2 ? std::max(1l, atol(argv[2])) : 1;
  Files files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    fprintf(stderr, "cannot open %s\n", dir.c_str());
    return 2;
  }
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= 10 || name.substr(name.size() - 10) != ".ncclwatch") continue;
    std::ifstream in(dir + "/" + name, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    files.emplace_back(name, s.str());
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string intact = VerdictOf(files);
  printf("intact: %s\n", intact.c_str());
  int bad = 0;
  const uint8_t masks[] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff};
  for (size_t f = 0; f < files.size(); ++f)
    for (size_t off = 0; off < files[f].second.size(); off += stride)
      for (uint8_t mask : masks) {
        const uint8_t value = static_cast<uint8_t>(files[f].second[off]) ^ mask;
        const std::string line = CheckOneByte(files, intact, f, off, value);
        if (line.empty()) continue;
        ++bad;
        printf("%s\n", line.c_str());
      }
  return bad > 0;
}

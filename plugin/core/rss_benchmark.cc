// Resident memory with N threads posting at once (BENCHMARKS.md, README):
// each thread that gets a buffer faults it in whole when it claims it;
// threads past the buffers cost nothing. Not a test: run it by hand.
//
//   bazel build -c opt //plugin:rss_benchmark
//   for n in 1 8 27 64; do bazel-bin/plugin/rss_benchmark $n; done

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plugin/testing/fake_nccl_host.h"

namespace {

long RssKb() {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof(line), f) != nullptr)
    if (strncmp(line, "VmRSS:", 6) == 0) kb = strtol(line + 6, nullptr, 10);
  fclose(f);
  return kb;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ncclwatch::testing;
  const int n = argc > 1 ? atoi(argv[1]) : 1;
  char dir[] = "/tmp/ncclwatch-rss-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  std::map<std::string, std::string> env = {{"NCCLWATCH_DIR", dir}};
  if (const char* mb = getenv("NCCLWATCH_BUFFER_MB")) env["NCCLWATCH_BUFFER_MB"] = mb;
  SetPluginEnv(env);
  PluginLib* lib = PluginLib::Shared();
  const long before = RssKb();
  FakeComm comm(lib, 5);
  if (comm.Init(0x1234, "world", 1, 2, 0) != 0) return 1;
  std::mutex mu;
  std::condition_variable cv;
  int ready = 0;
  bool release = false;
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, poster = comm.Alias(), t]() mutable {
      for (int k = 0; k < 200; ++k) {
        OpSpec s;
        s.seq = static_cast<uint64_t>(t * 1000 + k);
        poster.RunOp(s);
      }
      std::unique_lock<std::mutex> lock(mu);
      ++ready;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ready == n; });
  }
  const long during = RssKb();
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& th : threads) th.join();
  comm.Finalize();
  printf("threads %d: VmRSS %ld KiB before the plugin's first communicator, %ld KiB with every thread posting "
         "(+%ld KiB)\n",
         n, before, during, during - before);
  return 0;
}

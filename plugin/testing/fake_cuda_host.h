// The CPU tests' CUDA: loads the fake driver (fake_cuda.cc, soname
// libcuda.so.1) into the process before the plugin's first init, and gives
// the test its controls. The plugin then finds it as the process's
// libcuda.so.1, through the same dlopen(RTLD_NOLOAD) as on a GPU host.
//
// Thread safety: the controls may be called from any thread.

#ifndef PLUGIN_TESTING_FAKE_CUDA_HOST_H_
#define PLUGIN_TESTING_FAKE_CUDA_HOST_H_

#include <stdint.h>

namespace ncclwatch::testing {

struct FakeCuda {
  // The calling thread's current context (a fresh one, not destroyed).
  void (*make_current)(uintptr_t ctx);
  // A kernel queued on `stream`, as cuLaunchKernelEx would.
  void (*launch)(void* stream);
  // The GPU finishes everything queued on `stream` (up to a block).
  void (*run)(void* stream);
  void (*run_some)(void* stream, uint64_t n);
  // A host function that does not return until unblock: nothing after it runs.
  void (*block)(void* stream);
  void (*unblock)(void* stream);
  void (*set_capturing)(void* stream, int on);
  // Whether `stream` is capturing (what NCCL asks at an API call), and how
  // many times the plugin asked the driver (cuStreamIsCapturing).
  int (*is_capturing)(void* stream);
  uint64_t (*capture_checks)();
  void (*destroy_context)(uintptr_t ctx);
  void (*counts)(uint64_t* records, uint64_t* queries, uint64_t* creates);
};

// Loads it once per process (the test fails if it cannot).
FakeCuda* LoadFakeCuda();

}  // namespace ncclwatch::testing

#endif  // PLUGIN_TESTING_FAKE_CUDA_HOST_H_

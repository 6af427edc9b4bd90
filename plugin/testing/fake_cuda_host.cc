#include "plugin/testing/fake_cuda_host.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace ncclwatch::testing {

FakeCuda* LoadFakeCuda() {
  static FakeCuda* loaded = [] {
    const char* dir = getenv("TEST_SRCDIR");
    const char* ws = getenv("TEST_WORKSPACE");
    const std::string path = std::string(dir != nullptr ? dir : ".") + "/" + (ws != nullptr ? ws : "") +
                             "/plugin/testing/libfakecuda.so";
    // RTLD_GLOBAL: the plugin's lookup by soname finds it.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) {
      ADD_FAILURE() << "cannot load the fake CUDA driver " << path << ": " << dlerror();
      return static_cast<FakeCuda*>(nullptr);
    }
    auto* f = new FakeCuda;
    auto get = [&](const char* name) {
      void* s = dlsym(h, name);
      if (s == nullptr) ADD_FAILURE() << "fake CUDA driver lacks " << name;
      return s;
    };
    f->make_current = reinterpret_cast<void (*)(uintptr_t)>(get("fakecuda_make_current"));
    f->launch = reinterpret_cast<void (*)(void*)>(get("fakecuda_launch"));
    f->run = reinterpret_cast<void (*)(void*)>(get("fakecuda_run"));
    f->run_some = reinterpret_cast<void (*)(void*, uint64_t)>(get("fakecuda_run_some"));
    f->block = reinterpret_cast<void (*)(void*)>(get("fakecuda_block"));
    f->unblock = reinterpret_cast<void (*)(void*)>(get("fakecuda_unblock"));
    f->set_capturing = reinterpret_cast<void (*)(void*, int)>(get("fakecuda_set_capturing"));
    f->is_capturing = reinterpret_cast<int (*)(void*)>(get("fakecuda_is_capturing"));
    f->capture_checks = reinterpret_cast<uint64_t (*)()>(get("fakecuda_capture_checks"));
    f->destroy_context = reinterpret_cast<void (*)(uintptr_t)>(get("fakecuda_destroy_context"));
    f->counts = reinterpret_cast<void (*)(uint64_t*, uint64_t*, uint64_t*)>(get("fakecuda_counts"));
    return f;
  }();
  return loaded;
}

}  // namespace ncclwatch::testing

"""Shared compiler flags for ncclwatch.

C++17 itself is set globally in .bazelrc (--cxxopt/--host_cxxopt=-std=c++17),
so these lists are safe for C sources too.
"""

# Default flags for all first-party C/C++ code.
NCCLWATCH_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",
    "-Wno-missing-field-initializers",
]

# Extra flags for code that ends up in a shared library loaded into someone
# else's process (the NCCL plugin .so): export nothing by default, no
# exceptions escaping into C callers. Mark exported C entry points with
# __attribute__((visibility("default"))).
NCCLWATCH_PLUGIN_COPTS = NCCLWATCH_COPTS + [
    "-fvisibility=hidden",
    "-fvisibility-inlines-hidden",
    "-fno-exceptions",
]

# Flags for tests (gtest/gmock macros trip a few warnings on some compilers).
NCCLWATCH_TEST_COPTS = NCCLWATCH_COPTS + [
    "-Wno-sign-compare",
]

# Thread-locals on the plugin's hot path, in a .so that NCCL dlopens: GCC's
# TLS descriptors (-mtls-dialect=gnu2) make each access a call that returns
# a constant offset when the loader found the .so room in static TLS (the
# usual case: ours is a few words), where the default dialect calls
# __tls_get_addr every time (BENCHMARKS.md, "The launching thread's
# cost"). clang 14, which builds the sanitizer configurations, has no such
# flag for x86-64: there the default stays. On aarch64 descriptors are
# GCC's default already.
NCCLWATCH_TLS_COPTS = select({
    "//build_defs:sanitizer": [],
    "//build_defs:aarch64": [],
    "//conditions:default": ["-mtls-dialect=gnu2"],
})

# The ABI adapters (plugin/abi/exports.cc) zero a whole EventDesc, some 280
# bytes, for every event they pass on. GCC's generic tuning zeroes it with
# `rep stosq`, whose start-up costs more than the stores themselves; with
# vector stores an op cost 6 to 7% less time on the launch benchmark
# (BENCHMARKS.md, "The launching thread's cost"). clang 14, which builds the
# sanitizer configurations, has no such flag, nor has GCC for aarch64.
NCCLWATCH_ADAPTER_COPTS = select({
    "//build_defs:sanitizer": [],
    "//build_defs:aarch64": [],
    "//conditions:default": ["-mmemset-strategy=vector_loop:1024:noalign,libcall:-1:noalign"],
})

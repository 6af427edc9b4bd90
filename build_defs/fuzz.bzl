"""cc_fuzz: a libFuzzer target that also builds (and replays files) without libFuzzer.

    load("//build_defs:fuzz.bzl", "cc_fuzz")
    cc_fuzz(name = "parser_fuzz", srcs = ["parser_fuzz.cc"], deps = [...])

The sources define `extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t)`.
  * `bazel build --config=fuzz //pkg:parser_fuzz` -> real libFuzzer binary
    (clang-14, -fsanitize=fuzzer,address); run it as usual.
  * any other config -> linked with //build_defs:fuzz_driver_main, which runs
    each file given on the command line once (no fuzzing).
"""

load("//build_defs:copts.bzl", "NCCLWATCH_COPTS")

def cc_fuzz(name, srcs, deps = [], copts = NCCLWATCH_COPTS, linkopts = [], **kwargs):
    native.cc_binary(
        name = name,
        srcs = srcs,
        copts = copts,
        deps = deps + select({
            "//build_defs:fuzz_build": [],
            "//conditions:default": ["//build_defs:fuzz_driver_main"],
        }),
        linkopts = linkopts + select({
            "//build_defs:fuzz_build": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        **kwargs
    )

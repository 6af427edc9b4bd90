#!/usr/bin/env bash
# Builds libnccl-net-faulty.so and its test with the system C compiler (as on
# the GPU host, where Bazel is not used) and runs the test over loopback.
#   gpu/faulty_net_test.sh [OUTDIR]     (default out/; the .so is left there)
# CC picks the compiler (default cc). Exits with the test's status.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"  # dlopen wants a path, not a bare name
cc="${CC:-cc}"
flags=(-O2 -Wall -Wextra -Wno-unused-parameter -Werror)
"$cc" "${flags[@]}" -shared -fPIC -fvisibility=hidden \
  -o "$out/libnccl-net-faulty.so" \
  gpu/faulty_net.c gpu/faulty_net_fault.c gpu/faulty_net_abi.c -lpthread
"$cc" "${flags[@]}" -o "$out/faulty_net_test" gpu/faulty_net_test.c \
  -ldl -lpthread
"$out/faulty_net_test" "$out/libnccl-net-faulty.so"

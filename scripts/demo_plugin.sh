#!/usr/bin/env bash
# The plugin on the fake NCCL host: installs what is
# missing, builds the plugin and the ncclwatch command, runs a small job on
# the fake NCCL host with the plugin loaded (one all_reduce hangs), and prints
# what the plugin recorded.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install_deps.sh
bazel build -c opt //plugin:libnccl-profiler-ncclwatch.so //plugin/testing:demo_job //tools:ncclwatch
out=$(mktemp -d "${TMPDIR:-/tmp}/ncclwatch-demo.XXXXXX")
bazel run -c opt //plugin/testing:demo_job -- "$out"
echo
bazel-bin/tools/ncclwatch dump "$out"/*.ncclwatch

#!/usr/bin/env bash
# The README's main job on a fresh Debian 12 machine: installs what is
# missing, builds the ncclwatch command, and diagnoses a real hang recorded on
# 4 GPUs (testdata/gpu/skip: rank 3 skipped an all_reduce; the others' watchdog
# aborted after 8 s). Prints the verdict and its evidence.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install_deps.sh
bazel build -c opt //tools:ncclwatch
echo
echo "\$ ncclwatch diagnose testdata/gpu/skip"
set +e
bazel-out/k8-opt/bin/tools/ncclwatch diagnose testdata/gpu/skip
status=$?
set -e
echo
echo "(exit status $status: 0 healthy, 1 problem found, 2 unusable input, 3 evidence incomplete or damaged)"
# A problem found is what this recording holds: only unusable input fails the demo.
[[ $status -le 1 ]]

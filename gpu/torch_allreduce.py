#!/usr/bin/env python3
"""A torch.distributed NCCL workload, optionally with one rank skipping a collective.

Launch with torchrun, one process per GPU:

  torchrun --standalone --nproc_per_node=N gpu/torch_allreduce.py --steps S \
      [--skip-rank R --skip-step K] [--timeout-sec T] [--fr-dir DIR] [--sizes small|full]

Each step runs all_reduce, all_gather_into_tensor and broadcast (root = step % N) on
float32 tensors whose sizes walk 4 KiB..64 MiB (1 MiB with --sizes small), then
synchronizes the GPU. With --skip-rank, rank R does not call the all_reduce of step K
(default S/2): the other ranks wait in it, every later collective is out of step, and
PyTorch's NCCL watchdog times out after T seconds, dumps its Flight Recorder into
--fr-dir (one file per rank: DIR/nccl_trace_rank_<rank>) and tears the process down.

Environment set here before torch is imported (setdefault: yours wins, except
NCCL_NVLS_ENABLE, which is always forced to 0):
  NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_FR_BUFFER_SIZE=2000 (old and new names)
  TORCH_NCCL_DUMP_ON_TIMEOUT=1
  TORCH_FR_DUMP_TEMP_FILE and TORCH_NCCL_DEBUG_INFO_TEMP_FILE = <fr-dir>/nccl_trace_rank_
    (a file prefix: PyTorch appends the rank)
For ncclwatch traces also export NCCL_PROFILER_PLUGIN and NCCLWATCH_DIR before torchrun;
PyTorch's bundled NCCL loads the plugin.
"""

import argparse
import os
import sys
import time
from datetime import timedelta

MIN_BYTES = 4 << 10
SIZE_LEVELS = 15  # 4 KiB << 0..14 = 4 KiB..64 MiB


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--skip-rank", type=int, default=-1, help="rank that skips one all_reduce (default: none)")
    p.add_argument("--skip-step", type=int, default=-1, help="step whose all_reduce is skipped (default: steps/2)")
    p.add_argument("--timeout-sec", type=float, default=60.0, help="process group timeout (PyTorch watchdog)")
    p.add_argument("--fr-dir", default="./fr", help="directory for Flight Recorder dumps (default ./fr)")
    p.add_argument("--sizes", choices=("small", "full"), default="full", help="cap tensors at 1 MiB or 64 MiB")
    p.add_argument("--check", action="store_true", help="verify all_reduce results (healthy runs only)")
    a = p.parse_args()
    if a.steps < 1:
        p.error("--steps must be >= 1")
    if a.timeout_sec <= 0:
        p.error("--timeout-sec must be > 0")
    if a.skip_step < 0:
        a.skip_step = a.steps // 2
    return a


def set_env(args):
    nvls = os.environ.get("NCCL_NVLS_ENABLE")
    if nvls not in (None, "0"):
        print(f"NCCL_NVLS_ENABLE={nvls} overridden to 0", file=sys.stderr)
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", os.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"])
    os.environ.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    fr_dir = os.path.abspath(args.fr_dir)
    os.makedirs(fr_dir, exist_ok=True)
    prefix = os.path.join(fr_dir, "nccl_trace_rank_")
    os.environ.setdefault("TORCH_FR_DUMP_TEMP_FILE", prefix)
    os.environ.setdefault("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", os.environ["TORCH_FR_DUMP_TEMP_FILE"])


def size_at(level, max_bytes):
    return min(max_bytes, MIN_BYTES << (level % SIZE_LEVELS))


def human(nbytes):
    if nbytes >= 1 << 20 and nbytes % (1 << 20) == 0:
        return f"{nbytes >> 20} MiB"
    if nbytes >= 1024 and nbytes % 1024 == 0:
        return f"{nbytes >> 10} KiB"
    return f"{nbytes} B"


def main():
    args = parse_args()
    set_env(args)

    import torch  # after set_env: PyTorch reads some of these at import or init
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])

    def log(msg):
        print(f"[rank {rank}] {msg}", file=sys.stderr, flush=True)

    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    t0 = time.monotonic()
    dist.init_process_group("nccl", timeout=timedelta(seconds=args.timeout_sec), device_id=device)
    log(f"init on cuda:{local_rank} ({torch.cuda.get_device_name(device)}), world {world}, "
        f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, timeout {args.timeout_sec:g} s, "
        f"{(time.monotonic() - t0) * 1e3:.0f} ms; FR dumps to {os.environ['TORCH_FR_DUMP_TEMP_FILE']}<rank>")
    if 0 <= args.skip_rank < world:
        log(f"fault: rank {args.skip_rank} skips the all_reduce of step {args.skip_step}")

    max_bytes = (1 << 20) if args.sizes == "small" else (64 << 20)
    n_max = max_bytes // 4
    src = torch.full((n_max,), float(rank + 1), dtype=torch.float32, device=device)
    gather_out = torch.empty((n_max * world,), dtype=torch.float32, device=device)
    bcast = torch.empty((n_max,), dtype=torch.float32, device=device)
    torch.cuda.synchronize(device)

    t_all = time.monotonic()
    for step in range(args.steps):
        ts = time.monotonic()
        n_ar = size_at(step, max_bytes) // 4
        n_ag = size_at(step + 3, max_bytes) // 4 // world or 1
        n_bc = size_at(step + 6, max_bytes) // 4

        ar = src[:n_ar].clone()
        if rank == args.skip_rank and step == args.skip_step:
            log(f"fault: skipping all_reduce of step {step} ({human(n_ar * 4)})")
        else:
            dist.all_reduce(ar)
        dist.all_gather_into_tensor(gather_out[: n_ag * world], src[:n_ag])
        root = step % world
        if rank == root:
            bcast[:n_bc].fill_(float(step))
        dist.broadcast(bcast[:n_bc], src=root)
        torch.cuda.synchronize(device)

        if args.check:
            want = world * (world + 1) / 2
            got = ar[0].item()
            if got != want:
                raise RuntimeError(f"step {step}: all_reduce gave {got}, want {want}")
        log(f"step {step + 1}/{args.steps} done in {(time.monotonic() - ts) * 1e3:.2f} ms "
            f"(all_reduce {human(n_ar * 4)})")

    log(f"{args.steps} steps in {time.monotonic() - t_all:.2f} s")
    dist.destroy_process_group()
    log("process group destroyed")


if __name__ == "__main__":
    main()

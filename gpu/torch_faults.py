#!/usr/bin/env python3
"""PyTorch jobs with one fault each, for ncclwatch's framework fault matrix (testdata/torch/).

Launch with torchrun, one process per rank:

  torchrun --standalone --nproc_per_node=N gpu/torch_faults.py --fault NAME [--one-gpu]
      [--steps S] [--fault-rank R] [--fault-step K] [--timeout-sec T] [--fr-dir DIR]

Each step issues, on the default process group, all_reduce, all_gather_into_tensor,
reduce_scatter_tensor and broadcast (root = step % N) on small float32 tensors (up to 64 KiB),
then synchronizes the GPU. At step K (default 4) rank R (default 1) does the fault:

  healthy         nothing; destroy_process_group at the end
  kill            SIGKILLs itself after enqueuing the step's all_reduce (the OOM killer, a segfault)
  exception       raises RuntimeError before the step's all_reduce: Python exits 1
  os-exit         calls os._exit(3) before the step's all_reduce
  swap-completes  issues all_gather_into_tensor before all_reduce, of the same byte size, where the
                  others issue all_reduce first: over sockets NCCL completes both, with wrong data
  swap-hangs      the same with sizes that differ (all_reduce 64 KiB, all_gather 4 KiB per rank)
  count           all_reduce with half the count
  dtype           all_reduce in float16 (the same count, half the bytes)
  ag-mismatch     all_gather_into_tensor with half the input (FSDP's parameter gather)
  rs-mismatch     reduce_scatter_tensor with half the input (FSDP's gradient reduce)
  subgroup-skip   skips the all_reduce of a subgroup {0,1} that ranks 0 and 1 run every step
  idle            sleeps 3 x T before the step's all_reduce (a data loader, the GIL, a store)
  gpu-busy        launches a GPU kernel that spins for 3 x T before the step's all_reduce
  straggler       sleeps 250 ms before every all_reduce (nothing hangs)
  gpu-slow        launches a GPU kernel that spins about 100 ms on its default stream before every
                  all_reduce: its host enqueues in time, but the all_reduce waits behind the kernel
                  (PyTorch orders its NCCL stream after the default stream), and so do the others'
                  (slow, nothing hangs: what users see when PyTorch is slower than nccl-tests)
  threads         two process groups over all ranks, each driven by its own thread, 10
                  all_reduces each per step (healthy)
  p2p-peer        from step K on, even ranks send to the next rank and odd ranks receive from the
                  one before (PyTorch makes one communicator per pair at its first call); rank R
                  receives from the rank after it instead: ranks hang in the creation of pair
                  communicators that their peers never make
  net-stop        with NCCL_NET_PLUGIN=libnccl-net-faulty.so (gpu/faulty_net.c), at step K every
                  send of rank R stops on the network (its receives go on); every host lives
  net-link        the same on one connection of rank R only (one link between two ranks)
  net-slow        every send of rank R takes NET_FAULT_SLOW_MS (default 20) longer

With a hang the process-group watchdog times out after T seconds (default 10), dumps PyTorch's
Flight Recorder into --fr-dir (nccl_trace_rank_<rank>) and tears the process down; with a dead
rank torchrun's agent ends the others. --one-gpu puts every rank on cuda:0 with its own
NCCL_HOSTID, so NCCL takes them for separate nodes and connects them over sockets (loopback):
real NCCL on one GPU (../shared/gpu/one_gpu_ranks.py).

Environment set here before torch is imported: NCCL_NVLS_ENABLE=0 (always),
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, TORCH_FR_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1,
TORCH_FR_DUMP_TEMP_FILE=<fr-dir>/nccl_trace_rank_. For traces export NCCL_PROFILER_PLUGIN and
NCCLWATCH_DIR before torchrun.
"""

import argparse
import os
import signal
import sys
import threading
import time
from datetime import timedelta

FAULTS = ("healthy", "kill", "exception", "os-exit", "swap-completes", "swap-hangs", "count", "dtype",
          "ag-mismatch", "rs-mismatch", "subgroup-skip", "idle", "gpu-busy", "straggler", "gpu-slow", "threads",
          "p2p-peer", "net-stop", "net-link", "net-slow")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fault", choices=FAULTS, required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--fault-step", type=int, default=4)
    p.add_argument("--timeout-sec", type=float, default=10.0)
    p.add_argument("--fr-dir", default="./fr")
    p.add_argument("--one-gpu", action="store_true", help="every rank on cuda:0, each its own NCCL_HOSTID")
    a = p.parse_args()
    if a.steps <= a.fault_step:
        p.error("--steps must exceed --fault-step")
    return a


def set_env(args, rank):
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    os.environ.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    fr_dir = os.path.abspath(args.fr_dir)
    os.makedirs(fr_dir, exist_ok=True)
    os.environ.setdefault("TORCH_FR_DUMP_TEMP_FILE", os.path.join(fr_dir, "nccl_trace_rank_"))
    os.environ.setdefault("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", os.environ["TORCH_FR_DUMP_TEMP_FILE"])
    if args.one_gpu:
        os.environ.update(NCCL_HOSTID=f"host{rank}", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1")


def main():
    args = parse_args()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    set_env(args, rank)

    import torch  # after set_env
    import torch.distributed as dist

    def log(msg):
        print(f"[rank {rank}] {msg}", file=sys.stderr, flush=True)

    dev_index = 0 if args.one_gpu else int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(dev_index)
    device = torch.device("cuda", dev_index)
    dist.init_process_group("nccl", timeout=timedelta(seconds=args.timeout_sec), device_id=device)
    me = rank == args.fault_rank
    log(f"init: world {world}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, fault {args.fault} "
        f"on rank {args.fault_rank} at step {args.fault_step}")

    sub = dist.new_group([0, 1]) if args.fault == "subgroup-skip" else None
    pgs = [dist.new_group(list(range(world))) for _ in range(2)] if args.fault == "threads" else []
    for pg in pgs:  # create each communicator from the main thread, in one order on every rank
        dist.all_reduce(torch.ones(1, device=device), group=pg)

    n = 16 << 10  # 64 KiB of float32
    src = torch.full((n,), float(rank + 1), dtype=torch.float32, device=device)
    gathered = torch.empty((n * world,), dtype=torch.float32, device=device)
    scattered = torch.empty((n,), dtype=torch.float32, device=device)
    big_in = torch.full((n * world,), 1.0, dtype=torch.float32, device=device)
    bcast = torch.empty((n,), dtype=torch.float32, device=device)
    torch.cuda.synchronize(device)

    def thread_body(pg, x):
        for _ in range(10):
            dist.all_reduce(x, group=pg)

    for step in range(args.steps):
        fault = me and step == args.fault_step
        ar = src.clone()
        if fault:
            log(f"fault {args.fault} at step {step}")
        if fault and args.fault == "exception":
            raise RuntimeError(f"rank {rank}: injected failure at step {step}")
        if fault and args.fault == "os-exit":
            os._exit(3)
        if fault and args.fault == "idle":
            time.sleep(3 * args.timeout_sec)
        if fault and args.fault == "gpu-busy":
            torch.cuda._sleep(int(3 * args.timeout_sec * 2e9))  # cycles, about 2 GHz
        if me and args.fault == "straggler":
            time.sleep(0.25)
        if me and args.fault == "gpu-slow":
            torch.cuda._sleep(int(0.1 * 2e9))  # cycles, about 100 ms at 2 GHz
        if fault and args.fault.startswith("net-"):
            import ctypes
            plugin = os.environ.get("NCCL_NET_PLUGIN", "")
            if "/" not in plugin:
                sys.exit(f"rank {rank}: {args.fault} needs NCCL_NET_PLUGIN=/path/libnccl-net-faulty.so")
            arm = ctypes.CDLL(plugin).ncclwatch_net_fault_arm  # the handle NCCL opened
            arm.argtypes = [ctypes.c_char_p]
            if arm(args.fault[4:].encode()) != 0:  # 0 armed, -1 refused
                sys.exit(f"rank {rank}: libnccl-net-faulty.so refused mode {args.fault[4:]}")

        swap = fault and args.fault in ("swap-completes", "swap-hangs")
        # swap-completes: the all_gather moves as many bytes as the all_reduce.
        ag_n = n // world if args.fault == "swap-completes" else (1 << 10)
        if swap:
            dist.all_gather_into_tensor(gathered[: ag_n * world], src[:ag_n])
        if fault and args.fault == "count":
            dist.all_reduce(ar[: n // 2])
        elif fault and args.fault == "dtype":
            dist.all_reduce(ar.half())
        else:
            dist.all_reduce(ar)
        if fault and args.fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if not swap:
            dist.all_gather_into_tensor(gathered[: ag_n * world], src[:ag_n])
        if fault and args.fault == "ag-mismatch":
            dist.all_gather_into_tensor(gathered[: n * world // 2], src[: n // 2])
        else:
            dist.all_gather_into_tensor(gathered, src)
        if fault and args.fault == "rs-mismatch":
            dist.reduce_scatter_tensor(scattered[: n // 2], big_in[: n * world // 2])
        else:
            dist.reduce_scatter_tensor(scattered, big_in)
        if sub is not None and rank in (0, 1) and not fault:
            dist.all_reduce(ar, group=sub)
        if args.fault == "p2p-peer" and step >= args.fault_step and world % 2 == 0:
            if rank % 2 == 0:
                dist.send(bcast, dst=rank + 1)
            else:
                dist.recv(bcast, src=(rank + 1) % world if fault else rank - 1)
        root = step % world
        if rank == root:
            bcast.fill_(float(step))
        dist.broadcast(bcast, src=root)
        if pgs:
            ts = [threading.Thread(target=thread_body, args=(pg, src.clone())) for pg in pgs]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        torch.cuda.synchronize(device)
        log(f"step {step + 1}/{args.steps} done")

    dist.destroy_process_group()
    log("process group destroyed")


if __name__ == "__main__":
    main()

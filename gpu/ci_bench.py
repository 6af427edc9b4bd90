#!/usr/bin/env python3
"""A CI benchmark job for `ncclwatch check`: N ranks on one GPU (NCCL_HOSTID per rank), PyTorch.

    NCCL_NVLS_ENABLE=0 NCCL_PROFILER_PLUGIN=... NCCLWATCH_DIR=DIR python3 gpu/ci_bench.py [N]
        [--iters K] [--port P] [--delay-us D --delay-row I]

Each rank runs K iterations (default 200) of a 4 MiB all-reduce, an all-gather of 1 MiB per rank
and an 8 KiB all-reduce, synchronizing every 10 iterations, as a benchmark step would. The job
times every call itself with CUDA events on the current stream around it (the truth that
`ncclwatch check` is judged against) and writes DIR/truth-rank<R>.json: per row, the median and
p99 of those times in microseconds and the samples. A run is slowed by NCCL settings given in the
environment (NCCL_MAX_NCHANNELS, NCCL_BUFFSIZE, NCCL_PROTO), or by a controlled delay in the job:
with --delay-us D, the last rank's stream sleeps D microseconds before each call of row I (0, 1
or 2, in the order above), so that every rank's call of that row waits about D longer and the
other rows stay as they were. The truth says by how much.
"""
import datetime
import json
import os
import sys

os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off, here and in every child

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def percentile(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p / 100.0 * len(s) + 0.5)) - 1))]


def cycles_per_us():
    """The GPU's clock, measured: torch.cuda._sleep spins for a number of cycles."""
    torch.cuda._sleep(1000000)  # warm-up
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(20000000)
    b.record()
    b.synchronize()
    return 20000000 / (a.elapsed_time(b) * 1000.0)


def worker(rank, world, iters, port, delay_us, delay_row):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_HOSTID=f"host{rank}",
                      NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120), device_id=torch.device("cuda", 0))
    big = torch.ones(1 << 20, device="cuda")            # 4 MiB of float32
    shard = torch.ones(1 << 18, device="cuda")          # 1 MiB per rank
    gathered = torch.empty(world << 18, device="cuda")
    small = torch.ones(1 << 11, device="cuda")          # 8 KiB
    calls = [("AllReduce 4 MiB", lambda: dist.all_reduce(big)),
             ("AllGather 1 MiB per rank", lambda: dist.all_gather_into_tensor(gathered, shard)),
             ("AllReduce 8 KiB", lambda: dist.all_reduce(small))]
    events = {name: [] for name, _ in calls}
    delay_cycles = int(delay_us * cycles_per_us()) if delay_us > 0 and rank == world - 1 else 0
    for it in range(iters):
        for i, (name, call) in enumerate(calls):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            if delay_cycles and i == delay_row:
                torch.cuda._sleep(delay_cycles)
            call()
            b.record()
            events[name].append((a, b))
        if it % 10 == 9:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    truth = {}
    for name, pairs in events.items():
        us = [a.elapsed_time(b) * 1000.0 for a, b in pairs[1:]]  # the first is warm-up
        truth[name] = {"p50_us": percentile(us, 50), "p99_us": percentile(us, 99), "samples_us": us}
    out = os.environ.get("NCCLWATCH_DIR", ".")
    with open(os.path.join(out, f"truth-rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "iters": iters, "delay_us": delay_us if delay_us > 0 else 0,
                   "delay_row": calls[delay_row][0] if delay_us > 0 else None, "rows": truth}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    argv = sys.argv[1:]

    def option(name, default):
        if name not in argv:
            return default
        i = argv.index(name)
        value = int(argv[i + 1])
        del argv[i:i + 2]
        return value

    iters = option("--iters", 200)
    port = option("--port", 29650)
    delay_us = option("--delay-us", 0)
    delay_row = option("--delay-row", 0)
    if not 0 <= delay_row <= 2:
        sys.exit("ci_bench.py: --delay-row must be 0, 1 or 2")
    n = int(argv[0]) if argv else 4
    mp.spawn(worker, args=(n, iters, port, delay_us, delay_row), nprocs=n)
    print("ok")

#!/usr/bin/env python3
"""A CI benchmark job for `ncclwatch check`: N ranks on one GPU (NCCL_HOSTID per rank), PyTorch.

    NCCL_NVLS_ENABLE=0 NCCL_PROFILER_PLUGIN=... NCCLWATCH_DIR=DIR python3 gpu/ci_bench.py [N]
        [--iters K] [--port P]

Each rank runs K iterations (default 200) of a 4 MiB all-reduce, an all-gather of 1 MiB per rank
and an 8 KiB all-reduce, synchronizing every 10 iterations, as a benchmark step would. The job
times every call itself with CUDA events on the current stream around it (the truth that
`ncclwatch check` is judged against) and writes DIR/truth-rank<R>.json: per row, the median and
p99 of those times in microseconds and the samples. A run is slowed by NCCL settings given in the
environment (NCCL_MAX_NCHANNELS, NCCL_BUFFSIZE, NCCL_PROTO): the truth says by how much.
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


def worker(rank, world, iters, port):
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
    for it in range(iters):
        for name, call in calls:
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
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
        json.dump({"rank": rank, "iters": iters, "rows": truth}, f)
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
    n = int(argv[0]) if argv else 4
    mp.spawn(worker, args=(n, iters, port), nprocs=n)
    print("ok")

#!/usr/bin/env python3
"""A PyTorch all-reduce captured into a CUDA graph, N ranks on one GPU (NCCL_HOSTID per rank).

    NCCL_NVLS_ENABLE=0 NCCL_PROFILER_PLUGIN=... NCCLWATCH_DIR=... python3 gpu/torch_graph.py [N] [--gpus]
        [--skip-next R] [--hang-replay R] [--replays N] [--eager N]

--gpus: rank r on GPU r instead (one node: NVLink or shared memory, no network transfers, so
NCCL starts the captured call's operations once, at the capture, rather than per replay).
--skip-next R: a hang where the graph's number is shared. Rank R never issues the first eager
all-reduce after the replays (NCCL gives it the captured call's number): it sleeps outside NCCL
while the others wait in it, until PyTorch's watchdog (a 10 s process-group timeout in this mode)
ends the job. ncclwatch must name rank R as the one that never joined it.

--hang-replay R: a hang inside a replay, with nothing after it. Rank R never launches the graph's
last replay: it sleeps outside NCCL while the others' last replay waits for it on the GPU. PyTorch's
watchdog watches no replay, so nothing ends the job: rank R raises after HANG_SEC (default 25)
seconds and torch.multiprocessing ends the others, as a scheduler would end a hung job.
ncclwatch must name the replay and rank R.

--replays N, --eager N: replay the graph N times (default 3), and run N eager all-reduces after
it (default 3): enough of them for `ncclwatch check` to judge a run against a baseline.

Each rank runs eager all-reduces, captures one into a CUDA graph (after a warm-up on a side
stream, as PyTorch asks), replays the graph, then runs eager all-reduces again, and checks
every result. It prints "rank R ok" per rank and "ok" at the end; any wrong sum, or a capture the
plugin broke (an event recorded into the capture, or queried during it, invalidates it), ends
it with an error.

With ncclwatch's default capture, the captured all-reduce must get no CUDA event of the plugin's
(its Op says NO_COMPLETION_GRAPH) and every eager one must complete: `ncclwatch dump` and
`ncclwatch diagnose` on NCCLWATCH_DIR tell.
"""
import datetime
import os
import sys
import time

os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off, here and in every child

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def worker(rank, world, gpus, skip_rank, hang_rank, replays, eager):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("GRAPH_PORT", "29631"))
    if not gpus:
        os.environ.update(NCCL_HOSTID=f"host{rank}", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1")
    device = rank if gpus else 0
    torch.cuda.set_device(device)
    timeout = datetime.timedelta(seconds=10 if skip_rank >= 0 else 60)
    dist.init_process_group("nccl", rank=rank, world_size=world, timeout=timeout,
                            device_id=torch.device("cuda", device))
    x = torch.ones(1 << 16, device="cuda")

    def expect(value, what):
        torch.cuda.synchronize()
        got = x[0].item()
        if got != value:
            raise RuntimeError(f"rank {rank}: {what}: sum {got}, expected {value}")

    for _ in range(3):  # eager: seq 0..2
        x.fill_(1.0)
        dist.all_reduce(x)
        expect(float(world), "eager before the capture")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # the warm-up PyTorch asks for before a capture
        for _ in range(3):
            x.fill_(1.0)
            dist.all_reduce(x)
    torch.cuda.current_stream().wait_stream(side)
    expect(float(world), "warm-up")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(x)
    for i in range(replays):
        x.fill_(1.0)
        if rank == hang_rank and i == replays - 1:
            print(f"rank {rank} never launches replay {i} and sleeps", flush=True)
            time.sleep(float(os.environ.get("HANG_SEC", "25")))
            raise RuntimeError(f"rank {rank}: ends the job its missing replay hung")
        graph.replay()
        expect(float(world), f"graph replay {i}")
    if rank == skip_rank:
        print(f"rank {rank} skips the next all-reduce and sleeps", flush=True)
        time.sleep(90)
        raise RuntimeError(f"rank {rank}: still alive after the others' timeout")
    for _ in range(eager):
        x.fill_(1.0)
        dist.all_reduce(x)
        expect(float(world), "eager after the graph")
    del graph
    dist.destroy_process_group()
    print(f"rank {rank} ok", flush=True)


if __name__ == "__main__":
    argv = sys.argv[1:]

    def option(name, default):
        if name not in argv:
            return default
        i = argv.index(name)
        value = int(argv[i + 1])
        del argv[i:i + 2]
        return value

    skip = option("--skip-next", -1)
    hang = option("--hang-replay", -1)
    replays = option("--replays", 3)
    eager = option("--eager", 3)
    args = [a for a in argv if a != "--gpus"]
    n = int(args[0]) if args else 4
    mp.spawn(worker, args=(n, "--gpus" in argv, skip, hang, replays, eager), nprocs=n)
    print("ok")

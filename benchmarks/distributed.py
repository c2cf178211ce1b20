"""munet.distributed's all_reduce against mpi4py and torch.distributed (gloo), and DDP scaling.

Start it with munet-run; rank 0 prints one JSON report:

    OPENBLAS_NUM_THREADS=1 munet-run -n 2 benchmarks/distributed.py --max-mib 256 --repeat 10
    OPENBLAS_NUM_THREADS=1 munet-run -n 2 benchmarks/distributed.py --transport tcp --max-mib 256
    OPENBLAS_NUM_THREADS=1 munet-run -n 1 benchmarks/distributed.py --ddp-only      # the 1-process baseline
    OPENBLAS_NUM_THREADS=1 munet-run -n 8 --oversubscribe benchmarks/distributed.py --max-mib 16 --repeat 5
    OPENBLAS_NUM_THREADS=1 munet-run --standalone -n 2 benchmarks/distributed.py  # no mpirun: TCP, no mpi4py
    ... --quick                                                                   # a smoke run (64 KiB-1 MiB)

``--transport mpi`` (the default under mpirun) runs munet's default group on MPI;
``--transport tcp`` joins the same ranks through a TCPStore (``init_process_group(store=...)``) so
munet talks over its own TCP transport. Without mpirun (``--standalone``) it is always TCP and
the mpi4py column is left out.

all_reduce: SUM of a contiguous float32 cpu tensor of 64 KiB to ``--max-mib`` in place, median
over ``--repeat`` calls. munet (with its default mismatch check, and with ``DebugLevel.OFF``),
mpi4py's blocking ``Allreduce`` (IN_PLACE on a NumPy array, its own duplicate of COMM_WORLD) and
torch.distributed's gloo (``all_reduce`` of a torch tensor, its own TCP rendezvous) are
interleaved call by call, with a munet barrier before each call, so that machine load hits all
alike. Bandwidth is bytes / time (the "algorithm bandwidth"). torch is optional
(``--no-torch``, or left out when it is not installed).

DDP: one SGD step of an MLP (256 -> 512 -> 512 -> 10, ReLU, cross entropy) on ``--batch`` rows
per rank; median step time, with and without DDP on each rank, and the DDP throughput in rows
per second over all ranks (compare ``-n 2`` with ``-n 1 --ddp-only`` for the scaling).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import time
from datetime import timedelta

import numpy as np

import munet
import munet.distributed as dist
from munet import nn
from munet.distributed.world import started_by_mpirun


def median_s(fn, repeat: int, warmup: int = 3, sync=None) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        if sync is not None:
            sync()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def join(transport: str) -> None:
    """The default group on MPI, or on munet's TCP transport through a TCPStore on a port rank 0 picked."""
    if transport == "mpi" or not started_by_mpirun():
        dist.init_process_group("gloo")
        return
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    store = dist.TCPStore("127.0.0.1", 0, size, True, wait_for_workers=False) if rank == 0 else None
    port = world.bcast(store.port if store is not None else None, root=0)
    if store is None:
        store = dist.TCPStore("127.0.0.1", port, size, False)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size)


def mpi4py_allreduce():
    """A blocking in-place mpi4py Allreduce on its own communicator, or None without mpirun."""
    if not started_by_mpirun():
        return None
    from mpi4py import MPI

    comm = MPI.COMM_WORLD.Dup()
    return lambda array: comm.Allreduce(MPI.IN_PLACE, array, MPI.SUM)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def torch_gloo(enabled: bool):
    """torch.distributed's gloo group over the same ranks (its own rendezvous), or None."""
    if not enabled:
        return None
    try:
        import torch
        import torch.distributed as torch_dist
    except ImportError:
        return None
    torch.set_num_threads(1)
    port = [free_port() if dist.get_rank() == 0 else 0]
    dist.broadcast_object_list(port, src=0)
    torch_dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port[0]}",
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        timeout=timedelta(minutes=10),
    )
    return torch, torch_dist


def all_reduce_table(min_kib: float, max_mib: float, repeat: int, mpi, gloo) -> list[dict]:
    rows = []
    nbytes = int(min_kib * 1024)
    while nbytes <= max_mib * 2**20:
        n = nbytes // 4
        raw = np.ones(n, dtype=np.float32)
        t = munet.ones(n)
        tt = gloo[0].ones(n) if gloo else None
        times: dict[str, list] = {"munet": [], "munet_nocheck": []}
        for i in range(repeat + 2):
            sample = {}
            if mpi is not None:
                dist.barrier()
                start = time.perf_counter()
                mpi(raw)
                sample["mpi4py"] = time.perf_counter() - start
            if gloo is not None:
                dist.barrier()
                start = time.perf_counter()
                gloo[1].all_reduce(tt)
                sample["torch_gloo"] = time.perf_counter() - start
            dist.barrier()
            dist.set_debug_level(dist.DebugLevel.DETAIL)
            start = time.perf_counter()
            dist.all_reduce(t)
            sample["munet"] = time.perf_counter() - start
            dist.barrier()
            dist.set_debug_level(dist.DebugLevel.OFF)
            start = time.perf_counter()
            dist.all_reduce(t)
            sample["munet_nocheck"] = time.perf_counter() - start
            if i >= 2:  # warm-up calls are left out
                for name, seconds in sample.items():
                    times.setdefault(name, []).append(seconds)
            raw[:] = 1.0
            t.fill_(1.0)
            if tt is not None:
                tt.fill_(1.0)
        medians = {name: statistics.median(v) for name, v in times.items()}
        rows.append({"bytes": nbytes, **medians, **{f"{k}_GBps": nbytes / v / 1e9 for k, v in medians.items()}})
        nbytes *= 4
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    return rows


def ddp_table(batch: int, repeat: int) -> dict:
    def mlp():
        munet.manual_seed(0)
        return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))

    rng = np.random.default_rng(dist.get_rank())
    x = munet.tensor(rng.standard_normal((batch, 256)).astype(np.float32))
    y = munet.tensor(rng.integers(0, 10, batch))
    result = {}
    for name, model in (("plain", mlp()), ("ddp", nn.parallel.DistributedDataParallel(mlp()))):
        opt = munet.optim.SGD(model.parameters(), lr=0.01)

        def step(model=model, opt=opt):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

        result[f"{name}_step_s"] = median_s(step, repeat, sync=dist.barrier)
    result["ddp_rows_per_s"] = batch * dist.get_world_size() / result["ddp_step_s"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["mpi", "tcp"], default="mpi")
    parser.add_argument("--min-kib", type=float, default=64)
    parser.add_argument("--max-mib", type=float, default=64)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--ddp-only", action="store_true")
    parser.add_argument("--no-torch", action="store_true", help="leave torch.distributed's gloo out")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 64 KiB to 1 MiB, 3 calls, 20 steps")
    args = parser.parse_args()
    if args.quick:
        args.max_mib, args.repeat = min(args.max_mib, 1), 3
    join(args.transport)
    report = {
        "ranks": dist.get_world_size(),
        "transport": type(dist.group.WORLD.comm).__name__,
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if not args.ddp_only and dist.get_world_size() > 1:
        mpi, gloo = mpi4py_allreduce(), torch_gloo(not args.no_torch)
        report["all_reduce"] = all_reduce_table(args.min_kib, args.max_mib, args.repeat, mpi, gloo)
        if gloo is not None:
            gloo[1].destroy_process_group()
    report["ddp"] = ddp_table(args.batch, args.repeat)
    report["load_after"] = os.getloadavg()[0]
    if dist.get_rank() == 0:
        print(json.dumps(report, indent=1))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

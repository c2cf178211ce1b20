"""A composite fused in compiled plans against the same plan keeping its eager kernel, interleaved.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/composite_fusion.py [--op log_softmax]
        [--workloads mlp,cnn,gpt] [--rounds 6] [--loss]
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/composite_fusion.py --op embedding,embedding_backward --workloads gpt
    .venv/bin/python benchmarks/composite_fusion.py --workloads= --cases all [--device vulkan] [--quick]

Builds each workload's compiled training step of ``compare_pytorch.py`` twice in one process: once
with ``compiler/passes/decompose.py`` told to keep ``--op`` whole (its eager kernel runs in the
plan) and once as the compiler does now (decomposed and fused). Then every round runs one step of
each, so load drift on a shared machine hits both alike, and prints the median process CPU time
per step. ``--loss`` adds ``cross_entropy`` forward and backward alone over a few shapes.

``--cases`` (comma-separated, or ``all``) times small forward-and-backward steps the same way on
``--device``, each keeping its own composites whole in the first plan: ``max_pool2d`` with padding
(``max_pool``, ``max_pool_backward``), ``prod``'s gradient (``prod_others``), the sort-based
reductions ``kthvalue``, ``median(dim)`` and ``mode``, ``cross_entropy`` (its fast kernel is
``log_softmax``'s), ``embedding`` and ``grid_sample`` (each with its gradient). On vulkan a step's
time is wall time up to a ``synchronize()``; on cpu, process CPU time. ``--quick`` shrinks the
sizes and rounds to check that the script runs.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import time

import numpy as np
from compare_pytorch import make_step

import munet
import munet.nn.functional as F
from munet._device import get_backend
from munet.compiler.passes import decompose


def _compiled_pair(build, op):
    """``(kept, fused)``: ``build()``'s compiled callable compiled keeping ``op`` (a name, or a set
    of names) whole where the device has a kernel for it, and as is."""
    decomposes = decompose._decomposes
    kept_ops = {op} if isinstance(op, str) else set(op)

    def keep(node, fusing):
        name = node.op.name
        if name in kept_ops and fusing and name in get_backend(node.outputs[0].device).kernels:
            return False
        return decomposes(node, fusing)

    decompose._decomposes = keep
    try:
        kept = build()  # compiles at its first call, inside the patch
    finally:
        decompose._decomposes = decomposes
    return kept, build()


def _interleaved(runs: dict, rounds: int, calls: int = 1, sync=None) -> dict:
    """Median ms per call of each run, rounds interleaved: process CPU time, or with ``sync`` (a
    device's synchronize) wall time up to it."""
    clock = time.process_time if sync is None else time.perf_counter
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = clock()
            for _ in range(calls):
                run()
            if sync is not None:
                sync()
            times[name].append((clock() - start) / calls * 1e3)
    return {name: statistics.median(v) for name, v in times.items()}


def _workload(name: str, op: str, rounds: int) -> dict:
    def build():
        step, args = make_step(name, "munet compiled")
        for _ in range(2):
            step(*args)
        return lambda: step(*args)

    kept, fused = _compiled_pair(build, op)
    return _interleaved({"kernel": kept, "fused": fused}, rounds)


def _loss(n: int, c: int, op: str, rounds: int) -> dict:
    g = np.random.default_rng(0)
    x = munet.tensor(g.standard_normal((n, c)).astype(np.float32))
    t = munet.tensor(g.integers(0, c, n))

    def step(x, t):
        x.requires_grad_(True)
        loss = F.cross_entropy(x, t)
        loss.backward()
        return loss, x.grad

    def build():
        compiled = munet.compile(step)
        for _ in range(3):
            compiled(x, t)
        return lambda: compiled(x, t)

    kept, fused = _compiled_pair(build, op)
    return _interleaved({"kernel": kept, "fused": fused}, rounds, calls=10)


# the composite cases: (ops kept whole in the first plan, step, input arrays at full and --quick size)


def _max_pool_step(x):
    x.requires_grad_(True)
    y = F.max_pool2d(x, 3, stride=2, padding=1)
    (y * y).sum().backward()
    return y, x.grad


def _prod_step(x):
    x.requires_grad_(True)
    y = x.prod(1)
    y.sum().backward()
    return y, x.grad


def _sort_step(x):
    x.requires_grad_(True)
    y = x.kthvalue(5, 1).values + x.median(1).values + x.mode(1).values
    y.sum().backward()
    return y, x.grad


def _cross_entropy_step(x, t):
    x.requires_grad_(True)
    loss = F.cross_entropy(x, t)
    loss.backward()
    return loss, x.grad


def _embedding_step(table, idx):
    table.requires_grad_(True)
    rows = F.embedding(idx, table)
    (rows * rows).sum().backward()
    return rows, table.grad


def _grid_sample_step(x, theta):
    x.requires_grad_(True)
    theta.requires_grad_(True)
    grid = F.affine_grid(theta, (x.shape[0], x.shape[1], x.shape[2], x.shape[3]), align_corners=False)
    y = F.grid_sample(x, grid, padding_mode="border", align_corners=False)
    (y * y).sum().backward()
    return y, x.grad, theta.grad


def _normal(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _labels(n, c):
    return np.random.default_rng(1).integers(0, c, n)


def _theta(n):
    return np.tile(np.array([[0.9, -0.3, 0.05], [0.25, 1.1, -0.1]], np.float32), (n, 1, 1))


CASES = {
    "max_pool2d": (
        {"max_pool", "max_pool_backward"},
        _max_pool_step,
        (_normal(8, 32, 32, 32),),
        (_normal(2, 3, 9, 9),),
    ),
    "prod_grad": ({"prod_others"}, _prod_step, (_normal(512, 64),), (_normal(6, 5),)),
    "sort": (
        {"kthvalue", "median_dim", "mode"},
        _sort_step,
        ((_normal(256, 257) * 4).round(),),
        ((_normal(6, 9) * 2).round(),),
    ),
    "cross_entropy": (
        {"log_softmax"},
        _cross_entropy_step,
        (_normal(2048, 65), _labels(2048, 65)),
        (_normal(24, 13), _labels(24, 13)),
    ),
    "embedding": (
        {"embedding", "embedding_backward"},
        _embedding_step,
        (_normal(65, 128), _labels(32 * 64, 65).reshape(32, 64)),
        (_normal(9, 4), _labels(12, 9).reshape(3, 4)),
    ),
    "grid_sample": (
        {"grid_sampler_2d", "grid_sampler_2d_backward"},
        _grid_sample_step,
        (_normal(8, 16, 32, 32), _theta(8)),
        (_normal(2, 3, 5, 6), _theta(2)),
    ),
}


def _case(name: str, device: str, quick: bool, rounds: int) -> dict:
    kept_ops, step, full, small = CASES[name]
    args = [munet.tensor(a, device=device) for a in (small if quick else full)]

    def build():
        compiled = munet.compile(step)
        for _ in range(2):
            compiled(*args)
        return lambda: compiled(*args)

    kept, fused = _compiled_pair(build, kept_ops)
    sync = None if munet.device(device).type == "cpu" else (lambda: munet.vulkan.synchronize(device))
    return _interleaved({"kernel": kept, "fused": fused}, rounds, calls=1 if quick else 5, sync=sync)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="log_softmax", help="the composite(s) kept, comma-separated")
    parser.add_argument("--workloads", default="mlp,cnn,gpt")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--loss", action="store_true", help="also cross_entropy alone over 2048x65, 256x10, 24x13")
    parser.add_argument("--cases", default="", help=f"comma-separated, or 'all': {', '.join(CASES)}")
    parser.add_argument("--device", default="cpu", help="the device of --cases (cpu, vulkan, vulkan:1, ...)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and two rounds: check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds = 2
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  load={os.getloadavg()}")
    print(f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}; median ms of process CPU time")
    for name in filter(None, args.workloads.split(",")):
        r = _workload(name, set(args.op.split(",")), args.rounds)
        print(f"{name}: {args.op} kernel {r['kernel']:.1f} ms/step, fused {r['fused']:.1f} ms/step")
    if args.loss:
        for n, c in ((2048, 65), (256, 10), (24, 13)):
            r = _loss(n, c, set(args.op.split(",")), 5 * args.rounds)
            print(f"cross_entropy {n}x{c}: {args.op} kernel {r['kernel']:.3f} ms, fused {r['fused']:.3f} ms")
    cases = list(CASES) if args.cases == "all" else list(filter(None, args.cases.split(",")))
    for name in cases:
        r = _case(name, args.device, args.quick, args.rounds)
        kept = "+".join(sorted(CASES[name][0]))
        clock = "process CPU" if munet.device(args.device).type == "cpu" else "wall (to synchronize)"
        print(
            f"{name} on {args.device}: {kept} kept {r['kernel']:.3f} ms/step, fused {r['fused']:.3f} ms/step ({clock})"
        )


if __name__ == "__main__":
    main()

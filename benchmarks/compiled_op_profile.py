"""Where a compiled training step spends its time: per-op totals of one step's prepared kernels.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/compiled_op_profile.py gpt [--no-fuse] [--no-remat] [--steps 5] [--nodes 10]

Workloads are those of ``compare_pytorch.py`` (mlp, cnn, gpt). Each prepared step of the
executable is wrapped with a timer; the figures are means over ``--steps`` calls after 3 warm-up calls.
``--nodes N`` also lists the N slowest single nodes with their plan line (op, shapes, attributes).
``--clock cpu`` times with this thread's CPU time instead of wall time: on a shared, loaded machine
it leaves out the time the process spends descheduled (the step runs on one thread with one BLAS thread).
"""

from __future__ import annotations

import argparse
import collections
import time

from compare_pytorch import build, munet_step

import munet


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=("mlp", "cnn", "gpt"))
    parser.add_argument("--no-fuse", action="store_true")
    parser.add_argument("--no-remat", action="store_true", help='options={"remat": False} (passes/remat.py)')
    parser.add_argument("--dynamic", action="store_true", help="munet.compile(dynamic=True)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=0, help="also list the N slowest single nodes")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    model, opt, x, y = build(args.workload, "munet")
    fn = munet.compile(munet_step, fuse=not args.no_fuse, dynamic=args.dynamic, options={"remat": not args.no_remat})
    for _ in range(3):
        fn(model, opt, x, y)
    executable = fn._last.executable
    nodes = [n for n in executable.graph.nodes if n.op.name != "constant"]
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    seconds, calls, per_node = collections.Counter(), collections.Counter(), collections.Counter()

    def timed(step, name, index):
        def run(env):
            start = clock()
            step(env)
            elapsed = clock() - start
            seconds[name] += elapsed
            per_node[index] += elapsed
            calls[name] += 1

        return run

    executable.steps = [timed(s, n.op.name, i) for i, (s, n) in enumerate(zip(executable.steps, nodes, strict=True))]
    start = clock()
    for _ in range(args.steps):
        fn(model, opt, x, y).item()
    total = (clock() - start) / args.steps * 1e3
    print(
        f"{args.workload}: {total:.1f} ms/step ({args.clock} clock), {sum(seconds.values()) / args.steps * 1e3:.1f} ms in kernels"
    )
    for name, s in seconds.most_common(15):
        print(f"  {name:24s} {s / args.steps * 1e3:8.1f} ms  x{calls[name] // args.steps}")
    if args.nodes:
        print(f"slowest {args.nodes} nodes:")
        for index, s in per_node.most_common(args.nodes):
            print(f"  {s / args.steps * 1e3:8.1f} ms  {executable.plan[index][:200]}")


if __name__ == "__main__":
    main()

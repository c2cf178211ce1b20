"""Where the compiled imported ResNet-18 spends its time: per-op totals of the prepared steps, the
slowest nodes, and each convolution's GEMM alone (the floor the im2col path builds on).

    PYTHONPATH=. .venv/bin/python benchmarks/onnx_resnet_profile.py [--batch 1] [--threads 1] [--repeat 10] [--nodes 12]
        [--clock cpu]

The model and its export are ``benchmarks/onnx_resnet.py``'s. Each step of the compiled plan is
wrapped with a timer (wall clock unless ``--clock cpu``); figures are means over ``--repeat`` calls
after a warm-up call. The GEMM floor times ``np.matmul`` of each convolution's (O, C*K) weight by a (N, C*K, P) column
array into a preallocated output, the product every cpu convolution path ends in. onnxruntime's
time (same threads) is printed for scale. ``--clock cpu`` times everything (steps, whole calls,
onnxruntime, the GEMM floor) in the calling thread's CPU time instead of wall time: at one thread
that is each library's whole work, and on a shared machine it leaves out the time spent waiting
for a core (``time.thread_time``).
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import time

# isort: off
import munet  # before NumPy: OpenBLAS then reads munet's thread settings (munet/_threads.py)
import numpy as np

# isort: on

sys.path.insert(0, os.path.dirname(__file__))

from onnx_resnet import median_ms, ort_session, resnet_model_bytes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--nodes", type=int, default=12)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    munet.set_num_threads(args.threads)
    model_bytes = resnet_model_bytes(args.size)
    compiled = munet.compile(munet.onnx.load(model_bytes))
    x = np.random.default_rng(0).standard_normal((args.batch, 3, args.size, args.size), dtype=np.float32)
    mx = munet.from_numpy(x)
    with munet.no_grad():
        compiled(mx)
        executable = compiled._compiled._last.executable
        nodes = executable.step_nodes
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

        plain = list(executable.steps)
        executable.steps = [timed(s, n.op.name, i) for i, (s, n) in enumerate(zip(plain, nodes, strict=True))]
        start = clock()
        for _ in range(args.repeat):
            compiled(mx)
        total = (clock() - start) / args.repeat * 1e3
        executable.steps = plain
    session = ort_session(model_bytes, args.threads)
    theirs = median_ms(lambda: session.run(None, {"input_0": x}), args.repeat, clock=clock)
    print(
        f"batch {args.batch}, {args.threads} thread(s), {args.clock} time: munet {total:.1f} ms/call "
        f"({sum(seconds.values()) / args.repeat * 1e3:.1f} ms in steps), onnxruntime {theirs:.1f} ms"
    )
    for name, s in seconds.most_common(12):
        print(f"  {name:24s} {s / args.repeat * 1e3:8.2f} ms  x{calls[name] // args.repeat}")
    print(f"slowest {args.nodes} nodes:")
    for index, s in per_node.most_common(args.nodes):
        print(f"  {s / args.repeat * 1e3:8.2f} ms  {executable.plan[index][:160]}")
    floor = 0.0
    for node in nodes:
        if node.op.name != "convolution":
            continue
        w, out = node.args[1], node.outputs[0]
        o, k, p = w.shape[0], math.prod(w.shape[1:]), math.prod(out.shape[2:])
        wm = np.random.default_rng(1).standard_normal((o, k), dtype=np.float32)
        cols = np.random.default_rng(2).standard_normal((args.batch, k, p), dtype=np.float32)
        result = np.empty((args.batch, o, p), np.float32)
        floor += median_ms(
            lambda wm=wm, cols=cols, result=result: np.matmul(wm, cols, out=result), args.repeat, clock=clock
        )
    print(f"GEMM floor of the convolutions: {floor:.1f} ms")


if __name__ == "__main__":
    main()

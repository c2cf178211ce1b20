"""Compiled MLP, CNN and GPT training steps rendered for cuda without a GPU, their fused kernels
compiled by NVRTC for sm_80 and sm_90 and run on the CPU under the emulation header, compared with
the C renderer's kernels (the CPU backend's fused code).

The workloads: an MLP with AdamW, a CNN (conv, BatchNorm, max pool) with SGD, a small GPT with
AdamW, and a wide MLP with LayerNorm over rows of 300 (the one-block-per-row layout). The steps are
traced on ``cudaplan:0``, a stand-in device: the cpu backend under another name
whose compile target is the cuda target's rendering half (``lower_cuda.CudaRendering``: every
composite decomposed, every fused group rendered as CUDA C) over the cpu target's execution, so the
plan holds exactly the fused groups a cuda device gets, and the step runs (on the CPU).
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import _device, nn
from munet._device import register_backend
from munet.backends.cpu.backend import CpuBackend
from munet.backends.cuda import emulation, nvrtc
from munet.compiler.codegen import build
from munet.compiler.codegen.c import render_c
from munet.compiler.codegen.kernel import StoreFull
from munet.compiler.lower_cpu import CpuTarget
from munet.compiler.lower_cuda import CudaRendering, plan_steps
from tests.compiler.models import GPT

RENDERED: list = []  # (workload, CudaSource, kernel, tensor inputs) of every fused node lowered


class PlanBackend(CpuBackend):
    def __init__(self, index: int = 0):
        super().__init__(index)
        self.device = munet.device("cudaplan", index)


class CudaPlanTarget(CudaRendering, CpuTarget):
    """The cuda target's rendering decisions, the cpu target's execution."""

    uses_arena = True
    workload = ""

    def __init__(self, backend):
        CpuTarget.__init__(self, backend)
        CudaRendering.__init__(self, backend)

    def fused_step(self, node, executable):
        rendered = self.render_fused(node)
        if not isinstance(rendered, str):
            RENDERED.append((CudaPlanTarget.workload, *rendered[:3]))
        return CpuTarget.fused_step(self, node, executable)


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _workloads(device):
    gen = np.random.default_rng(0)
    munet.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 5))
    cnn = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 3)
    )
    gpt = GPT()
    wide = nn.Sequential(nn.Linear(300, 300), nn.LayerNorm(300), nn.GELU(), nn.Linear(300, 4))  # rows of 300
    for model in (mlp, cnn, gpt, wide):
        model.to(device)
    return {
        "mlp": (mlp, munet.optim.AdamW(mlp.parameters(), lr=3e-2, weight_decay=0.05),
                gen.standard_normal((16, 12)).astype(np.float32), gen.integers(0, 5, 16)),
        "cnn": (cnn, munet.optim.SGD(cnn.parameters(), lr=0.1, momentum=0.9),
                gen.standard_normal((6, 1, 8, 8)).astype(np.float32), gen.integers(0, 3, 6)),
        "gpt": (gpt, munet.optim.AdamW(gpt.parameters(), lr=3e-3, weight_decay=0.1),
                gen.integers(0, 13, (3, 8)), gen.integers(0, 13, 24)),
        "wide": (wide, munet.optim.Adam(wide.parameters(), lr=1e-3),
                 gen.standard_normal((5, 300)).astype(np.float32), gen.integers(0, 4, 5)),
    }  # fmt: skip


@contextlib.contextmanager
def _plan_device():
    """``cudaplan:0`` registered for the block (the registry is restored after it)."""
    saved = _device._BACKENDS.get("cudaplan")
    register_backend("cudaplan", lambda: [(0, "cuda plan", "CPU")], PlanBackend, package="cpu",
                     compile_target=f"{__name__}:CudaPlanTarget")  # fmt: skip
    try:
        yield munet.device("cudaplan", 0)
    finally:
        _device._BACKENDS.pop("cudaplan", None)
        if saved is not None:
            _device._BACKENDS["cudaplan"] = saved


def _trace(name, model, opt, x, y, device) -> list:
    """The plan steps of ``name``'s compiled training step; its fused kernels go to RENDERED."""
    CudaPlanTarget.workload = name
    compiled = munet.compile(_step)
    xs, ys = munet.as_tensor(x).to(device), munet.as_tensor(y).to(device)
    for _ in range(2):  # the first trace creates the optimizer state, the second is the steady step
        loss = compiled(model, opt, xs, ys)
    assert np.isfinite(loss.item())
    assert "__global__ void fused_" in compiled.describe()  # describe() shows the CUDA C of fused nodes
    return plan_steps(compiled.graph)


@functools.cache
def _traced() -> dict:
    """workload -> plan steps of its compiled step; fills RENDERED."""
    with _plan_device() as device:
        return {name: _trace(name, *case, device) for name, case in _workloads(device).items()}


def _rendered(workload=None) -> list:
    _traced()
    return [r for r in RENDERED if workload is None or r[0] == workload]


@pytest.mark.parametrize("workload", ["mlp", "cnn", "gpt", "wide"])
def test_training_steps_render_every_fused_group_and_use_cublas(workload):
    steps = _traced()[workload]
    kinds = [s.kind for s in steps]
    assert "kernel" in kinds and "cublas" in kinds
    assert [s.reason for s in steps if s.reason] == []  # no fused group fell back
    assert _rendered(workload)
    if workload == "gpt":  # softmax and layer norm decompose: fused reductions, no eager softmax
        assert not [s for s in steps if s.kind == "eager" and s.name in ("softmax", "layer_norm", "log_softmax")]
    if workload == "wide":  # LayerNorm's rows of 300: one block per row, a shared-memory tree
        assert any(src.layout == "rows" for _, src, _, _ in _rendered(workload))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_fused_kernel_of_the_training_steps_compiles(arch):
    sources = [src for _, src, _, _ in _rendered()]
    assert len(sources) > 20
    cubin = nvrtc.compile_source(nvrtc.combine(sources), arch, name=f"training_steps_{arch}.cu")
    assert cubin.data[:4] == b"\x7fELF"


needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler for the C renderer's kernels")


@functools.cache
def _emulator() -> emulation.Emulator:
    return emulation.Emulator([src for _, src, _, _ in _rendered()])


@needs_cc
@pytest.mark.parametrize("workload", ["mlp", "cnn", "gpt", "wide"])
def test_fused_kernels_compute_what_the_c_renderer_computes(workload):
    """Every fused kernel of the step, on random inputs, against the cpu backend's C kernel of the
    same kernel IR (float64-accumulated sums on both sides; exp, log, tanh and erf from two math
    libraries: relative 2e-6, or 1e-6 of the output's largest magnitude where terms cancel)."""
    try:
        emulation.find_cxx()
    except emulation.EmulationUnavailableError as error:  # pragma: no cover - CI has g++
        pytest.skip(str(error))
    cases = [(src, kernel, tensors) for _, src, kernel, tensors in _rendered(workload)]
    assert len(cases) >= 4
    emulator = _emulator()
    gen = np.random.default_rng(5)
    for src, kernel, tensors in cases:
        inputs = [_random(v, gen) for v in tensors]
        params = np.array(gen.uniform(0.01, 0.9, len(kernel.params)), np.float64)
        shapes = [_output_shape(kernel, k) for k in range(len(kernel.outputs))]
        outs = [np.full(shape, np.nan if dt[0] == "f" else 0, _np(dt)) for shape, dt in zip(shapes, kernel.outputs)]
        emulator.run(src, kernel.numel, [*inputs, *outs, params])
        fn, _ = build.load_kernel(render_c(kernel), kernel.name)
        wants = [np.full(shape, np.nan if dt[0] == "f" else 0, _np(dt)) for shape, dt in zip(shapes, kernel.outputs)]
        pointers = lambda arrays: (__import__("ctypes").c_void_p * max(len(arrays), 1))(
            *(a.ctypes.data for a in arrays)
        )
        fn(pointers(inputs), pointers(wants), params.ctypes.data, 1)
        for k, (got, want) in enumerate(zip(outs, wants)):
            finite = np.abs(want[np.isfinite(want)]) if want.dtype.kind == "f" else np.zeros(0)
            scale = float(finite.max(initial=1.0))
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6 * scale, err_msg=f"{kernel.name} output {k}")


def _output_shape(kernel, k: int) -> tuple:
    """A StoreFull output covers the full space, a Store output the kept one."""
    full = any(isinstance(st, StoreFull) and st.buffer == k for st in kernel.stores)
    return tuple(kernel.shape) + tuple(kernel.reduce_shape) if full else tuple(kernel.shape)


def _np(dt: str):
    return {"f32": np.float32, "f64": np.float64, "bool": np.bool_, "i64": np.int64}[dt]


def _random(v, gen) -> np.ndarray:
    dt = np.dtype(v.dtype.np)
    if dt == np.bool_:
        return gen.integers(0, 2, v.shape).astype(bool)
    if dt.kind in "iu":
        return gen.integers(0, 3, v.shape).astype(dt)
    return gen.standard_normal(v.shape).astype(dt)


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["mlp", "cnn", "gpt"])
def test_the_benchmark_workloads_render_and_compile_at_their_sizes(workload):
    """benchmarks/compare_pytorch.py's models and batches (GPT: 4 layers, width 256, context 128,
    batch 16): every fused group renders and compiles for sm_80 and sm_90 (about a minute cold)."""
    bench = pytest.importorskip("benchmarks.compare_pytorch")
    model, _, x, y = bench.build(workload, "munet")
    with _plan_device() as device:
        model.to(device)
        steps = _trace(f"benchmark {workload}", model, munet.optim.AdamW(model.parameters(), lr=1e-3), x, y, device)
    assert [s.reason for s in steps if s.reason] == []
    sources = [src for w, src, _, _ in RENDERED if w == f"benchmark {workload}"]
    assert {src.layout for src in sources} >= {"elements", "rows"}
    for arch in ("sm_80", "sm_90"):
        nvrtc.compile_source(nvrtc.combine(sources), arch, name=f"benchmark_{workload}_{arch}.cu")

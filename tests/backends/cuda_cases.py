"""The cuda kernels the renderers produce for the registered op set, shared by the cuda tests.

``eager_sources()``: with 32-bit indices, every formula op x every dtype its formula takes
(rank 2), every cast between two cuda dtypes and every strided copy (rank 3), every reduction x
dtype x layout; with 64-bit indices (the same renderer with another index type) a sample of each
family: ``wide_cases()``; and every convolution kernel, direct and implicit GEMM (dtype x 1-3 spatial dims x
transposed), and the GEMM's split-K sums.
"""

from __future__ import annotations

import functools
import math
import warnings

import ml_dtypes
import numpy as np

import munet
from munet._device import get_backend
from munet.backends.cuda import kernels_conv
from munet.backends.cuda import kernels_conv_direct as C
from munet.backends.cuda import kernels_conv_gemm as G
from munet.backends.cuda import kernels_elementwise as E
from munet.backends.cuda import kernels_reduce as R
from munet.ops._registry import OPS
from munet.ops.conv import conv_output_spatial
from tests.cancellation import TERM_ULPS

REDUCTION_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "bool")
WIDE_FORMULAS = (("add", "float32"), ("where", "float16"), ("lerp", "bfloat16"), ("mul", "int64"), ("erfinv", "float64"))  # fmt: skip
WIDE_CASTS = (("float32", "bfloat16"), ("int64", "float16"), ("float64", "int32"))


def formula_operands(op, dtype: str) -> tuple:
    return tuple("bool" if role == "condition" else dtype for role in op.inputs)


def reduction_out(op: str, dtype: str) -> str:
    if op.startswith("arg"):
        return "int64"
    if op in ("sum", "prod") and dtype in ("bool", "int32", "int8", "int16", "uint8"):
        return "int64"
    return dtype


@functools.cache
def formula_cases() -> tuple:
    """``(op name, dtype)`` of every formula op and dtype the cuda renderer gives a kernel."""
    return tuple(
        (name, dt) for name, op in OPS.items() if op.formula is not None for dt in E.DTYPES if E.supports(name, dt)
    )


def formula_source(name: str, dtype: str, index_bits: int = 32):
    op = OPS[name]
    return E.render_elementwise(
        name, formula_operands(op, dtype), rank=2, attrs=E.sample_attrs(op), index_bits=index_bits
    )


def reduction_source(op: str, dtype: str, layout: str, index_bits: int = 32):
    return R.render_reduction(
        op, dtype, reduction_out(op, dtype), kept_rank=2, reduced_rank=2, layout=layout, index_bits=index_bits
    )


@functools.cache
def eager_sources() -> tuple:
    sources = [formula_source(name, dt) for name, dt in formula_cases()]
    sources += [E.render_cast(a, b, rank=3, index_bits=32) for a in E.DTYPES for b in E.DTYPES if a != b]
    sources += [E.render_copy(dt, rank=3, index_bits=32) for dt in E.DTYPES]
    sources += [
        reduction_source(op, dt, layout) for op in R.OPS for dt in REDUCTION_DTYPES for layout in ("outputs", "rows")
    ]
    # 64-bit indices: a sample of each family
    sources += [formula_source(name, dt, 64) for name, dt in WIDE_FORMULAS]
    sources += [E.render_cast(a, b, rank=3) for a, b in WIDE_CASTS]
    sources += [E.render_copy(dt, rank=3) for dt in ("float16", "int8")]
    sources += [
        reduction_source(op, dt, lay, 64) for op in R.OPS for dt in ("float32", "int64") for lay in ("outputs", "rows")
    ]
    sources += [C.render_convolution(dt, nd, t) for dt in C.DTYPES for nd in (1, 2, 3) for t in (False, True)]
    sources += [G.render_conv_gemm(dt, nd, t) for dt in G.DTYPES for nd in (1, 2, 3) for t in (False, True)]
    sources += [G.render_split_sum(dt) for dt in G.DTYPES]
    return tuple(sources)


# helpers of the numerical checks (emulated and on a GPU) ---------------------------------------------

NP = {"bfloat16": ml_dtypes.bfloat16}
RTOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2**-10, "bfloat16": 2**-7}
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5]


def np_dtype(name: str):
    return np.dtype(NP.get(name, name))


def is_float(dt) -> bool:
    return np.dtype(dt).kind == "f" or np.dtype(dt) == np.dtype(ml_dtypes.bfloat16)


def cpu_kernel(name):
    return get_backend(munet.device("cpu")).kernels[name]


# formula ops that divide integers: a zero divisor raises ZeroDivisionError
INTEGER_DIVISIONS = ("div_floor", "div_trunc", "fmod", "remainder")


def random_values(dtype: str, shape, gen, name: str = "", position: int = 0) -> np.ndarray:
    if dtype == "bool":
        return gen.integers(0, 2, shape).astype(bool)
    if np_dtype(dtype).kind in "iu":
        if name in ("bitwise_left_shift", "bitwise_right_shift", "pow") and position == 1:
            return gen.integers(0, 6, shape).astype(dtype)
        info = np.iinfo(np_dtype(dtype))
        values = gen.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)
        if name in INTEGER_DIVISIONS and position == 1:  # a zero divisor raises (test_cuda_checks_emulated.py)
            values[values == 0] = 1
        return values
    x = gen.standard_normal(shape) * 3
    flat = x.reshape(-1)
    k = min(len(SPECIAL), flat.size // 2)
    flat[gen.choice(flat.size, k, replace=False)] = gen.permutation(SPECIAL)[:k]
    return x.astype(np_dtype(dtype))


def assert_matches(got: np.ndarray, want: np.ndarray, dtype: str, what: str, scale: np.ndarray | None = None):
    """``got`` within ``RTOL[dtype]`` of ``want``; where the formula's terms cancel, ``scale`` is their
    size (``tests/cancellation.py``) and :data:`TERM_ULPS` epsilons of it are allowed besides."""
    assert got.dtype == want.dtype, what
    if not is_float(want.dtype):
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=what)
    finite = np.isfinite(w)
    np.testing.assert_array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)], err_msg=what)
    if scale is None:
        np.testing.assert_allclose(g[finite], w[finite], rtol=RTOL[dtype], atol=RTOL[dtype] * 1e-30, err_msg=what)
        return
    eps = 2.0**-53 if dtype == "float64" else 2.0**-24  # float16/bfloat16 formulas compute in float32
    bound = RTOL[dtype] * np.abs(w[finite]) + TERM_ULPS * eps * np.broadcast_to(scale, w.shape)[finite]
    beyond = np.abs(g[finite] - w[finite]) > bound
    assert not beyond.any(), (
        f"{what}: {g[finite][beyond][:5]} against {w[finite][beyond][:5]}, beyond {bound[beyond][:5]}"
    )


UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def assert_within_sum_bound(got, reference, magnitude, terms: int, dtype: str, what: str = "output") -> None:
    """``got`` (of ``dtype``) is a sum of at most ``terms`` products whose float64 value is ``reference``
    and whose absolute values sum to ``magnitude`` (both computed from the same ``dtype`` operands).
    The cuda convolution kernels accumulate in double (float64) or float (the others), in any order,
    and round once to ``dtype``, so by Higham's bound (gamma_n = n u / (1 - n u), Accuracy and
    Stability of Numerical Algorithms, 3.1) ``|got - reference| <= gamma_terms(u_acc) magnitude
    (1 + u) + u |reference| + half the smallest subnormal of dtype``, plus the float64 reference's own
    ``gamma_terms(2**-53) magnitude``. A wrong index or a lost term errs by a term's size, far above."""

    def gamma(u):
        return terms * u / (1 - terms * u)

    u = UNIT_ROUNDOFF[dtype]
    u_acc = UNIT_ROUNDOFF["float64" if dtype == "float64" else "float32"]
    g, r, m = (np.asarray(a, dtype=np.float64) for a in (got, reference, magnitude))
    assert g.shape == r.shape, f"{what}: shape {g.shape} != {r.shape}"
    tiny = float(np.finfo(np_dtype(dtype)).smallest_subnormal) / 2
    bound = gamma(u_acc) * m * (1 + u) + u * np.abs(r) + tiny + gamma(2.0**-53) * m
    excess = np.abs(g - r) - bound
    worst = np.unravel_index(np.argmax(excess), r.shape) if r.size else None
    assert worst is None or excess[worst] <= 0, (
        f"{what} ({dtype}): |got - reference| = {abs(g[worst] - r[worst]):.3g} at {worst} > bound {bound[worst]:.3g}"
    )


def torch_convolution(x, w, *, stride, padding, dilation, groups, transposed, output_padding):
    """PyTorch's float64 convolution of float64 arrays ``x``, ``w`` with ``padding`` per side ``((lo, hi),
    ...)``, as the ``convolution`` primitive defines it (munet/ops/conv.py)."""
    import torch

    tx, tw, nd = torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.ascontiguousarray(w)), w.ndim - 2
    F = torch.nn.functional
    if not transposed:
        pads = [p for lo_hi in reversed(padding) for p in lo_hi]  # F.pad: the last dim first
        conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
        return conv(F.pad(tx, pads), tw, stride=stride, dilation=dilation, groups=groups).numpy()
    fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    full = fn(tx, tw, stride=stride, dilation=dilation, groups=groups).numpy()
    # the primitive's output drops `lo` leading and `hi` trailing positions of the full one; output_padding
    # can reach past its end, where no input reaches (zeros)
    for d, ((lo, hi), extra) in enumerate(zip(padding, output_padding)):
        size = full.shape[2 + d] - lo - hi + extra
        kept = np.take(full, range(lo, min(lo + size, full.shape[2 + d])), axis=2 + d)
        missing = size - kept.shape[2 + d]
        widths = [(0, 0)] * full.ndim
        widths[2 + d] = (0, missing)
        full = np.pad(kept, widths)
    return full


def conv_case(x, w, stride=1, padding=0, dilation=1, groups=1, transposed=False, output_padding=0, layout="plain"):
    nd = len(w) - 2

    def per_dim(v):
        return tuple(v) if isinstance(v, tuple) else (v,) * nd

    pads = tuple(p if isinstance(p, tuple) else (p, p) for p in per_dim(padding))
    geometry = dict(stride=per_dim(stride), padding=pads, dilation=per_dim(dilation), groups=groups)
    return x, w, {**geometry, "transposed": transposed, "output_padding": per_dim(output_padding)}, layout


# the implicit-GEMM kernel's cases: x shape, w shape, geometry, layout "strided": x channels-last and w every other filter of a larger one
CONV_GEMM_CASES = {
    "2d, two row and two column tiles, K remainder": conv_case((2, 9, 7, 6), (70, 9, 3, 3), padding=1),
    "2d stride, dilation, per-side padding": conv_case((1, 5, 9, 8), (17, 5, 2, 3), (2, 1), ((1, 0), (2, 1)), (1, 2)),
    "2d groups, strided operands": conv_case((2, 6, 5, 5), (12, 2, 3, 3), groups=3, layout="strided"),
    "2d depthwise": conv_case((1, 4, 6, 5), (4, 1, 3, 3), padding=1, groups=4),
    "2d single channels, batch 3": conv_case((3, 1, 5, 4), (1, 1, 2, 2)),
    "2d 1x1, 66 filters": conv_case((1, 20, 3, 5), (66, 20, 1, 1)),
    "1d stride 2, groups": conv_case((2, 16, 9), (18, 8, 3), 2, 1, groups=2, layout="strided"),
    "3d": conv_case((1, 3, 4, 5, 3), (9, 3, 2, 3, 1), (1, 2, 1), ((1, 0), (0, 1), (0, 0))),
    "transposed 2d stride 2, output padding": conv_case(
        (2, 9, 4, 5), (9, 66, 3, 3), 2, 1, transposed=True, output_padding=1
    ),
    "transposed 2d dilation, per-side padding, groups": conv_case(
        (1, 6, 5, 4), (6, 3, 3, 2), (1, 2), ((2, 0), (0, 1)), (2, 1), 2, True, layout="strided"
    ),
    "transposed 2d depthwise": conv_case((1, 3, 4, 4), (3, 1, 3, 3), 2, groups=3, transposed=True),
    "transposed 1d": conv_case((2, 4, 6), (4, 5, 3), 3, 2, 2, transposed=True, output_padding=2),
    "transposed 3d, strided operands": conv_case(
        (1, 4, 3, 2, 3), (4, 6, 2, 2, 3), (2, 1, 1), 1, transposed=True, layout="strided"
    ),
}


# long reductions over few tiles (as weight gradients are), for K split 2, 3 (one split starting past
# K) and 5 ways
CONV_SPLIT_CASES = {
    "2d": conv_case((2, 7, 12, 13), (9, 7, 3, 3), padding=1),
    "transposed 1d, strided operands": conv_case((1, 50, 11), (50, 3, 2), 2, transposed=True, layout="strided"),
}
CONV_SPLITS = (2, 3, 5)


def conv_operands(x_shape, w_shape, dtype: str, layout: str, seed: int, to=np.asarray) -> tuple:
    """Random ``x``, ``w`` of ``dtype`` moved by ``to`` (``cupy.asarray`` for a GPU; bfloat16 travels as
    its uint16 bits), as views with ``layout``'s strides: "strided" makes ``x`` channels-last and ``w``
    every other filter of a weight twice as tall."""
    rng = np.random.default_rng(seed)
    tall = (2 * w_shape[0], *w_shape[1:]) if layout == "strided" else w_shape
    x_stored = (x_shape[0], *x_shape[2:], x_shape[1]) if layout == "strided" else x_shape
    x, w = (rng.standard_normal(s).astype(np_dtype(dtype)) for s in (x_stored, tall))
    bits = dtype == "bfloat16" and to is not np.asarray
    x, w = (to(a.view(np.uint16) if bits else a) for a in (x, w))
    if layout == "strided":
        x, w = x.transpose(0, x.ndim - 1, *range(1, x.ndim - 1)), w[::2]
    return x, w


def element_strides(a) -> tuple:
    return tuple(s // a.itemsize for s in a.strides)


def gemm_launch(dtype: str, x, w, geometry: dict, empty, splits: int = 1) -> list:
    """The launches computing ``x`` by ``w`` with ``geometry`` (a ``CONV_GEMM_CASES`` entry's) on the
    implicit-GEMM kernel, K split ``splits`` ways: ``[(CudaSource, work items, argument values), ...]``
    (the GEMM, then for splits the partials' sum), arrays from ``empty(shape, dtype name)``; the
    output is the GEMM's third value."""
    spatial = conv_output_spatial(x.shape[2:], w.shape[2:], *(geometry[k] for k in ("stride", "padding", "dilation")),
                                  geometry["transposed"], geometry["output_padding"])  # fmt: skip
    cg, og = kernels_conv.channels_per_group(x.shape, w.shape, geometry["groups"], geometry["transposed"])
    out = empty((x.shape[0], og * geometry["groups"], *spatial), dtype)
    part = empty((splits, *out.shape), "float64" if dtype == "float64" else "float32") if splits > 1 else np.uint64(0)
    values = kernels_conv.argument_values(
        (x, w, out), (x.shape, w.shape, out.shape), (element_strides(x), element_strides(w)),
        **{k: v for k, v in geometry.items() if k != "output_padding"},
    )  # fmt: skip
    src = G.render_conv_gemm(dtype, w.ndim - 2, geometry["transposed"])
    tiles = G.tiles(x.shape[0] * math.prod(spatial), og, geometry["groups"], splits)
    launches = [(src, tiles, [*values, part, splits])]
    if splits > 1:
        launches.append((G.render_split_sum(dtype), out.size, [part, out, out.size, splits]))
    return launches


def assert_gemm_convolution(out, x, w, geometry: dict, dtype: str, what: str) -> None:
    """``out`` is ``x`` by ``w`` with ``geometry``, within the summation bound of PyTorch's float64
    result (host arrays of ``dtype``)."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    reference = torch_convolution(x64, w64, **geometry)
    magnitude = torch_convolution(np.abs(x64), np.abs(w64), **geometry)
    cg, _ = kernels_conv.channels_per_group(x.shape, w.shape, geometry["groups"], geometry["transposed"])
    assert_within_sum_bound(out, reference, magnitude, cg * math.prod(w.shape[2:]), dtype, what)


# eager convolutions with gradients: function name (in F and torch.nn.functional), x shape, w shape, kwargs
CONV_EAGER_CASES = {
    "conv1d stride, groups": ("conv1d", (2, 4, 9), (6, 2, 3), {"stride": 2, "padding": 1, "groups": 2}),
    "conv2d dilation": ("conv2d", (2, 3, 7, 6), (4, 3, 3, 2), {"padding": (1, 0), "dilation": (2, 1)}),
    "conv2d tile remainders": ("conv2d", (2, 9, 9, 8), (70, 9, 3, 3), {"padding": 1}),
    "conv2d ResNet-like channels": ("conv2d", (2, 24, 6, 6), (32, 24, 3, 3), {"padding": 1}),
    "conv2d a long weight-gradient reduction": ("conv2d", (2, 8, 16, 16), (16, 8, 3, 3), {"padding": 1}),
    "conv2d 'same' with an even kernel (per-side padding)": ("conv2d", (1, 5, 6, 7), (9, 5, 4, 2), {"padding": "same"}),
    "conv2d depthwise, batch 1": ("conv2d", (1, 4, 6, 5), (8, 1, 3, 3), {"padding": 1, "groups": 4}),
    "conv2d single channels": ("conv2d", (3, 1, 5, 4), (1, 1, 2, 2), {}),
    "conv3d": ("conv3d", (1, 2, 4, 5, 3), (3, 2, 2, 3, 1), {"stride": (1, 2, 1)}),
    "transposed2d": ("conv_transpose2d", (2, 4, 4, 5), (4, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    "transposed1d": ("conv_transpose1d", (1, 4, 6), (4, 1, 3), {"groups": 2, "dilation": 2}),
    "transposed3d": ("conv_transpose3d", (1, 3, 2, 3, 2), (3, 5, 2, 2, 2), {"stride": (1, 2, 1)}),
}
CONV_DTYPE_CASES = ("conv1d stride, groups", "conv2d tile remainders", "conv3d", "transposed2d")


def _convolution_terms(fn: str, x_shape, w_shape, out_shape, groups: int) -> dict:
    """The most products any element of the output and of each gradient sums."""
    window = math.prod(w_shape[2:])
    transposed = fn.startswith("conv_transpose")
    cg = x_shape[1] // groups
    og = w_shape[1] if transposed else w_shape[0] // groups
    pixels = max(math.prod(x_shape[2:]), math.prod(out_shape[2:]))
    return {"output": cg * window, "x.grad": og * window, "w.grad": x_shape[0] * pixels}


def _torch_convolution_grads(fn, x, w, g, kwargs) -> dict:
    import torch

    tx, tw = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w))
    with warnings.catch_warnings():  # padding="same" with an even kernel: torch warns that it pads a copy
        warnings.simplefilter("ignore", UserWarning)
        out = getattr(torch.nn.functional, fn)(tx, tw, **kwargs)
    out.backward(torch.tensor(g, dtype=torch.float64))
    return {"output": out.detach().numpy(), "x.grad": tx.grad.numpy(), "w.grad": tw.grad.numpy()}


def force_conv_kernel(monkeypatch, kind: str) -> None:
    """Every cuda convolution of the test runs on ``kind`` ("gemm" or "direct"): ``MIN_FILL`` forces
    ``kernels_conv.choose_kernel``'s answer."""
    monkeypatch.setattr(kernels_conv, "MIN_FILL", {"gemm": 0.0, "direct": 2.0}[kind])


def check_convolution(case: str, dtype: str, layout: str = "plain", device: str = "cuda") -> None:
    """``CONV_EAGER_CASES[case]`` on ``device``: forward, then backward of a random output gradient,
    output and both gradients within the summation bound of PyTorch's float64 results; ``layout``
    "strided" reads the input through a transposed view's strides."""
    fn, x_shape, w_shape, kwargs = CONV_EAGER_CASES[case]
    rng = np.random.default_rng(len(case))
    x, w = (rng.standard_normal(s).astype(np_dtype(dtype)) for s in (x_shape, w_shape))
    xc = munet.tensor(x).to(device)
    if layout == "strided":
        xc = munet.tensor(np.ascontiguousarray(np.swapaxes(x, 0, 1))).to(device).transpose(0, 1)
    wc = munet.tensor(w).to(device)
    xc.requires_grad_(), wc.requires_grad_()
    out = getattr(munet.nn.functional, fn)(xc, wc, **kwargs)
    assert out.is_cuda and out.dtype.name == dtype
    g = rng.standard_normal(tuple(out.shape)).astype(np_dtype(dtype))
    out.backward(munet.tensor(g).to(device))
    got = {"output": out, "x.grad": xc.grad, "w.grad": wc.grad}
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    reference = _torch_convolution_grads(fn, x64, w64, g64, kwargs)
    magnitude = _torch_convolution_grads(fn, np.abs(x64), np.abs(w64), np.abs(g64), kwargs)
    terms = _convolution_terms(fn, x_shape, w_shape, out.shape, kwargs.get("groups", 1))
    for what, t in got.items():
        value = t.detach().cpu().float().numpy() if dtype == "bfloat16" else t.detach().cpu().numpy()
        assert_within_sum_bound(value, reference[what], magnitude[what], terms[what], dtype, f"{case}: {what}")


def pair(shape, dtype="float32", seed=0, scale=3.0, device="cuda:0"):
    """The same random tensor on the cpu and on ``device``."""
    values = np.random.default_rng(seed).standard_normal(shape) * scale
    host = munet.tensor(values).to(getattr(munet, dtype))
    return host, host.to(device)


def same(cuda_result, cpu_result, exact=True):
    """A cuda result equals the cpu's (``exact``) or is within 1e-6."""
    assert cuda_result.device.type == "cuda" and cuda_result.dtype is cpu_result.dtype
    assert tuple(cuda_result.shape) == tuple(cpu_result.shape)
    got = cuda_result.cpu().float().numpy() if cpu_result.dtype is munet.bfloat16 else cuda_result.cpu().numpy()
    want = cpu_result.float().numpy() if cpu_result.dtype is munet.bfloat16 else cpu_result.numpy()
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# eager ops run on a cuda device and compared with the cpu's (emulated and GPU tests): (x, y) -> result
EAGER_ELEMENTWISE = {
    "add, broadcast": lambda x, y: x + y[0],
    "mul by a python number, transposed": lambda x, y: x.t() * 2.5,
    "where with a python number": lambda x, y: munet.where(x > 0, x, 0.0),
    "clamp with a missing max": lambda x, y: munet.clamp(x, min=y[1]),
    "lerp with a python weight": lambda x, y: munet.lerp(x, y, 0.25),
    "comparison to bool": lambda x, y: x.t() >= y.t(),
    "leaky_relu attribute": lambda x, y: munet.nn.functional.leaky_relu(x, 0.2),
    "sliced operand": lambda x, y: x[:, 1::2] - y[:, ::2],
}


# x -> result; a sum is exact only up to its rounding order
EAGER_REDUCTIONS = {
    "sum over a transposed dim": lambda x: x.t().sum(1),
    "sum of everything, keepdim": lambda x: x.sum(dim=(0, 1), keepdim=True),
    "sum of a long row (one block per row)": lambda x: x.reshape(3, 80).sum(1),
    "amax": lambda x: x.amax(0),
    "amin keepdim": lambda x: x.amin(1, keepdim=True),
    "argmax over everything": lambda x: x.argmax(),
    "argmin along a dim": lambda x: x.argmin(0),
    "all along a dim": lambda x: (x > -2).all(1),
    "any of a float tensor, keepdim": lambda x: (x * (x > 2)).any(0, keepdim=True),
    "all and any over an empty dim": lambda x: munet.stack([x[:, :0].all(1), x[:, :0].any(1)]),
    "any of uint8": lambda x: (x > 1).to(munet.uint8).any(1),
}


# scatter / scatter_reduce / index_put (the put kernel, ``kernels_indexing.py``) -------------------------
# name -> (fn(to) -> result, rtol): ``to`` moves a host tensor to the device under test (identity on the
# cpu); rtol 0 means equal. Atomic float sums may add in another order on a GPU, so those get a tolerance.


def _host(shape, dtype="float32", seed=0, scale=3.0):
    return munet.tensor(np.random.default_rng(seed).standard_normal(shape) * scale).to(getattr(munet, dtype))


def _ints(low, high, shape, seed, dtype="int64"):
    return munet.tensor(np.random.default_rng(seed).integers(low, high, shape)).to(getattr(munet, dtype))


_X, _S = _host((4, 5), seed=11), _host((3, 6), seed=12)  # src larger than the index: its leading block
_I = munet.tensor([[1, 0, 3, 3, 2], [1, 2, 0, 3, 0], [1, 1, 0, 2, 2]])  # duplicates along dim 0
_J = munet.tensor([[3, 3], [0, 1], [2, 2], [1, 0], [3, 1]])  # along dim 1 of a (5, 4) tensor
_NAN_S = _S.clone()
_NAN_S[1, 0] = float("nan")
_Y, _V = _host((5, 4, 3), seed=13), _host((4, 3), seed=14)
_I0, _I2 = munet.tensor([[0, -1], [4, 0]]), munet.tensor([[2, 0], [-3, -3]])  # duplicates, negatives
_F16, _BF16 = 1e-3, 8e-3  # an ulp of float16/bfloat16 results near 1, when a sum rounds the other way


def _scatter_reduce(reduce, include_self, dtype="float32", src=_S, x=_X):
    def run(to):
        return to(x.to(getattr(munet, dtype))).scatter_reduce(
            0, to(_I), to(src.to(getattr(munet, dtype))), reduce, include_self=include_self
        )

    return run


def _set_into_transposed(to):
    y = to(_host((4, 6), seed=15)).clone()
    y.t()[to(munet.tensor([5, 0, 5, 2]))] = 1.5
    return y


def _set_non_adjacent(to):
    y = to(_Y).clone()
    y[to(_I0), :, to(_I2)] = to(_host((2, 1, 4), seed=16))
    return y


def _accumulate_a_number(to):
    z = to(_ints(-50, 50, (6, 2), 17)).clone()
    z.index_put_((to(munet.tensor([1, 5, 1, -1])),), to(munet.tensor(3)), accumulate=True)
    return z


def _overlapping_windows_gradient(to):
    x = to(_X).detach().requires_grad_()  # as_strided's gradient adds the windows' overlaps
    (x.as_strided((3, 4), (2, 1), 1) * to(_host((3, 4), seed=37))).sum().backward()
    return x.grad


EAGER_INDEXING = {
    "scatter, duplicates (the last write wins)": (lambda to: munet.scatter(to(_X), 0, to(_I), to(_S)), 0),
    "scatter a number along dim 1 of a transposed view": (lambda to: to(_X).t().scatter(1, to(_J), 2.5), 0),
    "scatter, a single index along dim": (lambda to: to(_X).scatter(1, to(_J[:4, :1]), to(_host((4, 2), seed=27))), 0),
    "scatter_ in place": (lambda to: to(_X).clone().scatter_(0, to(_I), to(_S)), 0),
    "scatter, an empty index": (lambda to: munet.scatter(to(_X), 0, to(_I[:0]), to(_S)), 0),
    "scatter_add float32": (lambda to: to(_X).scatter_add(0, to(_I), to(_S)), 1e-6),
    "scatter_add float16": (lambda to: to(_X.half()).scatter_add(0, to(_I), to(_S.half())), _F16),
    "scatter_add bfloat16": (lambda to: to(_X.bfloat16()).scatter_add(0, to(_I), to(_S.bfloat16())), _BF16),
    "scatter_add int64": (lambda to: to(_ints(-9, 9, (4, 5), 18)).scatter_add(0, to(_I), to(_ints(-9, 9, (3, 5), 19))), 0),
    "scatter_add int8 wraps": (lambda to: to(_ints(90, 127, (4, 5), 20, "int8")).scatter_add(0, to(_I), to(_ints(90, 127, (3, 5), 21, "int8"))), 0),
    "scatter_add bool (or)": (lambda to: to(_X > 2).scatter_add(0, to(_I), to(_S[:, :5] > 0)), 0),
    "scatter multiply float64": (lambda to: to(_X.double()).scatter(0, to(_I), to(_S.double()), reduce="multiply"), 1e-12),
    "scatter multiply int32": (lambda to: to(_ints(-5, 5, (4, 5), 22, "int32")).scatter(0, to(_I), to(_ints(-5, 5, (3, 5), 23, "int32")), reduce="multiply"), 0),
    **{
        f"scatter_reduce {r}, include_self={s}": (_scatter_reduce(r, s), 1e-6)
        for r in ("sum", "prod", "mean", "amax", "amin")
        for s in (True, False)
    },
    "scatter_reduce amax propagates NaN": (_scatter_reduce("amax", True, src=_NAN_S), 0),
    "scatter_reduce amin float16": (_scatter_reduce("amin", False, "float16"), 0),
    "scatter_reduce mean int32 (floor)": (_scatter_reduce("mean", False, "int32", _ints(-20, 20, (3, 5), 24), _ints(-20, 20, (4, 5), 25)), 0),
    "scatter_reduce amax int8 from -128": (_scatter_reduce("amax", False, "int8", munet.full((3, 5), -128), _ints(-9, 9, (4, 5), 26)), 0),
    "index_put accumulate, duplicate and negative indices": (lambda to: munet.index_put(to(_Y), (to(_I0),), to(_V), accumulate=True), 1e-6),
    "index_put (the last write wins)": (lambda to: munet.index_put(to(_Y), (to(_I0),), to(_V)), 0),
    "index_put_ at non-adjacent positions": (_set_non_adjacent, 0),
    "index_put accumulate bfloat16, two positions": (lambda to: munet.index_put(to(_Y.bfloat16()), (to(_I0), to(_I2 + 1)), to(_V[0].bfloat16()), accumulate=True), _BF16),
    "setitem into a transposed view": (_set_into_transposed, 0),
    "index_put_ accumulate a 0-d int64": (_accumulate_a_number, 0),
    "strided_scatter_add: as_strided's gradient": (_overlapping_windows_gradient, 1e-6),
    "strided_scatter_add: fold": (lambda to: munet.nn.functional.fold(to(_host((1, 8, 12), seed=38)), (4, 5), 2), 1e-6),
    "index_add along dim 1": (lambda to: to(_X).index_add(1, to(munet.tensor([4, 0, 4, 1, 4, 2])), to(_host((4, 6), seed=28))), 1e-6),
}  # fmt: skip


def same_within(cuda_result, cpu_result, rtol: float):
    """A cuda result equals the cpu's (``rtol`` 0) or is within ``rtol`` of it (NaN where it is NaN)."""
    cuda_result, cpu_result = cuda_result.detach(), cpu_result.detach()
    if not rtol:
        return same(cuda_result, cpu_result)
    assert cuda_result.device.type == "cuda" and cuda_result.dtype is cpu_result.dtype
    got, want = cuda_result.cpu().double().numpy(), cpu_result.double().numpy()
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


# scans (``kernels_scan.py``), cat and as_strided_scatter: name -> (fn(to) -> result, rtol), as EAGER_INDEXING
_LINE = munet.rand(20011, generator=munet.Generator().manual_seed(31))
_LINE_TIES = munet.randint(0, 40, (20011,), generator=munet.Generator().manual_seed(32)).float()
_LINE_TIES[15000::2999] = float("nan")
_T = _host((4, 6), seed=30)
_T[1, 2], _T[2, 0], _T[2, 4] = float("nan"), float("nan"), float("nan")
_T[0, 3] = _T[0, 1] = 5.0  # a tie with the running maximum
_Z = _host((3, 5), "float64", seed=31)
_Z[1, 2] = _Z[2, 0] = 0.0

EAGER_SCANS = {
    "cumsum along dim 1": (lambda to: to(_X).cumsum(1), 0),
    "cumsum of a transposed view": (lambda to: to(_X).t().cumsum(0), 0),
    "cumsum float16": (lambda to: to(_X.half()).cumsum(0), 0),
    "cumsum bfloat16": (lambda to: to(_X.bfloat16()).cumsum(-1), 0),
    "cumsum int32 gives int64": (lambda to: to(_ints(-9, 9, (3, 7), 32, "int32")).cumsum(1), 0),
    "cumsum in int8 wraps": (lambda to: to(_ints(60, 127, (2, 6), 33, "int8")).cumsum(1, dtype=munet.int8), 0),
    "cumsum of a 0-d tensor": (lambda to: to(munet.tensor(2.5)).cumsum(0), 0),
    "cumsum of an empty dim": (lambda to: to(_X[:, :0]).cumsum(1), 0),
    # one line past kernels_scan.SEGMENTED_MIN_LENGTH (8192): segments; positive terms, so each prefix
    # (cpu's in order, cuda's by segments) is within n * 2**-24 of the exact one, relatively
    "cumsum of a long line in segments": (lambda to: to(_LINE).cumsum(0), 2 * _LINE.numel() * 2**-24),
    "cummax of a long line in segments, NaN and ties": (lambda to: munet.cummax(to(_LINE_TIES), 0).indices, 0),
    "cumprod float64 with zeros": (lambda to: to(_Z).cumprod(1), 0),
    "cumprod float32": (lambda to: to(_X * 0.5).cumprod(0), 0),
    "cummax values, NaN and ties": (lambda to: munet.cummax(to(_T), 1).values, 0),
    "cummax indices, NaN and ties": (lambda to: munet.cummax(to(_T), 1).indices, 0),
    "cummin values": (lambda to: munet.cummin(to(_T), 0).values, 0),
    "cummin indices": (lambda to: munet.cummin(to(_T), 0).indices, 0),
    "cummin int64 ties": (lambda to: munet.cummin(to(_ints(0, 3, (2, 9), 34)), 1).indices, 0),
    "logcumsumexp": (lambda to: munet.logcumsumexp(to(_X), 1), 1e-6),
    "cat with a transposed operand": (lambda to: munet.cat([to(_X), to(_S[:, :4]).t(), to(_X[:, :1])], 1), 0),
    "cat skipping an empty 1-d tensor": (lambda to: munet.cat([to(_X), to(munet.zeros(0)), to(_X)], 1), 0),
    "as_strided_scatter into a strided view": (lambda to: munet.as_strided_scatter(to(_X), to(_S[:2, :2]), (2, 2), (5, 2), 1), 0),
}  # fmt: skip


# sort / topk (``kernels_sort.py``) and the composites over them: name -> (fn(to) -> result, rtol)
_TIES = munet.tensor([[3, 1, 3, 0, 1, 3, 2], [5, 5, 5, 5, 5, 5, 5]])
# rows past kernels_sort.MERGE_MIN_LENGTH (2048), not a power of two, with NaNs and many ties: merge passes
_LONG = munet.randint(0, 50, (2, 3049), generator=munet.Generator().manual_seed(7)).float()
_LONG[0, ::97] = float("nan")

EAGER_SORTS = {
    "sort values, NaN last and ties": (lambda to: munet.sort(to(_T), 1).values, 0),
    "sort indices, stable": (lambda to: munet.sort(to(_T), 1).indices, 0),
    "sort descending indices, NaN first": (lambda to: munet.sort(to(_T), 1, descending=True).indices, 0),
    "sort descending values": (lambda to: munet.sort(to(_T), 1, descending=True).values, 0),
    "sort a transposed view along dim 0": (lambda to: munet.sort(to(_X).t(), 0).indices, 0),
    "sort float16": (lambda to: munet.sort(to(_X.half()), 0).values, 0),
    "sort int64 ties": (lambda to: munet.sort(to(_TIES), 1, stable=True).indices, 0),
    "sort int64 ties descending": (lambda to: munet.sort(to(_TIES), 1, descending=True).indices, 0),
    "sort bool": (lambda to: munet.sort(to(_TIES > 2), 1).indices, 0),
    "sort a 0-d tensor": (lambda to: munet.sort(to(munet.tensor(4.0))).values, 0),
    "sort an empty dim": (lambda to: munet.sort(to(_X[:, :0]), 1).indices, 0),
    "topk largest": (lambda to: munet.topk(to(_T), 3, dim=1).indices, 0),
    "topk smallest values": (lambda to: munet.topk(to(_X), 2, dim=0, largest=False).values, 0),
    "topk k=0": (lambda to: munet.topk(to(_X), 0, dim=1).values, 0),
    "argsort descending": (lambda to: munet.argsort(to(_TIES), 1, descending=True), 0),
    "kthvalue": (lambda to: munet.kthvalue(to(_X), 2, 1).values, 0),
    "sort long rows": (lambda to: munet.sort(to(_LONG), 1).values, 0),
    "sort long rows, stable indices": (lambda to: munet.sort(to(_LONG), 1).indices, 0),
    "sort long rows descending": (lambda to: munet.sort(to(_LONG), 1, descending=True).indices, 0),
    "topk of long transposed rows": (lambda to: munet.topk(to(_LONG).t(), 5, dim=0).indices, 0),
    "unique of a long row": (lambda to: munet.unique(to(_LONG[1]), return_inverse=True)[1], 0),
}  # fmt: skip


def compiled_sgd_twins(net, loss_fn, lr: float):
    """``net()`` twice with the same weights, one on cuda:0 and one on the cpu, each with SGD at ``lr``:
    ``(compiled cuda step, eager cpu step, cuda model, cpu model)``; a step ``(inputs, targets)``
    zeroes the gradients, backpropagates ``loss_fn(model(inputs), targets)``, steps and returns the loss."""
    model, reference = net(), net()
    reference.load_state_dict(model.state_dict())
    model.cuda()
    opt, ref_opt = munet.optim.SGD(model.parameters(), lr=lr), munet.optim.SGD(reference.parameters(), lr=lr)

    def step(model, opt, inputs, targets):
        opt.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        opt.step()
        return loss

    compiled = munet.compile(lambda inputs, targets: step(model, opt, inputs, targets))
    return compiled, (lambda inputs, targets: step(reference, ref_opt, inputs, targets)), model, reference

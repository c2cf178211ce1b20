"""The cpu's eager row kernels as compiled C (munet/backends/cpu/row_kernels.py, codegen/c_rows.py).

Each kernel (softmax, softmax_backward, standardize along the last dim of float32 tensors) is
checked against its composite's decomposition on special rows (NaN, +-inf, all -inf, signed zeros,
ties, a constant row) with row lengths below, at and above the kernel's 16 lanes, and against
PyTorch on the GPT step's shapes (forward and gradient through the public functions). Tolerances:
the kernels sum in another order than NumPy's pairwise sums and take exp from a float32 polynomial
(within 2 ulp), so they agree to float32 rounding: the default float32 tolerances (rtol 1.3e-6,
atol 1e-5), as tests/ops/test_composites.py uses for every fast kernel. The fallbacks (a dim
other than the last, non-contiguous operands, float64, small tensors, ``MUNET_EAGER_C`` off)
return None so the NumPy kernel runs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import munet
import munet.nn.functional as F
from munet.backends.cpu import compiled_formula, row_kernels
from munet.compiler.codegen import build
from munet.ops._registry import OPS, decompose
from tests.reference import check, randn

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler")


@pytest.fixture
def always_c(monkeypatch):
    monkeypatch.setattr(row_kernels, "MIN_ELEMENTS", 0)


def _special(width: int) -> np.ndarray:
    """(3, 8, width) float32 rows: plain, NaN, +inf, -inf, all -inf, signed zeros, tied maxima, constant."""
    rng = np.random.default_rng(width)
    x = rng.standard_normal((3, 8, width)) * 3
    x[0, 1, width // 2] = math.nan
    x[0, 2, 0] = math.inf
    x[0, 3, width - 1] = -math.inf
    x[0, 4, :] = -math.inf
    x[0, 5, :] = [0.0 if i % 2 else -0.0 for i in range(width)]
    x[0, 6, : max(width // 2, 1)] = 2.5 + x[0, 6].max()
    x[0, 7, :] = -1.25
    x[1, 3, :] = 7.0
    return x.astype(np.float32)


def _same(fast: np.ndarray, meant: np.ndarray, what: str) -> None:
    np.testing.assert_array_equal(np.isnan(fast), np.isnan(meant), err_msg=f"{what}: NaN positions")
    np.testing.assert_allclose(fast, meant, rtol=1.3e-6, atol=1e-5, equal_nan=True, err_msg=what)
    zeros = (fast == 0) & (meant == 0)
    np.testing.assert_array_equal(np.signbit(fast[zeros]), np.signbit(meant[zeros]), err_msg=f"{what}: zero signs")


def _decomposed(name: str, *args, **attrs):
    out = decompose(OPS[name], tuple(munet.tensor(a) for a in args), attrs)
    return tuple(o.numpy() for o in out) if isinstance(out, tuple) else out.numpy()


@pytest.mark.parametrize("width", [1, 7, 16, 37, 128])
def test_softmax_and_its_gradient_match_the_decompositions(always_c, width):
    x = _special(width)
    g = np.flip(x, (0, 2)).copy()
    with np.errstate(invalid="ignore", over="ignore"):
        y = row_kernels.softmax(x, -1)
        _same(y, _decomposed("softmax", x, dim=2), f"softmax, width {width}")
        dx = row_kernels.softmax_backward(g, y, -1)
        _same(dx, _decomposed("softmax_backward", g, y, dim=2), f"softmax_backward, width {width}")


@pytest.mark.parametrize("width", [1, 7, 16, 37, 256])
@pytest.mark.parametrize("center", [True, False])
def test_standardize_matches_the_decomposition(always_c, width, center):
    x = _special(width)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        xhat, rstd = row_kernels.standardize(x, (2,), 1e-5, center)
        meant_xhat, meant_rstd = _decomposed("standardize", x, dims=(2,), eps=1e-5, center=center)
    _same(xhat, meant_xhat, f"standardize xhat, width {width}, center {center}")
    _same(rstd, meant_rstd, f"standardize rstd, width {width}, center {center}")


@pytest.mark.parametrize("threads", [1, 2])
def test_gpt_shapes_match_pytorch_forward_and_gradient(threads):
    """Softmax over attention scores and layer norm over the GPT's width, through the public
    functions at the default size threshold (the C path; on one thread and split over two), forward
    and gradient against PyTorch, within what PyTorch's float32 errs from its float64 run."""
    assert 4 * 4 * 128 * 128 >= row_kernels.MIN_ELEMENTS
    before = munet.get_num_threads()
    munet.set_num_threads(threads)
    try:
        check(lambda x: F.softmax(x, -1), lambda x: torch.softmax(x, -1), randn(4, 4, 128, 128), float64_reference=True)
        check(
            lambda x, w, b: F.layer_norm(x, (256,), w, b),
            lambda x, w, b: torch.nn.functional.layer_norm(x, (256,), w, b),
            randn(16, 128, 256, seed=1) * 2 + 1,
            randn(256, seed=2),
            randn(256, seed=3),
            float64_reference=True,
        )
    finally:
        munet.set_num_threads(before)


def test_the_numpy_kernels_serve_what_c_does_not(always_c, monkeypatch):
    x = np.random.default_rng(1).standard_normal((4, 6, 5)).astype(np.float32)
    assert row_kernels.softmax(x, 1) is None  # not the last dim
    assert row_kernels.softmax(np.asfortranarray(x), -1) is None  # not C-contiguous
    assert row_kernels.softmax(x.astype(np.float64), -1) is None
    assert row_kernels.softmax_backward(x, x[:, :, ::-1], -1) is None  # a reversed (non-contiguous) operand
    assert row_kernels.standardize(x, (1, 2), 1e-5, True) is None  # two dims
    assert row_kernels.softmax(x, -1) is not None
    monkeypatch.setattr(row_kernels, "MIN_ELEMENTS", x.size + 1)
    assert row_kernels.softmax(x, -1) is None  # below the size threshold
    monkeypatch.setattr(row_kernels, "MIN_ELEMENTS", 0)
    monkeypatch.setitem(compiled_formula._state, "enabled", False)  # MUNET_EAGER_C=0, or no compiler
    assert row_kernels.softmax(x, -1) is None


def test_softmax_kernels_through_the_public_functions_on_odd_inputs(always_c):
    """Size-0 and size-1 dims, a non-contiguous input and another dim than the last: the kernels
    (C or NumPy) give PyTorch's values and gradients."""
    rng = np.random.default_rng(2)
    for shape, dim, transpose in (((0, 5), -1, False), ((3, 1), -1, False), ((1, 9), 0, False), ((6, 9), -1, True)):
        data = rng.standard_normal(shape).astype(np.float32)
        m, t = munet.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        mi, ti = (m.t(), t.t()) if transpose else (m, t)
        ym, yt = F.softmax(mi, dim), torch.softmax(ti, dim)
        np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy(), rtol=1.3e-6, atol=1e-6)
        (ym * ym).sum().backward()
        (yt * yt).sum().backward()
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1.3e-6, atol=1e-6)

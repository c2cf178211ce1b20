"""munet.linalg beyond first derivatives: second derivatives (create_graph) of the factorization
rules against PyTorch's, gradcheck of eigh, ``out=``, and munet.compile of a training step that
runs the factorizations forward and backward (it must equal eager)."""

import numpy as np
import pytest
import torch

import munet
from tests.ops.test_linalg import double_backward
from tests.ops.test_linalg_factor import _fix_signs, distinct_symmetric, spd
from tests.reference import gradcheck, randn

LA = munet.linalg


def _sym(x):
    return (x + x.mT) / 2


@pytest.mark.parametrize(
    "name,fm,ft,make",
    [
        ("cholesky", lambda x: LA.cholesky(_sym(x)), lambda x: torch.linalg.cholesky(_sym(x)), lambda: spd(3, 3, seed=1)),
        ("solve_triangular", lambda x: LA.solve_triangular(x, x.mT, upper=True), lambda x: torch.linalg.solve_triangular(x, x.mT, upper=True), lambda: randn(3, 3, dtype="float64", seed=2) + 3 * np.eye(3)),
        ("lu_factor", lambda x: LA.lu_factor(x).LU, lambda x: torch.linalg.lu_factor(x).LU, lambda: randn(3, 3, dtype="float64", seed=3)),
        ("inv", LA.inv, torch.linalg.inv, lambda: randn(3, 3, dtype="float64", seed=4)),
        ("det", LA.det, torch.linalg.det, lambda: randn(3, 3, dtype="float64", seed=5)),
        ("svdvals", LA.svdvals, torch.linalg.svdvals, lambda: randn(4, 3, dtype="float64", seed=6)),
        ("eigvalsh", lambda x: LA.eigvalsh(_sym(x)), lambda x: torch.linalg.eigvalsh(_sym(x)), lambda: distinct_symmetric(4, 4, seed=7)),
        ("eigh", lambda x: _fix_signs(munet, LA.eigh(_sym(x))[1])[0], lambda x: _fix_signs(torch, torch.linalg.eigh(_sym(x))[1])[0], lambda: distinct_symmetric(3, 3, seed=8)),
        ("qr", lambda x: LA.qr(x).R.abs(), lambda x: torch.linalg.qr(x).R.abs(), lambda: randn(4, 3, dtype="float64", seed=9)),
        ("matrix_exp", LA.matrix_exp, torch.linalg.matrix_exp, lambda: randn(3, 3, dtype="float64", seed=10)),
        ("pinv", LA.pinv, torch.linalg.pinv, lambda: randn(4, 3, dtype="float64", seed=11)),
    ],
)  # fmt: skip
def test_second_derivatives(name, fm, ft, make):
    double_backward(fm, ft, make(), rtol=1e-6, atol=1e-8)


def test_eigh_gradcheck():
    a = distinct_symmetric(4, 4, seed=12)
    gradcheck(lambda x: _fix_signs(munet, LA.eigh(_sym(x))[1])[0] * 1.5 + LA.eigvalsh(_sym(x)).sum(), a)


def test_out():
    a = munet.tensor(spd(2, 3, 3, seed=13))
    out = munet.empty(2, 3, 3, dtype=munet.float64)
    assert LA.cholesky(a, out=out) is out
    np.testing.assert_allclose(out.numpy(), np.linalg.cholesky(a.numpy()), rtol=1e-12)
    q, r = munet.empty(2, 3, 3, dtype=munet.float64), munet.empty(2, 3, 3, dtype=munet.float64)
    result = LA.qr(a, out=(q, r))
    assert result.Q is q and result.R is r
    np.testing.assert_allclose((q @ r).numpy(), a.numpy(), rtol=1e-10)


def test_compiled_step_equals_eager():
    def step(a, b):
        _, s, _ = LA.svd(a, full_matrices=False)
        w = LA.eigvalsh(a @ a.mT)
        shifted = a + 3 * munet.eye(3, dtype=a.dtype)
        loss = s.sum() + w.sum() + LA.solve(shifted, b).sum() + LA.det(a) + LA.qr(a).R.sum()
        loss = loss + LA.matrix_exp(a).sum() + LA.cholesky(shifted @ shifted.mT).sum() + LA.norm(a, 2)
        loss.backward()
        return loss

    a0, b0 = randn(3, 3, dtype="float64", seed=14), randn(3, 2, dtype="float64", seed=15)
    results = []
    for fn in (step, munet.compile(step)):
        a, b = munet.tensor(a0, requires_grad=True), munet.tensor(b0, requires_grad=True)
        for _ in range(2):  # the second call replays the compiled plan
            a.grad = b.grad = None
            loss = fn(a, b)
        results.append((loss.item(), a.grad.numpy(), b.grad.numpy()))
    (le, ae, be), (lc, ac, bc) = results
    assert le == pytest.approx(lc, rel=1e-12)
    np.testing.assert_allclose(ac, ae, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(bc, be, rtol=1e-10, atol=1e-12)


def test_autocast_runs_the_solves_in_float32():
    """Under CPU autocast PyTorch runs the factorizations and solves as float32 ops (pinv's matmuls
    stay low precision): MuNet's composites match, inside too (no bfloat16 matmul in solve)."""
    a = randn(3, 3, dtype="float32", seed=16) + 3 * np.eye(3, dtype=np.float32)
    b = randn(3, 2, dtype="float32", seed=17)
    cases = {
        "solve": lambda linalg, x, y: linalg.solve(x, y),
        "inv": lambda linalg, x, y: linalg.inv(x),
        "det": lambda linalg, x, y: linalg.det(x),
        "cholesky": lambda linalg, x, y: linalg.cholesky(x + x.mT),
        "svdvals": lambda linalg, x, y: linalg.svdvals(x),
        "lstsq": lambda linalg, x, y: linalg.lstsq(x, y).solution,
        "matrix_exp": lambda linalg, x, y: linalg.matrix_exp(x),
        "pinv": lambda linalg, x, y: linalg.pinv(x),
    }
    for name, f in cases.items():
        with munet.autocast("cpu", dtype=munet.bfloat16):
            m = f(LA, munet.tensor(a), munet.tensor(b))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            t = f(torch.linalg, torch.tensor(a), torch.tensor(b))
        assert m.dtype.name == str(t.dtype).replace("torch.", ""), name
        if name != "pinv":
            plain = f(LA, munet.tensor(a), munet.tensor(b))
            np.testing.assert_array_equal(m.numpy(), plain.numpy(), err_msg=name)

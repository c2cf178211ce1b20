"""``munet.special`` and the torch-level special functions (``munet/ops/special.py``) against
``torch.special`` / ``torch``.

Forward values are compared in float64 (tight: the composites are exact formulas or converge
to float64 rounding) and in float32 against torch's float32 result (float32 tolerance: a few
ulps of the result, since torch evaluates other but equally rounded formulas). Gradients are
compared in float64 with autograd on both sides. Inputs include edge values (0, +-1, +-inf,
NaN, deep tails), non-contiguous views and size-0 tensors.
"""

import numpy as np
import pytest
import torch

import munet

RNG = np.random.default_rng(0)


def _m(a, requires_grad=False):
    return munet.tensor(a, requires_grad=requires_grad)


def _t(a, requires_grad=False):
    return torch.tensor(a, requires_grad=requires_grad)


def _check(mv, tv, rtol, atol):
    np.testing.assert_allclose(mv.detach().numpy(), tv.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True)


UNARY = {
    # name: (random inputs, edge values, where the gradient is compared)
    "sinc": (RNG.normal(size=(5, 7)) * 3, [0.0, 1.0, -2.0, 0.5, np.inf, -np.inf, np.nan, 1e-20], None),
    "entr": (RNG.uniform(0.01, 5, size=(5, 7)), [0.0, -1.0, 1.0, np.inf, np.nan, 1e-30], None),
    "ndtr": (RNG.normal(size=(5, 7)) * 4, [0.0, -40.0, 40.0, -np.inf, np.inf, np.nan, -5.0], None),
    "ndtri": (RNG.uniform(0.001, 0.999, size=(5, 7)), [0.0, 1.0, 0.5, 1e-12, 1 - 1e-9, -0.5, 1.5, np.nan], None),
    "log_ndtr": (RNG.normal(size=(5, 7)) * 8, [0.0, -9.99, -10.01, -30.0, -200.0, 10.0, 40.0, -np.inf, np.inf], None),
    "erf": (RNG.normal(size=(5, 7)), [0.0, np.inf, -np.inf], None),
    "erfc": (RNG.normal(size=(5, 7)), [0.0, 10.0, -np.inf], None),
    "erfinv": (RNG.uniform(-0.99, 0.99, size=(5, 7)), [0.0, 1.0, -1.0], None),
    "expit": (RNG.normal(size=(5, 7)) * 5, [0.0, 50.0, -50.0], None),
    "logit": (RNG.uniform(0.01, 0.99, size=(5, 7)), [0.0, 1.0, 0.5], None),
    "log1p": (RNG.uniform(-0.9, 5, size=(5, 7)), [0.0, -1.0, 1e-10], None),
    "expm1": (RNG.normal(size=(5, 7)), [0.0, 1e-10, -np.inf], None),
    "exp2": (RNG.normal(size=(5, 7)) * 3, [0.0, -np.inf, 10.0], None),
    "gammaln": (
        RNG.uniform(-6, 30, size=(5, 7)),
        [
            0.0,
            -0.0,
            1.0,
            2.0,
            0.5,
            1e-30,
            -1.0,
            -2.5,
            -0.3,
            -1e-7,
            7.99,
            8.0,
            -100.5,
            1e10,
            1e38,
            np.inf,
            -np.inf,
            np.nan,
        ],
        None,
    ),
    "digamma": (
        RNG.uniform(-6, 30, size=(5, 7)),
        [0.0, -0.0, 1.0, 2.0, 0.5, 1e-30, -1.0, -2.5, -0.3, -1e-7, 7.99, 8.0, -100.5, 1e10, np.inf, -np.inf, np.nan],
        None,
    ),
    "psi": (RNG.uniform(0.1, 5, size=(5, 7)), [0.0, -3.0], None),
    "i0": (RNG.normal(size=(5, 7)) * 10, [0.0, 8.0, -8.0, 8.000001, 700.0, -50.0, np.inf, -np.inf, np.nan], None),
    "i0e": (RNG.normal(size=(5, 7)) * 10, [0.0, 8.0, -8.0, 1e5, -1e30, np.inf, -np.inf, np.nan], None),
    "i1": (RNG.normal(size=(5, 7)) * 10, [0.0, -0.0, 8.0, -8.0, 7.99, 700.0, -50.0, np.inf, -np.inf, np.nan], None),
    "i1e": (RNG.normal(size=(5, 7)) * 10, [0.0, 8.0, -8.0, 1e5, -1e30, np.inf, -np.inf, np.nan], None),
}


def _fns(name):
    return getattr(munet.special, name), getattr(torch.special, name)


# torch's float64 ndtr (and log_ndtr, ndtri built on it) loses digits in the lower tail: at x = -5.2
# it is 4.7e-10 off mpmath.ncdf, which munet's erfc-based value matches to 1e-15
FLOAT64_RTOL = {"ndtr": 1e-8, "log_ndtr": 1e-8, "ndtri": 1e-8}
# lgamma near its roots 1 and 2 is a difference of two values near 10 (lgamma(x + 8) - log(x...(x+7)))
# and digamma near its root 1.46 one of values near 2: the absolute error is ~10 ulps of 10
ATOL = {"gammaln": (5e-14, 5e-6), "digamma": (1e-14, 2e-6)}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_float64(name):
    mf, tf = _fns(name)
    rand, edge, _ = UNARY[name]
    for a in (rand, np.array(edge)):
        _check(mf(_m(a)), tf(_t(a)), rtol=FLOAT64_RTOL.get(name, 1e-12), atol=ATOL.get(name, (1e-300,))[0])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_float32_noncontiguous_and_empty(name):
    mf, tf = _fns(name)
    rand, edge, _ = UNARY[name]
    a = rand.astype(np.float32)
    mv = _m(a).t()[1:, ::2]  # a non-contiguous view
    tv = _t(a).t()[1:, ::2]
    atol = ATOL.get(name, (0, 1e-6))[1]
    _check(mf(mv), tf(tv), rtol=1e-5, atol=atol)
    e = np.array(edge, dtype=np.float32)
    _check(mf(_m(e)), tf(_t(e)), rtol=1e-5, atol=atol)
    empty = mf(munet.zeros(0, 3))
    assert tuple(empty.shape) == (0, 3) and empty.dtype is munet.float32


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradient(name):
    mf, tf = _fns(name)
    a = UNARY[name][0]
    mx, tx = _m(a, True), _t(a, True)
    g = RNG.normal(size=a.shape)
    mf(mx).backward(_m(g))
    tf(tx).backward(_t(g))
    _check(mx.grad, tx.grad, rtol=1e-8, atol=1e-12)


def test_deep_tails_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    x = [-8.0, -20.0, -37.0]
    want = [float(mpmath.ncdf(v)) for v in x]
    np.testing.assert_allclose(munet.special.ndtr(munet.tensor(x, dtype=munet.float64)).numpy(), want, rtol=1e-13)
    want_log = [float(mpmath.log(mpmath.ncdf(v))) for v in [-8.0, -20.0, -100.0]]
    got = munet.special.log_ndtr(munet.tensor([-8.0, -20.0, -100.0], dtype=munet.float64)).numpy()
    np.testing.assert_allclose(got, want_log, rtol=1e-13)
    p = [1e-20, 1e-100, 1e-300]
    with mpmath.workdps(350):
        want_q = [float(-mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * mpmath.mpf(v))) for v in p]
    np.testing.assert_allclose(munet.special.ndtri(munet.tensor(p, dtype=munet.float64)).numpy(), want_q, rtol=1e-12)


def test_lgamma_digamma_i0_mvlgamma_torch_level_and_methods():
    a = RNG.uniform(0.5, 6, size=(3, 4))
    for name in ("lgamma", "digamma", "i0"):
        _check(getattr(munet, name)(_m(a)), getattr(torch, name)(_t(a)), rtol=1e-12, atol=1e-13)
        _check(getattr(_m(a), name)(), getattr(torch, name)(_t(a)), rtol=1e-12, atol=1e-13)
        x = _m(a.copy())
        getattr(x, name + "_")()
        _check(x, getattr(torch, name)(_t(a)), rtol=1e-12, atol=1e-13)
    for p in (1, 2, 4):
        want = torch.special.multigammaln(_t(a + 2), p)
        _check(munet.special.multigammaln(_m(a + 2), p), want, rtol=1e-12, atol=1e-13)
        _check(munet.mvlgamma(_m(a + 2), p), want, rtol=1e-12, atol=1e-13)
        _check(_m(a + 2).mvlgamma(p), want, rtol=1e-12, atol=1e-13)
    mx, tx = _m(a + 2, True), _t(a + 2, True)
    munet.special.multigammaln(mx, 3).sum().backward()
    torch.special.multigammaln(tx, 3).sum().backward()
    _check(mx.grad, tx.grad, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="multigammaln: all elements must be greater than"):
        munet.special.multigammaln(_m(a), 4)
    with pytest.raises(ValueError, match="multigammaln: p has to be"):
        munet.special.multigammaln(_m(a), 0)


def test_second_derivative_of_lgamma_is_trigamma():
    a = RNG.uniform(-3, 10, size=6)
    mx, tx = _m(a, True), _t(a, True)
    (mg,) = munet.autograd.grad(munet.lgamma(mx).sum(), mx, create_graph=True)
    (tg,) = torch.autograd.grad(torch.lgamma(tx).sum(), tx, create_graph=True)
    mg.sum().backward()
    tg.sum().backward()
    _check(mx.grad, tx.grad, rtol=1e-8, atol=1e-10)


def test_zeta_against_torch():
    x = np.array([2.0, 3.0, 1.0, 0.5, 4.5, 2.0, 2.0, 2.0, 2.0, 3.0, 2.0, np.inf, 2.0, 1.5, np.nan, 7.0])
    q = np.array([1.0, 0.5, 1.0, 1.0, 2.0, 0.0, -1.0, -2.5, 1e-3, -3.7, np.inf, 2.0, 30.0, 0.2, 1.0, -2.5])
    _check(munet.special.zeta(_m(x), _m(q)), torch.special.zeta(_t(x), _t(q)), rtol=1e-12, atol=0)
    a, b = RNG.uniform(1.1, 6, size=(3, 1)), RNG.uniform(0.1, 20, size=(4,))
    _check(munet.special.zeta(_m(a), _m(b)), torch.special.zeta(_t(a), _t(b)), rtol=1e-12, atol=0)
    _check(munet.special.zeta(_m(a), 2.0), torch.special.zeta(_t(a), 2.0), rtol=1e-12, atol=0)
    _check(munet.special.zeta(3.0, _m(b)), torch.special.zeta(3.0, _t(b)), rtol=1e-12, atol=0)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    _check(munet.special.zeta(_m(a32), _m(b32)), torch.special.zeta(_t(a32), _t(b32)), rtol=1e-5, atol=0)
    mq, tq = _m(b, True), _t(b, True)
    munet.special.zeta(2.5, mq).sum().backward()
    torch.special.zeta(2.5, tq).sum().backward()
    _check(mq.grad, tq.grad, rtol=1e-9, atol=0)
    with pytest.raises(ValueError, match="zeta: other must be greater than"):
        munet.special.zeta(2.0, _m(np.array([-1e5 - 0.5])))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma(n):
    v = np.concatenate([RNG.uniform(0.05, 30, size=20), [0.5, -2.5, -0.3, 3.0, 100.0, np.inf, np.nan, 1.0]])
    rtol = 1e-9 if n == 1 else 1e-12  # torch's trigamma (n = 1) is its own, less exact, series
    _check(munet.special.polygamma(n, _m(v)), torch.special.polygamma(n, _t(v)), rtol=rtol, atol=0)
    _check(munet.polygamma(n, _m(v)), torch.polygamma(n, _t(v)), rtol=rtol, atol=0)
    _check(_m(v).polygamma(n), _t(v).polygamma(n), rtol=rtol, atol=0)
    x = _m(v.copy())
    x.polygamma_(n)
    _check(x, torch.polygamma(n, _t(v)), rtol=rtol, atol=0)
    if n > 0:  # a pole: (-1)^(n+1) inf
        assert munet.special.polygamma(n, munet.zeros(1)).item() == torch.special.polygamma(n, torch.zeros(1)).item()
    u = RNG.uniform(0.2, 10, size=7)
    mx, tx = _m(u, True), _t(u, True)
    munet.special.polygamma(n, mx).sum().backward()
    torch.special.polygamma(n, tx).sum().backward()
    _check(mx.grad, tx.grad, rtol=1e-8, atol=0)
    v32 = RNG.uniform(0.1, 20, size=9).astype(np.float32)
    _check(munet.special.polygamma(n, _m(v32)), torch.special.polygamma(n, _t(v32)), rtol=2e-5, atol=2e-6)
    with pytest.raises(ValueError, match="polygamma: n must be a non-negative integer"):
        munet.special.polygamma(-1, _m(v))


def test_integer_input_computes_in_default_float():
    got = munet.special.ndtr(munet.tensor([0, 1, -2]))
    assert got.dtype is munet.float32
    _check(got, torch.special.ndtr(torch.tensor([0, 1, -2])), rtol=1e-6, atol=1e-7)


def test_sinc_torch_level_and_methods():
    a = RNG.normal(size=(3, 4))
    _check(munet.sinc(_m(a)), torch.sinc(_t(a)), rtol=1e-12, atol=0)
    _check(_m(a).sinc(), torch.sinc(_t(a)), rtol=1e-12, atol=0)
    x = _m(a.copy())
    x.sinc_()
    _check(x, torch.sinc(_t(a)), rtol=1e-12, atol=0)
    # the gradient at 0 is 0, not NaN
    z = _m(np.zeros(2), True)
    munet.sinc(z).sum().backward()
    assert z.grad.numpy().tolist() == [0.0, 0.0]


BINARY = {
    "xlog1py": (munet.special.xlog1py, torch.special.xlog1py),
    "xlogy": (munet.special.xlogy, torch.special.xlogy),
    "logaddexp": (munet.logaddexp, torch.logaddexp),
    "logaddexp2": (munet.logaddexp2, torch.logaddexp2),
    "ldexp": (munet.ldexp, torch.ldexp),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_forward_broadcast_and_gradient(name):
    mf, tf = BINARY[name]
    a = RNG.normal(size=(4, 1, 3)) * 3
    b = RNG.uniform(0.1, 4, size=(5, 3)) if name in ("xlog1py", "xlogy") else RNG.normal(size=(5, 3)) * 3
    if name == "ldexp":
        b = np.round(b)
    a[0, 0, 0] = 0.0
    ma, mb, ta, tb = _m(a, True), _m(b, True), _t(a, True), _t(b, True)
    mr, tr = mf(ma, mb), tf(ta, tb)
    _check(mr, tr, rtol=1e-12, atol=1e-300)
    g = RNG.normal(size=tr.shape)
    mr.backward(_m(g))
    tr.backward(_t(g))
    _check(ma.grad, ta.grad, rtol=1e-9, atol=1e-12)
    if name != "ldexp":  # torch's ldexp does not differentiate the exponent
        _check(mb.grad, tb.grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["xlog1py", "logaddexp", "logaddexp2"])
def test_binary_edge_values_and_scalars(name):
    mf, tf = BINARY[name]
    vals = np.array([0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e300])
    a, b = np.meshgrid(vals, vals)
    _check(mf(_m(a), _m(b)), tf(_t(a), _t(b)), rtol=1e-12, atol=1e-15)
    if name != "xlog1py":  # torch's logaddexp takes tensors only
        return
    x = RNG.uniform(0.5, 2, size=5).astype(np.float32)
    _check(mf(_m(x), 2.0), tf(_t(x), 2.0), rtol=1e-6, atol=1e-7)
    _check(mf(0.5, _m(x)), tf(0.5, _t(x)), rtol=1e-6, atol=1e-7)
    assert mf(_m(x), 2.0).dtype is munet.float32


def test_logaddexp_methods_and_ldexp_inplace():
    a, b = RNG.normal(size=4), RNG.normal(size=4)
    _check(_m(a).logaddexp(_m(b)), torch.logaddexp(_t(a), _t(b)), rtol=1e-12, atol=0)
    _check(_m(a).logaddexp2(_m(b)), torch.logaddexp2(_t(a), _t(b)), rtol=1e-12, atol=0)
    x = _m(a.copy())
    x.ldexp_(_m(np.array([1.0, 2.0, -1.0, 0.0])))
    _check(x, torch.ldexp(_t(a), torch.tensor([1.0, 2.0, -1.0, 0.0], dtype=torch.float64)), rtol=1e-12, atol=0)
    with pytest.raises(RuntimeError, match="ldexp_"):
        munet.tensor([1, 2]).ldexp_(munet.tensor([1, 1]))


def test_softmax_family_signatures():
    a = RNG.normal(size=(3, 4))
    _check(munet.special.softmax(_m(a), 1), torch.special.softmax(_t(a), 1), rtol=1e-12, atol=0)
    _check(munet.special.log_softmax(_m(a), 0), torch.special.log_softmax(_t(a), 0), rtol=1e-12, atol=0)
    got = munet.special.softmax(_m(a), -1, dtype=munet.float32)
    assert got.dtype is munet.float32
    _check(munet.special.logsumexp(_m(a), 1, keepdim=True), torch.special.logsumexp(_t(a), 1, keepdim=True),
           rtol=1e-12, atol=0)  # fmt: skip
    _check(munet.special.round(_m(a), decimals=2), torch.special.round(_t(a), decimals=2), rtol=1e-12, atol=0)
    _check(munet.special.logit(_m(a).sigmoid(), eps=0.1), torch.special.logit(_t(a).sigmoid(), eps=0.1),
           rtol=1e-12, atol=0)  # fmt: skip


def test_out_argument():
    a = RNG.normal(size=3)
    out = munet.empty(3, dtype=munet.float64)
    munet.special.ndtr(_m(a), out=out)
    _check(out, torch.special.ndtr(_t(a)), rtol=1e-12, atol=0)
    with pytest.raises(RuntimeError, match="out="):
        munet.special.entr(_m(a), out=munet.empty(4, dtype=munet.float64))


def test_binary_needs_a_tensor():
    with pytest.raises(TypeError, match="xlog1py: expected at least one tensor"):
        munet.special.xlog1py(1.0, 2.0)


def test_compiled_matches_eager():
    # the composites trace to graphs that compile in well under a second (Horner chains, no Clenshaw DAG)
    def f(x):
        return (
            munet.special.i1(x) + munet.special.i0e(x) + munet.special.ndtri(x.sigmoid()) + munet.lgamma(x.abs() + 0.1)
            + munet.special.log_ndtr(x) + munet.logaddexp(x, 2 * x) + munet.sinc(x) + munet.digamma(x.abs() + 0.1)
        )  # fmt: skip

    x = munet.tensor(RNG.normal(size=64).astype(np.float32) * 4)
    want = f(x).numpy()
    got = munet.compile(f)(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["sinc_", "lgamma_", "digamma_", "i0_", "mvlgamma_", "polygamma_", "ldexp_"])
def test_inplace_forms_keep_the_gradient(name):
    """An in-place special function on a non-leaf: its gradient uses the values before the write."""
    args = {"mvlgamma_": (2,), "polygamma_": (1,), "ldexp_": None}.get(name, ())
    a = RNG.uniform(1.5, 4, size=5)
    results = []
    for tensor in (_m, _t):
        x = tensor(a, True)
        y = x * 1
        extra = (tensor(np.array([1.0, 2.0, 0.0, -1.0, 3.0])),) if args is None else args
        getattr(y, name)(*extra)
        y.sum().backward()
        results.append((y, x.grad))
    _check(results[0][0], results[1][0], rtol=1e-9, atol=1e-12)
    _check(results[0][1], results[1][1], rtol=1e-8, atol=1e-12)

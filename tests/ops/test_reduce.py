"""Reductions and scans vs PyTorch: forward, gradients, double backward, dtypes, edge shapes."""

import math

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close, check, gradcheck, noncontiguous, randn, to_torch

DIMS = [None, 0, -1, (0, 2), (-1, 0, 1)]


def _call(mod, name, *args, **kwargs):
    return lambda x: getattr(mod, name)(x, *args, **kwargs)


def both(name, *args, **kwargs):
    return _call(munet, name, *args, **kwargs), _call(torch, name, *args, **kwargs)


# dim / keepdim sweeps ------------------------------------------------------------------------------------

DIM_OPS = ["sum", "nansum", "mean", "nanmean", "amax", "amin", "logsumexp", "var", "std", "norm"]


def _dim_kwargs(name, dim, keepdim):
    if name == "norm":
        return dict(p=2, dim=dim, keepdim=keepdim)
    if dim is None and name in ("amax", "amin"):
        return dict(keepdim=keepdim)
    if dim is None and name == "logsumexp":
        return dict(dim=(0, 1, 2), keepdim=keepdim)
    return dict(dim=dim, keepdim=keepdim)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("name", DIM_OPS)
def test_dims_keepdim(name, dim, keepdim):
    x = randn(2, 3, 4, dtype="float64")
    check(*both(name, **_dim_kwargs(name, dim, keepdim)), x)


@pytest.mark.parametrize("name", DIM_OPS + ["prod"])
def test_noncontiguous(name):
    x = noncontiguous(randn(3, 4, 2, seed=2))
    dim = 1 if name == "prod" else (0, 2)
    check(*both(name, **_dim_kwargs(name, dim, False)), x)
    check(*both(name, **_dim_kwargs(name, 1 if name == "prod" else (0, 1), False)), randn(4, 3, seed=4).T)


@pytest.mark.parametrize("name", ["sum", "nansum", "mean", "nanmean", "amax", "amin", "prod", "var", "std", "norm"])
def test_full_reduction(name):
    check(*both(name), randn(3, 4, seed=5, dtype="float64"))


@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod", "logsumexp", "nansum", "norm"])
def test_rank0(name, dim):
    x = np.array(1.5, dtype=np.float64)
    if dim is None and name in ("logsumexp",):
        dim = 0
    kwargs = {} if dim is None else dict(dim=dim)
    check(*both(name, **kwargs), x)


def test_rank0_dim_ops():
    x = np.array(-0.7)
    check(lambda t: t.max(0), lambda t: t.max(0), x)
    check(lambda t: t.min(-1, keepdim=True), lambda t: t.min(-1, keepdim=True), x)
    check(lambda t: t.argmax(0), lambda t: t.argmax(0), x, grad=False)
    check(lambda t: t.cumsum(0), lambda t: t.cumsum(0), x)
    check(lambda t: t.cumprod(0), lambda t: t.cumprod(0), x)
    check(lambda t: t.cummax(0), lambda t: t.cummax(0), x)
    check(lambda t: t.median(0), lambda t: t.median(0), x)
    check(lambda t: t.var(correction=0), lambda t: t.var(correction=0), x)
    with pytest.raises(IndexError, match="sum: dimension out of range"):
        munet.tensor(1.0).sum(1)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "prod", "var", "std", "logsumexp", "norm", "nansum"])
def test_size1_dims(name):
    x = randn(1, 3, 1, seed=6, dtype="float64")
    check(*both(name, **_dim_kwargs(name, 0 if name == "prod" else (0, 2), False)), x)
    check(*both(name, **_dim_kwargs(name, 2, True)), x)


# size 0 -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, None])
@pytest.mark.parametrize("name", ["sum", "nansum", "mean", "nanmean", "prod", "var", "std", "norm"])
def test_empty(name, dim):
    x = np.zeros((0, 3))
    kwargs = {} if dim is None else dict(dim=dim)
    check(*both(name, **kwargs), x)


def test_empty_special():
    x = np.zeros((0, 3))
    check(*both("logsumexp", 0), x)
    check(*both("logsumexp", 1), x)
    check(*both("amax", 1), x)
    check(lambda t: t.max(1), lambda t: t.max(1), x)
    check(*both("all"), x, grad=False)
    check(*both("any", 0), x, grad=False)
    check(*both("count_nonzero", 0), x, grad=False)
    check(lambda t: t.cumsum(0), lambda t: t.cumsum(0), x)
    check(lambda t: t.cumprod(0), lambda t: t.cumprod(0), x)
    check(lambda t: t.cummax(0), lambda t: t.cummax(0), x)
    check(*both("median"), x, grad=False)
    e = munet.zeros(0, 3)
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim to be specified"):
        e.max()
    with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim 0 to have non-zero size"):
        e.amax(0)
    with pytest.raises(IndexError, match=r"min\(\): Expected reduction dim 0 to have non-zero size"):
        e.min(0)
    with pytest.raises(RuntimeError, match=r"argmax\(\): Expected reduction dim to be specified"):
        e.argmax()
    with pytest.raises(IndexError, match=r"median\(\): Expected reduction dim 0"):
        e.median(0)
    with pytest.raises(RuntimeError, match=r"norm\(\): cannot compute the inf norm"):
        munet.norm(e, p=math.inf)


# dtypes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "prod", "var", "std", "logsumexp", "norm", "nansum"])
def test_low_precision(name, dtype):
    x = randn(4, 8, dtype=dtype, seed=7)
    check(*both(name, **_dim_kwargs(name, 1, False)), x, rtol=2e-2, atol=2e-2)


def test_low_precision_accumulates_in_float32():
    x = np.full(4096, 0.1, dtype=np.float16)
    assert_close(munet.from_numpy(x).sum(), torch.from_numpy(x).sum(), rtol=1e-3, atol=0)
    assert_close(munet.from_numpy(x).cumsum(0), torch.from_numpy(x).cumsum(0), rtol=1e-3, atol=0)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool", "int8"])
def test_integer_reductions(dtype):
    x = np.random.default_rng(0).integers(0, 4, size=(3, 4)).astype(dtype)
    for fn in (
        lambda m, t: m.sum(t),
        lambda m, t: m.sum(t, 1, keepdim=True),
        lambda m, t: m.nansum(t, 0),
        lambda m, t: m.prod(t, 1),
        lambda m, t: m.prod(t),
        lambda m, t: m.cumsum(t, 1),
        lambda m, t: m.cumprod(t, 0),
        lambda m, t: m.amax(t, 1),
        lambda m, t: m.amin(t),
        lambda m, t: m.max(t),
        lambda m, t: m.max(t, 0),
        lambda m, t: m.min(t, 1, keepdim=True),
        lambda m, t: m.cummax(t, 1),
        lambda m, t: m.all(t, 1),
        lambda m, t: m.any(t),
        lambda m, t: m.count_nonzero(t, 0),
        lambda m, t: m.sum(t, dtype=m.float32),
        lambda m, t: m.mean(t, 1, dtype=m.float64),
    ):
        check(lambda a: fn(munet, a), lambda a: fn(torch, a), x, grad=False)
    if dtype != "bool":
        check(lambda a: a.argmax(1), lambda a: a.argmax(1), x, grad=False)
        check(lambda a: a.argmin(), lambda a: a.argmin(), x, grad=False)
        check(lambda a: a.median(1), lambda a: a.median(1), np.arange(12).reshape(3, 4).astype(dtype), grad=False)


def test_integer_errors():
    i = munet.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match=r"mean\(\): could not infer output dtype"):
        i.mean()
    with pytest.raises(RuntimeError, match=r"nanmean\(\): could not infer output dtype"):
        i.nanmean()
    with pytest.raises(RuntimeError, match=r"var\(\): std and var only support floating point"):
        i.var()
    with pytest.raises(RuntimeError, match=r"std\(\): std and var only support floating point"):
        i.std()
    with pytest.raises(RuntimeError, match=r"argmax\(\): does not support bool input"):
        munet.tensor([True]).argmax()
    with pytest.raises(RuntimeError, match=r"norm\(\): input dtype should be either floating point"):
        munet.norm(i)


def test_dtype_argument():
    x = randn(3, 4, dtype="float32")
    check(lambda t: t.sum(1, dtype=munet.float64), lambda t: t.sum(1, dtype=torch.float64), x)
    check(lambda t: t.mean(dtype=munet.float64), lambda t: t.mean(dtype=torch.float64), x)
    check(lambda t: t.prod(0, dtype=munet.float64), lambda t: t.prod(0, dtype=torch.float64), x)
    check(lambda t: t.cumsum(1, dtype=munet.float64), lambda t: t.cumsum(1, dtype=torch.float64), x)
    check(lambda t: munet.norm(t, dim=1, dtype=munet.float64), lambda t: torch.norm(t, dim=1, dtype=torch.float64), x)
    check(lambda t: t.logsumexp(1), lambda t: t.logsumexp(1), np.arange(6).reshape(2, 3), grad=False)


# nan handling ----------------------------------------------------------------------------------------------


def test_nan_reductions():
    x = randn(3, 4, dtype="float64")
    x[0, 1] = x[2, 3] = x[2, 0] = np.nan
    check(*both("nansum", 1), x)
    check(*both("nanmean", 0), x)
    check(*both("nansum"), x)
    check(*both("nanmedian"), x, grad=False)
    check(lambda t: t.nanmedian(1), lambda t: t.nanmedian(1), x)
    check(lambda t: t.median(1), lambda t: t.median(1), x, grad=False)
    check(*both("median"), x, grad=False)
    check(*both("amax", 1), x, grad=False)
    # PyTorch's amax gives NaN gradients to a whole row holding a NaN; MuNet's amax routes the
    # gradient to the NaNs, as PyTorch's max() does.
    check(lambda t: t[2].amax(), lambda t: t[2].max(), x)
    check(lambda t: t.max(1), lambda t: t.max(1), x)
    check(lambda t: t.min(1), lambda t: t.min(1), x)
    check(lambda t: t.argmax(1), lambda t: t.argmax(1), x, grad=False)
    check(lambda t: t.cummax(1), lambda t: t.cummax(1), x)
    check(lambda t: t.cummin(1), lambda t: t.cummin(1), x)
    allnan = np.full((2, 3), np.nan)
    check(lambda t: t.nanmedian(1).values, lambda t: t.nanmedian(1).values, allnan, grad=False)


# max / min / argmax --------------------------------------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_dim(name, dim, keepdim):
    x = randn(3, 4, 5, seed=11)
    out = check(lambda t: getattr(t, name)(dim, keepdim), lambda t: getattr(t, name)(dim, keepdim), x)
    assert out.values is out[0] and out.indices is out[1]
    assert type(out).__name__ == name
    check(
        lambda t: getattr(munet, name)(t, dim=dim, keepdim=keepdim),
        lambda t: getattr(torch, name)(t, dim=dim, keepdim=keepdim),
        noncontiguous(x),
    )


def test_max_min_ties_first_index_and_gradients():
    x = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [0.0, -1.0, -1.0, 0.0]])
    check(lambda t: t.max(1), lambda t: t.max(1), x)
    check(lambda t: t.min(1), lambda t: t.min(1), x)
    check(lambda t: t.max(), lambda t: t.max(), x)  # full: evenly split among ties
    check(lambda t: t.min(), lambda t: t.min(), x)
    check(lambda t: t.amax(1), lambda t: t.amax(1), x)
    check(lambda t: t.amin((0, 1)), lambda t: t.amin((0, 1)), x)
    check(lambda t: t.argmax(1), lambda t: t.argmax(1), x, grad=False)
    check(lambda t: t.argmin(), lambda t: t.argmin(), x, grad=False)
    check(lambda t: t.aminmax(dim=1), lambda t: t.aminmax(dim=1), x)
    check(lambda t: t.aminmax(), lambda t: t.aminmax(), x)


def test_max_binary_form():
    a, b = randn(3, 4, seed=1), randn(3, 4, seed=2)
    check(lambda x, y: munet.max(x, y), lambda x, y: torch.max(x, y), a, b)
    check(lambda x, y: x.min(y), lambda x, y: x.min(y), a, b)
    check(lambda x, y: munet.max(x, other=y), lambda x, y: torch.max(x, other=y), a, b)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, -1])
def test_argmax_argmin(dim, keepdim):
    x = randn(3, 4, seed=12)
    for name in ("argmax", "argmin"):
        check(*both(name, dim=dim, keepdim=keepdim), x, grad=False)
        check(*both(name, dim=dim, keepdim=keepdim), noncontiguous(x), grad=False)


# prod -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_prod(dim):
    x = randn(3, 4, seed=13, dtype="float64")
    kwargs = {} if dim is None else dict(dim=dim)
    check(*both("prod", **kwargs), x)
    check(*both("prod", **kwargs), noncontiguous(x))
    if dim is not None:
        check(*both("prod", dim, keepdim=True), x)


def test_prod_gradient_with_zeros():
    x = randn(4, 5, seed=14, dtype="float64")
    x[0, 2] = 0.0  # one zero in row 0
    x[1, 1] = x[1, 3] = 0.0  # two zeros in row 1
    x[2, :] = 0.0  # all zeros in row 2
    check(*both("prod", 1), x)
    check(*both("prod", 0), x)
    check(*both("prod"), x)
    y = randn(6, seed=15, dtype="float64")
    y[3] = 0.0
    check(*both("prod"), y)


# logsumexp ------------------------------------------------------------------------------------------


def test_logsumexp_stable():
    x = np.array([[1000.0, 1000.0, -1000.0], [-np.inf, 0.0, 1.0], [-1e4, -1e4, -1e4]])
    check(*both("logsumexp", 1), x)
    check(*both("logsumexp", 0, keepdim=True), x[1:])
    inf = np.array([[np.inf, 1.0], [-np.inf, -np.inf]])
    check(*both("logsumexp", 1), inf, grad=False)


# var / std ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std_corrections(name):
    x = randn(3, 5, seed=16, dtype="float64")
    for m_fn in [
        lambda t, f: f(t, 1, unbiased=False),
        lambda t, f: f(t, 1, True, True),
        lambda t, f: f(t, False),
        lambda t, f: f(t, dim=(0, 1), correction=0),
        lambda t, f: f(t, dim=0, correction=2, keepdim=True),
        lambda t, f: f(t, correction=1.5),
    ]:
        check(lambda t: m_fn(t, getattr(munet, name)), lambda t: m_fn(t, getattr(torch, name)), x)
    check(lambda t: getattr(t, name)(1, keepdim=True), lambda t: getattr(t, name)(1, keepdim=True), x)


def test_var_std_degenerate():
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        munet.ones(1, 3).var(0)
    with pytest.warns(UserWarning):
        check(*both("var", 0), np.ones((1, 3)))  # one sample, correction 1: nan
    check(*both("std", 1), np.full((2, 3), 2.0))  # zero std: gradient 0 like PyTorch
    check(*both("std"), np.zeros(4))
    with pytest.raises(RuntimeError, match=r"var\(\): can't specify both unbiased and correction"):
        munet.var(munet.ones(3), unbiased=True, correction=1)


def test_var_mean_std_mean():
    x = randn(3, 4, seed=17, dtype="float64")
    check(lambda t: munet.var_mean(t, 1), lambda t: torch.var_mean(t, 1), x)
    check(
        lambda t: munet.std_mean(t, dim=(0, 1), correction=0), lambda t: torch.std_mean(t, dim=(0, 1), correction=0), x
    )
    check(lambda t: munet.std_mean(t, 0, keepdim=True), lambda t: torch.std_mean(t, 0, keepdim=True), x)


# norm -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", ["fro", 2, 1, math.inf, -math.inf, 3, 0.5, 0])
@pytest.mark.parametrize("dim", [None, 1, (0, 1)])
def test_norm(p, dim):
    x = randn(3, 4, seed=18, dtype="float64")
    if p == "fro" and dim == 1:
        dim = (1,)
    check(lambda t: munet.norm(t, p=p, dim=dim), lambda t: torch.norm(t, p=p, dim=dim), x)
    check(lambda t: t.norm(p, dim, True), lambda t: t.norm(p, dim, True), noncontiguous(x))


def test_norm_zero_vector_gradient():
    check(lambda t: t.norm(), lambda t: t.norm(), np.zeros((2, 3)))
    check(lambda t: t.norm(dim=1), lambda t: t.norm(dim=1), np.array([[0.0, 0.0], [3.0, 4.0]]))
    check(lambda t: t.norm(p=1, dim=1), lambda t: t.norm(p=1, dim=1), np.array([[0.0, 0.0], [3.0, -4.0]]))
    with pytest.raises(RuntimeError, match=r"norm\(\): p='nuc'"):
        munet.norm(munet.ones(2, 2), p="nuc")


# scans -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin"])
def test_scans(name, dim):
    x = randn(3, 4, 2, seed=19, dtype="float64")
    check(*both(name, dim), x)
    check(*both(name, dim=dim), noncontiguous(x))


def test_cumprod_gradient_with_zeros():
    x = randn(5, 6, seed=20, dtype="float64")
    x[0, 2] = 0.0  # one zero
    x[1, 1] = x[1, 4] = 0.0  # two zeros
    x[2, 0] = 0.0  # zero first
    x[3, 5] = 0.0  # zero last
    check(*both("cumprod", 1), x)
    check(*both("cumprod", 0), x)
    gradcheck(lambda t: t.cumprod(1), x[:3])


def test_cummax_ties():
    x = np.array([[1.0, 1.0, 2.0, 2.0, 0.0, 3.0], [3.0, 2.0, 3.0, 1.0, 3.0, 0.0]])
    check(*both("cummax", 1), x)
    check(*both("cummin", 1), x)


# median ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [5, 6])
def test_median(n):
    x = np.random.default_rng(n).permutation(n * 3).reshape(3, n).astype(np.float64)
    check(*both("median"), x)
    check(lambda t: t.median(1), lambda t: t.median(1), x)
    check(lambda t: t.median(0, keepdim=True), lambda t: t.median(0, keepdim=True), noncontiguous(x))
    check(lambda t: t.nanmedian(-1), lambda t: t.nanmedian(-1), x)
    check(*both("median"), np.array([2.0, 1.0, 2.0, 3.0]))  # tie: gradient split like PyTorch


# boolean reductions -------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)])
def test_all_any_count_nonzero(dim):
    x = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0], [np.nan, 1.0, 0.0]])
    kwargs = {} if dim is None else dict(dim=dim)
    for name in ("all", "any", "count_nonzero"):
        check(*both(name, **kwargs), x, grad=False)
        check(*both(name, **kwargs), x > 0, grad=False)
        check(*both(name, **kwargs), noncontiguous(np.nan_to_num(x).astype(np.uint8)), grad=False)
    if dim is not None:
        check(*both("all", dim, keepdim=True), x, grad=False)


# double backward -----------------------------------------------------------------------------------


def _second_order(mod, fn, x, v):
    """d/dx sum(v * d/dx sum(w * fn(x))): exercises the gradient of the gradient rule."""
    out = fn(x)
    w = mod.ones_like(out) * 0.7 + mod.arange(out.numel(), dtype=out.dtype).reshape(out.shape) * 0.1
    (g,) = mod.autograd.grad((out * w).sum(), x, create_graph=True)
    return (g * v).sum()


DOUBLE = {
    "sum": lambda m, t: (t * t).sum(1),
    "mean": lambda m, t: (t * t).mean((0, 1)),
    "var": lambda m, t: t.var(1),
    "std": lambda m, t: t.std(0),
    "prod": lambda m, t: t.prod(1),
    "logsumexp": lambda m, t: t.logsumexp(1),
    "amax": lambda m, t: (t * t).amax(1),
    "norm": lambda m, t: t.norm(dim=1),
    "norm3": lambda m, t: t.norm(p=3, dim=1),
    "cumsum": lambda m, t: (t * t).cumsum(1),
    "cummax": lambda m, t: (t * t).cummax(1).values,
    "cummin": lambda m, t: (t * t).cummin(0).values,
}


@pytest.mark.parametrize("name", sorted(DOUBLE))
def test_double_backward(name):
    x = randn(3, 4, seed=21, dtype="float64")
    v = randn(3, 4, seed=22, dtype="float64")
    fn = DOUBLE[name]
    mx = munet.tensor(x, requires_grad=True)
    tx = to_torch(x).requires_grad_(True)
    m_out = _second_order(munet, lambda t: fn(munet, t), mx, munet.tensor(v))
    t_out = _second_order(torch, lambda t: fn(torch, t), tx, to_torch(v))
    assert_close(m_out, t_out)
    m_out.backward()
    t_out.backward()
    assert_close(mx.grad, tx.grad, rtol=1e-6, atol=1e-8, what="second-order grad")


@pytest.mark.parametrize("zeros", [(), (1,), (0, 2), (0, 1, 3)])
def test_prod_double_backward_with_zeros(zeros):
    x = randn(2, 4, seed=24, dtype="float64")
    x[0, list(zeros)] = 0.0
    v = randn(2, 4, seed=25, dtype="float64")
    mx = munet.tensor(x, requires_grad=True)
    tx = to_torch(x).requires_grad_(True)
    m_out = _second_order(munet, lambda t: t.prod(1), mx, munet.tensor(v))
    t_out = _second_order(torch, lambda t: t.prod(1), tx, to_torch(v))
    m_out.backward()
    t_out.backward()
    assert_close(mx.grad, tx.grad, what="second-order grad")


def test_cumprod_double_backward_raises():
    x = munet.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (g,) = munet.autograd.grad(x.cumprod(0).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="cumprod: double backward"):
        g.sum().backward()


# errors ----------------------------------------------------------------------------------------------


def test_dim_errors():
    x = munet.ones(2, 3)
    with pytest.raises(
        IndexError, match=r"amax: dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"
    ):
        x.amax(2)
    with pytest.raises(RuntimeError, match="sum: dim \\[1, -1\\] appears multiple times"):
        x.sum((1, -1))
    with pytest.raises(IndexError, match="cumsum: dimension out of range"):
        x.cumsum(-3)
    with pytest.raises(TypeError, match="argmax: dim must be an int"):
        x.argmax((0, 1))


def test_mode():
    x = np.array([[3.0, 1.0, 3.0, 1.0, 2.0], [5.0, 5.0, 4.0, 4.0, 4.0], [0.5, 0.25, 2.0, 7.0, 1.0]])
    check(lambda t: t.mode(1), lambda t: t.mode(1), x)
    check(lambda t: munet.mode(t, 0, keepdim=True), lambda t: torch.mode(t, 0, keepdim=True), x)
    check(lambda t: t.mode(), lambda t: t.mode(), noncontiguous(x))
    check(lambda t: t.mode(0), lambda t: t.mode(0), np.array(2.5))
    check(lambda t: t.mode(-1), lambda t: t.mode(-1), np.array([[2, 2, 1, 1, 3], [0, 0, 0, 9, 9]]), grad=False)
    with pytest.raises(IndexError, match=r"mode\(\): Expected reduction dim 1 to have non-zero size"):
        munet.zeros(2, 0).mode(1)


def test_inplace_scans():
    x = randn(3, 4, seed=23, dtype="float64")

    def run(mod, t):
        y = t * 1.0
        y.cumsum_(1)
        y.cumprod_(0)
        return y

    check(lambda t: run(munet, t), lambda t: run(torch, t), x)

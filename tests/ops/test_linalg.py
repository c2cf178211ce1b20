"""Linear algebra vs PyTorch: matmul (all ranks, broadcast batches), mm/bmm/mv/dot, the
add-and-multiply family, tensordot/kron, einsum, linear/bilinear; forward, gradient and
second derivatives, dtypes and error messages."""

import warnings

import numpy as np
import pytest
import torch

import munet
import munet.nn.functional as F
from tests.reference import assert_close, check, noncontiguous, randn, to_torch


def double_backward(munet_fn, torch_fn, *arrays, rtol=1e-7, atol=1e-9):
    """Second derivatives: grads taken with create_graph, then d(sum(grads * w))/d(inputs)."""
    m_in = [munet.tensor(a, requires_grad=True) for a in arrays]
    t_in = [to_torch(a).requires_grad_(True) for a in arrays]
    m_out, t_out = munet_fn(*m_in), torch_fn(*t_in)
    up = randn(*t_out.shape, dtype="float64", seed=7)
    m_g = munet.autograd.grad(m_out, m_in, munet.tensor(up), create_graph=True)
    t_g = torch.autograd.grad(t_out, t_in, to_torch(up), create_graph=True)
    m_total = sum((g * munet.tensor(randn(*g.shape, dtype="float64", seed=11 + i))).sum() for i, g in enumerate(m_g))
    t_total = sum((g * to_torch(randn(*g.shape, dtype="float64", seed=11 + i))).sum() for i, g in enumerate(t_g))
    m_gg = munet.autograd.grad(m_total, m_in, allow_unused=True)
    t_gg = torch.autograd.grad(t_total, t_in, allow_unused=True)
    for i, (m, t) in enumerate(zip(m_gg, t_gg)):
        if t is None:
            assert m is None or not np.any(m.numpy()), f"second grad {i}: torch has none"
        else:
            assert_close(m, t, rtol, atol, what=f"second grad of input {i}")


# matmul -------------------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((4,), (4,)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((2, 3, 4), (4,)),
    ((4,), (2, 4, 5)),
    ((3, 4), (4, 5)),
    ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((1, 3, 4), (2, 4, 5)),
    ((2, 3, 4), (1, 4, 5)),
    ((0, 4), (4, 5)),
    ((3, 0), (0, 5)),
    ((2, 0, 3, 4), (4, 1)),
    ((2, 3, 0), (0, 4)),
    ((1, 1), (1, 1)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_ranks_and_broadcast(sa, sb):
    check(munet.matmul, torch.matmul, randn(*sa, seed=1), randn(*sb, seed=2))


@pytest.mark.parametrize("sa,sb", [((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4,))])
def test_matmul_float64_operator_and_noncontiguous(sa, sb):
    a, b = randn(*sa, dtype="float64", seed=1), randn(*sb, dtype="float64", seed=2)
    check(lambda x, y: x @ y, lambda x, y: x @ y, noncontiguous(a), noncontiguous(b))
    check(
        lambda x, y: x.matmul(y.mT if y.ndim > 1 else y),
        lambda x, y: x.matmul(y.mT if y.ndim > 1 else y),
        a,
        np.ascontiguousarray(np.swapaxes(b, -1, -2)) if b.ndim > 1 else b,
    )


PRODUCTS_SPLIT_OVER_THREADS = [  # (a's shape, b's shape, whether it runs as tasks)
    ((8, 3, 32, 48), (8, 3, 48, 40), True),  # by the batch, several products per task
    ((8, 1, 64, 48), (3, 48, 40), True),  # broadcast batch dims
    ((3, 64, 64), (1, 64, 64), True),
    ((1, 4, 128, 64), (1, 4, 64, 64), True),  # a leading batch dim of one: by rows of each product
    ((256, 96), (96, 80), True),  # one product by its rows
    ((48, 96), (96, 300), True),  # by its columns
    ((100, 40), (40, 100), False),  # too small to pay for threads
    ((0, 4, 64, 64), (0, 4, 64, 64), False),
    ((4, 2, 64, 0), (4, 2, 0, 64), False),
    ((1, 1), (1, 1), False),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sa,sb,split", PRODUCTS_SPLIT_OVER_THREADS)
def test_matmul_split_over_two_threads(sa, sb, split, dtype, monkeypatch):
    """At a budget of two threads a big enough float product runs as tasks on the OpenMP team (each
    product of a batch, or blocks of rows or columns of one, single-threaded BLAS each): equal to
    PyTorch, forward and gradients, on contiguous, strided and transposed operands."""
    from munet.backends.cpu import gemm_tasks

    splits, run = [], gemm_tasks.run
    monkeypatch.setattr(gemm_tasks, "run", lambda *args: splits.append(run(*args)) or splits[-1])
    a, b = randn(*sa, dtype=dtype, seed=1), randn(*sb, dtype=dtype, seed=2)
    before = munet.get_num_threads()
    try:
        munet.set_num_threads(2)
        check(munet.matmul, torch.matmul, a, b, float64_reference=True)
        check(munet.matmul, torch.matmul, noncontiguous(a), noncontiguous(b), float64_reference=True)
        a_t, b_t = (np.ascontiguousarray(np.swapaxes(x, -1, -2)) for x in (a, b))
        check(lambda x, y: x.mT @ y.mT, lambda x, y: x.mT @ y.mT, a_t, b_t, float64_reference=True)
        if split:  # overflow on a pool thread warns no more than on the caller's (PyTorch never warns)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                big = munet.matmul(munet.full(sa, 3e38, dtype=munet.float32), munet.full(sb, 3e38, dtype=munet.float32))
            assert np.isinf(big.numpy()).all()
    finally:
        munet.set_num_threads(before)
    assert (True in splits) == (split and gemm_tasks.available(np.dtype(dtype)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_matmul_low_precision(dtype):
    a, b = randn(2, 3, 8, dtype=dtype, seed=1), randn(8, 5, dtype=dtype, seed=2)
    check(munet.matmul, torch.matmul, a, b, rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_matmul_integer(dtype):
    a = np.arange(24).reshape(2, 3, 4).astype(dtype) - 7
    b = np.arange(20).reshape(4, 5).astype(dtype) % 7
    check(munet.matmul, torch.matmul, a, b, grad=False)
    check(munet.mm, torch.mm, a[0], b, grad=False)


@pytest.mark.parametrize("sa,sb", [((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 5)), ((4,), (4,))])
def test_matmul_double_backward(sa, sb):
    a, b = randn(*sa, dtype="float64", seed=1), randn(*sb, dtype="float64", seed=2)
    double_backward(munet.matmul, torch.matmul, a, b)


def test_mm_bmm_einsum_double_backward():
    a, b = randn(3, 4, dtype="float64", seed=1), randn(4, 2, dtype="float64", seed=2)
    double_backward(munet.mm, torch.mm, a, b)
    a, b = randn(2, 3, 4, dtype="float64", seed=1), randn(2, 4, 5, dtype="float64", seed=2)
    double_backward(munet.bmm, torch.bmm, a, b)
    eq = "bij,bjk->bik"
    double_backward(lambda x, y: munet.einsum(eq, x, y), lambda x, y: torch.einsum(eq, x, y), a, b)
    eq = "ii,ij->j"
    a, b = randn(3, 3, dtype="float64", seed=1), randn(3, 4, dtype="float64", seed=2)
    double_backward(lambda x, y: munet.einsum(eq, x, y), lambda x, y: torch.einsum(eq, x, y), a, b)


def test_matmul_errors():
    with pytest.raises(RuntimeError, match=r"matmul: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        munet.matmul(munet.ones(2, 3), munet.ones(4, 5))
    with pytest.raises(RuntimeError, match=r"at least 1D, but they are 0D and 1D"):
        munet.matmul(munet.tensor(1.0), munet.ones(3))
    with pytest.raises(RuntimeError, match=r"matmul: size mismatch, got shapes \[3\] and \[4, 5\]"):
        munet.matmul(munet.ones(3), munet.ones(4, 5))
    with pytest.raises(RuntimeError, match=r"same dtype, but got float32 and float64"):
        munet.matmul(munet.ones(2, 3), munet.ones(3, 2, dtype=munet.float64))
    with pytest.raises(RuntimeError, match=r"matmul: the size of tensors must match"):
        munet.matmul(munet.ones(2, 3, 4), munet.ones(3, 4, 5))


# fixed-rank products ------------------------------------------------------------------------------


def test_mm_bmm_mv_dot():
    check(munet.mm, torch.mm, randn(3, 4, seed=1), noncontiguous(randn(4, 2, seed=2)))
    check(lambda x, y: x.mm(y), lambda x, y: x.mm(y), randn(1, 0, seed=1), randn(0, 3, seed=2))
    check(munet.bmm, torch.bmm, randn(2, 3, 4, seed=1), randn(2, 4, 5, seed=2))
    check(lambda x, y: x.bmm(y), lambda x, y: x.bmm(y), noncontiguous(randn(0, 3, 4, seed=1)), randn(0, 4, 5, seed=2))
    check(munet.mv, torch.mv, randn(3, 4, seed=1), randn(4, seed=2))
    check(
        lambda x, y: x.mv(y), lambda x, y: x.mv(y), noncontiguous(randn(3, 4, seed=1)), noncontiguous(randn(4, seed=2))
    )
    check(munet.dot, torch.dot, randn(5, dtype="float64", seed=1), randn(5, dtype="float64", seed=2))
    check(lambda x, y: x.vdot(y), lambda x, y: x.vdot(y), randn(5, seed=1), noncontiguous(randn(5, seed=2)))
    check(munet.dot, torch.dot, randn(0, seed=1), randn(0, seed=2))
    check(munet.dot, torch.dot, np.arange(4), np.arange(4) + 2, grad=False)


def test_fixed_rank_errors():
    with pytest.raises(RuntimeError, match=r"mm: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        munet.mm(munet.ones(2, 3), munet.ones(4, 5))
    with pytest.raises(RuntimeError, match=r"mm: expected 2-D tensors, got shapes \[2, 3, 4\] and \[4, 5\]"):
        munet.mm(munet.ones(2, 3, 4), munet.ones(4, 5))
    with pytest.raises(RuntimeError, match=r"bmm: batch1 and batch2 must have the same batch size"):
        munet.bmm(munet.ones(2, 3, 4), munet.ones(3, 4, 5))
    with pytest.raises(RuntimeError, match=r"bmm: batch1 and batch2 shapes cannot be multiplied \(2x3x4 and 2x5x6\)"):
        munet.bmm(munet.ones(2, 3, 4), munet.ones(2, 5, 6))
    with pytest.raises(RuntimeError, match=r"bmm: expected 3-D tensors"):
        munet.bmm(munet.ones(3, 4), munet.ones(4, 5))
    with pytest.raises(RuntimeError, match=r"mv: size mismatch, got mat \(2x3\) and vec \(4\)"):
        munet.mv(munet.ones(2, 3), munet.ones(4))
    with pytest.raises(RuntimeError, match=r"dot: 1D tensors expected, but got 2D and 1D tensors"):
        munet.dot(munet.ones(2, 3), munet.ones(3))
    with pytest.raises(RuntimeError, match=r"dot: inconsistent tensor size, expected tensor \[3\] and src \[4\]"):
        munet.dot(munet.ones(3), munet.ones(4))
    with pytest.raises(RuntimeError, match=r"dot: expected both vectors to have same dtype"):
        munet.dot(munet.ones(3), munet.ones(3, dtype=munet.float64))
    with pytest.raises(RuntimeError, match=r"not implemented for 'bool'"):
        munet.mm(munet.ones(2, 2, dtype=munet.bool), munet.ones(2, 2, dtype=munet.bool))


def test_inner_outer_kron_tensordot():
    check(munet.outer, torch.outer, randn(3, seed=1), randn(4, seed=2))
    check(lambda x, y: x.ger(y), lambda x, y: x.ger(y), noncontiguous(randn(3, seed=1)), randn(0, seed=2))
    check(munet.inner, torch.inner, randn(2, 3, 4, seed=1), randn(5, 4, seed=2))
    check(munet.inner, torch.inner, randn(4, seed=1), randn(4, seed=2))
    check(munet.inner, torch.inner, randn(seed=1), randn(2, 3, seed=2))
    check(munet.kron, torch.kron, randn(2, 3, seed=1), randn(4, 2, seed=2))
    check(lambda x, y: x.kron(y), lambda x, y: x.kron(y), randn(2, seed=1), randn(3, 1, 2, seed=2))
    a, b = randn(2, 3, 4, seed=1), randn(3, 4, 5, seed=2)
    check(munet.tensordot, torch.tensordot, a, b)
    check(
        lambda x, y: munet.tensordot(x, y, dims=1),
        lambda x, y: torch.tensordot(x, y, dims=1),
        randn(2, 3, seed=1),
        randn(3, 4, seed=2),
    )
    check(
        lambda x, y: munet.tensordot(x, y, dims=0),
        lambda x, y: torch.tensordot(x, y, dims=0),
        randn(2, seed=1),
        randn(3, seed=2),
    )
    dims = ([0, 2], [1, 0])
    check(
        lambda x, y: munet.tensordot(x, y, dims),
        lambda x, y: torch.tensordot(x, y, dims),
        randn(4, 3, 5, seed=1),
        noncontiguous(randn(5, 4, 2, seed=2)),
    )
    with pytest.raises(
        RuntimeError, match=r"tensordot: contracted dimensions need to match, but first has size 3 in dim 0"
    ):
        munet.tensordot(munet.ones(3, 2), munet.ones(4, 2), dims=([0], [0]))
    with pytest.raises(RuntimeError, match=r"inner\(\) the last dimension must match"):
        munet.inner(munet.ones(2, 3), munet.ones(4))
    with pytest.raises(RuntimeError, match=r"outer: expected 1-D tensors"):
        munet.outer(munet.ones(2, 3), munet.ones(4))


# add-and-multiply ---------------------------------------------------------------------------------


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 3.0)])
def test_addmm_family(beta, alpha):
    kw = dict(beta=beta, alpha=alpha)
    grad = beta != 0  # beta=0: PyTorch returns a zero gradient for input, MuNet none (input unused)
    check(
        lambda i, x, y: munet.addmm(i, x, y, **kw),
        lambda i, x, y: torch.addmm(i, x, y, **kw),
        randn(3, 5, seed=0),
        randn(3, 4, seed=1),
        randn(4, 5, seed=2),
        grad=grad,
    )
    check(
        lambda i, x, y: i.addmm(x, y, **kw),
        lambda i, x, y: i.addmm(x, y, **kw),
        randn(5, seed=0),
        noncontiguous(randn(3, 4, seed=1)),
        randn(4, 5, seed=2),
        grad=grad,
    )
    check(
        lambda i, x, y: munet.addmv(i, x, y, **kw),
        lambda i, x, y: torch.addmv(i, x, y, **kw),
        randn(3, seed=0),
        randn(3, 4, seed=1),
        randn(4, seed=2),
        grad=grad,
    )
    check(
        lambda i, x, y: munet.baddbmm(i, x, y, **kw),
        lambda i, x, y: torch.baddbmm(i, x, y, **kw),
        randn(1, 3, 5, seed=0),
        randn(2, 3, 4, seed=1),
        randn(2, 4, 5, seed=2),
        grad=grad,
    )
    check(
        lambda i, x, y: munet.addbmm(i, x, y, **kw),
        lambda i, x, y: torch.addbmm(i, x, y, **kw),
        randn(3, 5, seed=0),
        randn(2, 3, 4, seed=1),
        randn(2, 4, 5, seed=2),
        grad=grad,
    )
    check(
        lambda i, x, y: munet.addr(i, x, y, **kw),
        lambda i, x, y: torch.addr(i, x, y, **kw),
        randn(3, 1, seed=0),
        randn(3, seed=1),
        randn(4, seed=2),
        grad=grad,
    )


def test_addmm_beta_zero_ignores_nan_and_inplace():
    inp = munet.full((2, 2), float("nan"))
    out = munet.addmm(inp, munet.ones(2, 3), munet.ones(3, 2), beta=0)
    assert np.all(out.numpy() == 3)
    x = munet.ones(2, 2)
    x.addmm_(munet.ones(2, 3), munet.ones(3, 2), alpha=2)
    assert np.all(x.numpy() == 7)
    y = munet.zeros(2, 3, 2)
    y.baddbmm_(munet.ones(2, 3, 4), munet.ones(2, 4, 2), beta=0.5)
    assert np.all(y.numpy() == 4)
    with pytest.raises(
        RuntimeError, match=r"addmm: the size of tensors must match or be 1 to broadcast, got shapes \[4\] and \[2, 2\]"
    ):
        munet.addmm(munet.ones(4), munet.ones(2, 3), munet.ones(3, 2))
    with pytest.raises(
        RuntimeError, match=r"addmm: the input of shape \[2, 1, 2\] cannot be broadcast to the result shape \[2, 2\]"
    ):
        munet.addmm(munet.ones(2, 1, 2), munet.ones(2, 3), munet.ones(3, 2))


# einsum -------------------------------------------------------------------------------------------

EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(3, 3, 2)]),
    ("iji->ij", [(3, 2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij", [(2, 3)]),
    ("ji", [(2, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]),
    ("ij,ij->i", [(3, 4), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...i->...", [(2, 3, 4)]),
    ("b...,b->...", [(2, 3, 4), (2,)]),
    ("i...->...", [(2, 3)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij,kl->", [(2, 3), (4, 5)]),
    ("i,i,i->i", [(4,), (4,), (4,)]),
    ("ab,ab->ba", [(0, 3), (0, 3)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES)
def test_einsum(eq, shapes):
    arrays = [randn(*s, dtype="float64", seed=i + 1) for i, s in enumerate(shapes)]
    check(lambda *xs: munet.einsum(eq, *xs), lambda *xs: torch.einsum(eq, *xs), *arrays)


def test_einsum_operand_forms_and_noncontiguous():
    a, b = randn(2, 3, seed=1), randn(3, 4, seed=2)
    check(
        lambda x, y: munet.einsum("ij,jk->ik", [x, y]),
        lambda x, y: torch.einsum("ij,jk->ik", [x, y]),
        noncontiguous(a),
        b,
    )
    check(
        lambda x, y: munet.einsum(x, [0, 1], y, [1, 2], [0, 2]),
        lambda x, y: torch.einsum(x, [0, 1], y, [1, 2], [0, 2]),
        a,
        b,
    )
    check(lambda x: munet.einsum("ii->i", x), lambda x: torch.einsum("ii->i", x), noncontiguous(randn(3, 3, seed=3)))
    check(lambda x: munet.einsum("ii", x.mT), lambda x: torch.einsum("ii", x.mT), randn(4, 4, seed=3))


def test_einsum_errors():
    with pytest.raises(RuntimeError, match=r"einsum\(\): more operands were provided than specified"):
        munet.einsum("ij->i", munet.ones(2, 2), munet.ones(2))
    with pytest.raises(
        RuntimeError,
        match=r"einsum\(\): the number of subscripts in the equation \(2\) does not match the number of dimensions \(3\) for operand 0",
    ):
        munet.einsum("ij->i", munet.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match=r"einsum\(\): output subscript k does not appear"):
        munet.einsum("ij->k", munet.ones(2, 2))
    with pytest.raises(RuntimeError, match=r"subscript i is repeated for operand 0 but the sizes don't match, 2 != 3"):
        munet.einsum("ii->i", munet.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"subscript j has size 3 in one operand and size 4 in operand 1"):
        munet.einsum("ij,jk->ik", munet.ones(2, 3), munet.ones(4, 5))
    with pytest.raises(RuntimeError, match=r"invalid subscript given in the equation: '1'"):
        munet.einsum("i1->i", munet.ones(2, 2))
    with pytest.raises(RuntimeError, match=r"output subscript i appears more than once"):
        munet.einsum("i->ii", munet.ones(2))


# linear / bilinear --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 5), (0, 5)])
def test_linear(shape):
    x, w, b = randn(*shape, seed=1), randn(4, 5, seed=2), randn(4, seed=3)
    check(F.linear, torch.nn.functional.linear, x, w, b)
    check(F.linear, torch.nn.functional.linear, noncontiguous(x), noncontiguous(w))
    if len(shape) != 2:  # PyTorch's addmm path rejects a 1-D weight for 2-D input
        check(F.linear, torch.nn.functional.linear, x, randn(5, seed=2), randn(seed=3))


def test_linear_double_backward_and_errors():
    x, w, b = (
        randn(2, 3, 5, dtype="float64", seed=1),
        randn(4, 5, dtype="float64", seed=2),
        randn(4, dtype="float64", seed=3),
    )
    double_backward(F.linear, torch.nn.functional.linear, x, w, b)
    with pytest.raises(
        RuntimeError,
        match=r"linear: input's last dimension must equal in_features, but got input shape \[2, 3\] and weight shape \[4, 5\]",
    ):
        F.linear(munet.ones(2, 3), munet.ones(4, 5))


@pytest.mark.parametrize("lead", [(3,), (2, 3), ()])
def test_bilinear(lead):
    x1, x2 = randn(*lead, 4, seed=1), randn(*lead, 5, seed=2)
    w, b = randn(6, 4, 5, seed=3), randn(6, seed=4)
    check(F.bilinear, torch.nn.functional.bilinear, x1, x2, w, b, float64_reference=True)
    check(munet.bilinear, torch.bilinear, noncontiguous(x1), x2, noncontiguous(w), None, float64_reference=True)
    with pytest.raises(RuntimeError, match=r"bilinear: input1 and input2 last dims must match weight's"):
        F.bilinear(munet.ones(3, 5), munet.ones(3, 5), munet.ones(6, 4, 5))


def test_einsum_random_equations():
    """Seeded random equations (diagonals, size-1 broadcasting, implicit output) vs PyTorch."""
    import random

    rng = random.Random(0)
    sizes = {c: rng.randint(2, 3) for c in "abcd"}
    for trial in range(60):
        terms = ["".join(rng.choice("abcd") for _ in range(rng.randint(0, 3))) for _ in range(rng.randint(1, 3))]
        used = sorted(set("".join(terms)))
        eq = ",".join(terms) + ("->" + "".join(rng.sample(used, rng.randint(0, len(used)))) if trial % 5 else "")
        arrays = []
        for i, term in enumerate(terms):
            shape = [sizes[c] if term.count(c) > 1 or rng.random() < 0.8 else 1 for c in term]
            arrays.append(randn(*shape, dtype="float64", seed=100 * trial + i))
        check(lambda *xs: munet.einsum(eq, *xs), lambda *xs: torch.einsum(eq, *xs), *arrays)

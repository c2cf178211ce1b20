"""Normalization ops (munet/ops/normalization.py) against PyTorch: forward, gradients,
double backward, running-statistics updates, errors."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from tests.reference import assert_close, check, noncontiguous, randn, to_torch


def double_backward(munet_fn, torch_fn, *arrays, rtol=1e-6, atol=1e-8):
    """Second derivatives: grad of <first grads, v> w.r.t. the inputs, compared with torch."""
    m_in = [munet.tensor(a, requires_grad=True) for a in arrays]
    t_in = [to_torch(a).requires_grad_(True) for a in arrays]
    m_out, t_out = munet_fn(*m_in), torch_fn(*t_in)
    up = randn(*t_out.shape, dtype=str(arrays[0].dtype), seed=5)
    m_g = munet.autograd.grad(m_out, m_in, munet.tensor(up), create_graph=True)
    t_g = torch.autograd.grad(t_out, t_in, to_torch(up), create_graph=True)
    vs = [randn(*a.shape, dtype=str(a.dtype), seed=7 + i) for i, a in enumerate(arrays)]
    m_total = sum((g * munet.tensor(v)).sum() for g, v in zip(m_g, vs))
    t_total = sum((g * to_torch(v)).sum() for g, v in zip(t_g, vs))
    m_gg = munet.autograd.grad(m_total, m_in, allow_unused=True)
    t_gg = torch.autograd.grad(t_total, t_in, allow_unused=True)
    for m, t, a in zip(m_gg, t_gg, arrays):
        m = munet.zeros(*a.shape, dtype=m_in[0].dtype) if m is None else m
        t = torch.zeros(a.shape, dtype=t_in[0].dtype) if t is None else t
        assert_close(m, t, rtol, atol, what="second derivative")


# layer_norm / rms_norm ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,ns", [((4, 5), (5,)), ((2, 3, 4), (3, 4)), ((3, 1), (1,)), ((6,), 6)])
def test_layer_norm_affine(shape, ns, dtype):
    nshape = (ns,) if isinstance(ns, int) else ns
    x, w, b = randn(*shape, dtype=dtype), randn(*nshape, dtype=dtype, seed=2), randn(*nshape, dtype=dtype, seed=3)
    check(
        lambda x, w, b: F.layer_norm(x, ns, w, b),
        lambda x, w, b: TF.layer_norm(x, nshape, w, b),
        x,
        w,
        b,
        float64_reference=True,
    )
    check(
        lambda x: munet.layer_norm(x, ns, eps=1e-3),
        lambda x: torch.layer_norm(x, nshape, eps=1e-3),
        x,
        float64_reference=True,
    )


def test_layer_norm_noncontiguous_and_half():
    x = noncontiguous(randn(3, 4, 6, dtype="float64"))
    check(lambda x: F.layer_norm(x, (6,)), lambda x: TF.layer_norm(x, (6,)), x)
    xt = randn(3, 8, dtype="float32").T.copy().T  # transposed layout
    check(lambda x: F.layer_norm(x, (8,)), lambda x: TF.layer_norm(x, (8,)), xt, float64_reference=True)
    check(
        lambda x: F.layer_norm(x, (8,)),
        lambda x: TF.layer_norm(x, (8,)),
        randn(3, 8, dtype="bfloat16"),
        grad=False,
        atol=5e-2,
    )


def test_layer_norm_double_backward():
    x, w, b = randn(3, 5, dtype="float64"), randn(5, dtype="float64", seed=2), randn(5, dtype="float64", seed=3)
    double_backward(lambda x, w, b: F.layer_norm(x, (5,), w, b), lambda x, w, b: TF.layer_norm(x, (5,), w, b), x, w, b)
    double_backward(lambda x: F.rms_norm(x, (5,)), lambda x: TF.rms_norm(x, (5,)), x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm(dtype, eps):
    x, w = randn(2, 3, 4, dtype=dtype), randn(4, dtype=dtype, seed=2)
    check(
        lambda x, w: F.rms_norm(x, (4,), w, eps),
        lambda x, w: TF.rms_norm(x, (4,), w, eps),
        x,
        w,
        float64_reference=True,
    )
    check(
        lambda x: munet.rms_norm(x, [3, 4], eps=eps),
        lambda x: torch.rms_norm(x, [3, 4], eps=eps),
        x,
        float64_reference=True,
    )


def test_layer_norm_errors():
    x = munet.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"layer_norm: given normalized_shape=\[4\].*got input of size \[2, 3\]"):
        F.layer_norm(x, (4,))
    with pytest.raises(RuntimeError, match=r"layer_norm: expected weight of shape \[3\], got \[2\]"):
        F.layer_norm(x, (3,), munet.ones(2))
    with pytest.raises(RuntimeError, match="layer_norm: expected a floating point input, got int64"):
        F.layer_norm(munet.zeros(2, 3, dtype=munet.int64), (3,))


# batch_norm -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 5), (2, 3, 4, 3), (2, 3, 2, 2, 2)])
def test_batch_norm_training_updates_running_stats(shape, dtype):
    c = shape[1]
    x, w, b = randn(*shape, dtype=dtype), randn(c, dtype=dtype, seed=2), randn(c, dtype=dtype, seed=3)
    rm, rv = randn(c, dtype=dtype, seed=4), np.abs(randn(c, dtype=dtype, seed=5)) + 0.5
    m_rm, m_rv = munet.tensor(rm), munet.tensor(rv)
    t_rm, t_rv = to_torch(rm), to_torch(rv)
    check(
        lambda x, w, b: F.batch_norm(x, m_rm, m_rv, w, b, training=True, momentum=0.3),
        lambda x, w, b: TF.batch_norm(x, t_rm, t_rv, w, b, training=True, momentum=0.3),
        x,
        w,
        b,
        atol=1e-5,
    )
    assert_close(m_rm, t_rm, what="running_mean")
    assert_close(m_rv, t_rv, what="running_var")
    assert not np.allclose(m_rm.numpy(), rm), "running_mean was not updated"


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 4, 3)])
def test_batch_norm_eval_uses_running_stats(shape):
    c = shape[1]
    x, w, b = randn(*shape, dtype="float64"), randn(c, dtype="float64", seed=2), randn(c, dtype="float64", seed=3)
    rm, rv = randn(c, dtype="float64", seed=4), np.abs(randn(c, dtype="float64", seed=5)) + 0.5
    m_rm, m_rv = munet.tensor(rm), munet.tensor(rv)
    check(
        lambda x, w, b: F.batch_norm(x, m_rm, m_rv, w, b),
        lambda x, w, b: TF.batch_norm(x, to_torch(rm), to_torch(rv), w, b),
        x,
        w,
        b,
    )
    np.testing.assert_array_equal(m_rm.numpy(), rm)
    np.testing.assert_array_equal(m_rv.numpy(), rv)


def test_batch_norm_no_running_stats_noncontiguous_and_double_backward():
    x = noncontiguous(randn(4, 3, 5, dtype="float64"))
    check(
        lambda x: F.batch_norm(x, None, None, training=True), lambda x: TF.batch_norm(x, None, None, training=True), x
    )
    double_backward(
        lambda x: F.batch_norm(x, None, None, training=True),
        lambda x: TF.batch_norm(x, None, None, training=True),
        randn(4, 3, dtype="float64"),
    )


def test_batch_norm_errors():
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        F.batch_norm(munet.zeros(1, 3), None, None, training=True)
    with pytest.raises(RuntimeError, match="batch_norm: expected running_mean of shape \\[3\\], got \\[4\\]"):
        F.batch_norm(munet.zeros(2, 3), munet.zeros(4), munet.ones(3))
    with pytest.raises(RuntimeError, match="running_mean and running_var must be defined"):
        F.batch_norm(munet.zeros(2, 3), None, None, training=False)


# group_norm / instance_norm -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 3), 3), ((3, 4, 5), 2), ((2, 4), 2), ((1, 6, 2, 2, 2), 1)])
def test_group_norm(shape, groups, dtype):
    c = shape[1]
    x, w, b = randn(*shape, dtype=dtype), randn(c, dtype=dtype, seed=2), randn(c, dtype=dtype, seed=3)
    check(
        lambda x, w, b: F.group_norm(x, groups, w, b),
        lambda x, w, b: TF.group_norm(x, groups, w, b),
        x,
        w,
        b,
        float64_reference=True,
    )
    check(
        lambda x: munet.group_norm(x, groups),
        lambda x: torch.group_norm(x, groups),
        noncontiguous(x),
        float64_reference=True,
    )


def test_group_norm_errors():
    with pytest.raises(
        RuntimeError, match=r"group_norm: expected number of channels in input to be divisible by num_groups"
    ):
        F.group_norm(munet.zeros(2, 6, 3), 4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 3)])
def test_instance_norm_with_running_stats(shape, dtype):
    c = shape[1]
    x, w, b = randn(*shape, dtype=dtype), randn(c, dtype=dtype, seed=2), randn(c, dtype=dtype, seed=3)
    rm, rv = randn(c, dtype=dtype, seed=4), np.abs(randn(c, dtype=dtype, seed=5)) + 0.5
    m_rm, m_rv, t_rm, t_rv = munet.tensor(rm), munet.tensor(rv), to_torch(rm), to_torch(rv)
    check(
        lambda x, w, b: F.instance_norm(x, m_rm, m_rv, w, b, use_input_stats=True, momentum=0.2),
        lambda x, w, b: TF.instance_norm(x, t_rm, t_rv, w, b, use_input_stats=True, momentum=0.2),
        x,
        w,
        b,
        atol=1e-5,
    )
    assert_close(m_rm, t_rm, what="running_mean")
    assert_close(m_rv, t_rv, what="running_var")
    check(
        lambda x: F.instance_norm(x, m_rm, m_rv, use_input_stats=False),
        lambda x: TF.instance_norm(x, t_rm, t_rv, use_input_stats=False),
        x,
        atol=1e-5,
    )
    check(lambda x: F.instance_norm(x), lambda x: TF.instance_norm(x), noncontiguous(x), float64_reference=True)


# normalize / local_response_norm -------------------------------------------------------------------------------


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0)])
def test_normalize(p, dim):
    x = randn(3, 4, dtype="float64")
    check(lambda x: F.normalize(x, p, dim), lambda x: TF.normalize(x, p, dim), x)
    z = np.zeros((2, 3))
    check(lambda x: F.normalize(x), lambda x: TF.normalize(x), z)


def test_local_response_norm():
    x = randn(2, 5, 3, 3, dtype="float64")
    check(lambda x: F.local_response_norm(x, 3), lambda x: TF.local_response_norm(x, 3), x)
    check(
        lambda x: F.local_response_norm(x, 2, 1e-2, 0.5, 2.0),
        lambda x: TF.local_response_norm(x, 2, 1e-2, 0.5, 2.0),
        randn(2, 4, 6),
    )

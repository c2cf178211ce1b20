"""scaled_dot_product_attention (munet/ops/attention.py) against PyTorch: forward and gradients."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from tests.reference import check, noncontiguous, randn, rng


class Const:
    """A non-differentiable tensor argument (masks)."""

    def __init__(self, arr):
        self.arr = np.asarray(arr)


def _kwargs(kwargs, lib):
    out = {}
    for k, v in kwargs.items():
        if isinstance(v, Const):
            out[k] = munet.from_numpy(v.arr.copy()) if lib == "munet" else torch.from_numpy(v.arr.copy())
        else:
            out[k] = v
    return out


def check_sdpa(q, k, v, **kwargs):
    m_kw, t_kw = _kwargs(kwargs, "munet"), _kwargs(kwargs, "torch")
    return check(
        lambda *a: F.scaled_dot_product_attention(*a, **m_kw),
        lambda *a: TF.scaled_dot_product_attention(*a, **t_kw),
        q,
        k,
        v,
    )


def qkv(batch, n_query, n_key, dim, dim_v=None, dtype="float64", heads_kv=None):
    """Query (*batch, L, E), key (*kv_batch, S, E), value (*kv_batch, S, Ev); kv_batch may have fewer heads."""
    dim_v = dim if dim_v is None else dim_v
    kv_batch = batch if heads_kv is None else (*batch[:-1], heads_kv)
    return (
        randn(*batch, n_query, dim, dtype=dtype, seed=1),
        randn(*kv_batch, n_key, dim, dtype=dtype, seed=2),
        randn(*kv_batch, n_key, dim_v, dtype=dtype, seed=3),
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("batch", [(), (3,), (2, 3), (2, 1, 2)])
def test_sdpa_plain(batch, dtype):
    check_sdpa(*qkv(batch, 4, 5, 3, dim_v=2, dtype=dtype))


@pytest.mark.parametrize("scale", [None, 0.3, 2.0])
def test_sdpa_scale_and_noncontiguous(scale):
    q, k, v = qkv((2, 2), 3, 4, 5)
    check_sdpa(noncontiguous(q), k, noncontiguous(v), scale=scale)
    # a transposed (B, L, H, E) layout, as produced by attention modules
    qt = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    check_sdpa(qt, k, v, scale=scale)


@pytest.mark.parametrize("mask_shape", [(4, 5), (1, 5), (2, 1, 4, 5), (2, 3, 4, 5)])
def test_sdpa_bool_mask(mask_shape):
    mask = rng(7).uniform(size=mask_shape) < 0.7
    mask[..., 0] = True  # every row keeps a key
    check_sdpa(*qkv((2, 3), 4, 5, 3), attn_mask=Const(mask))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mask_shape", [(4, 5), (3, 1, 5), (2, 3, 4, 5)])
def test_sdpa_float_mask(mask_shape, dtype):
    mask = rng(8).standard_normal(mask_shape).astype(dtype)
    mask[..., 1] = -np.inf
    check_sdpa(*qkv((2, 3), 4, 5, 3, dtype=dtype), attn_mask=Const(mask))


def test_sdpa_fully_masked_rows_give_zero():
    mask = np.ones((4, 5), dtype=bool)
    mask[1] = False
    out = check_sdpa(*qkv((2,), 4, 5, 3), attn_mask=Const(mask))
    assert not np.any(out.detach().numpy()[:, 1])
    fmask = np.zeros((4, 5))
    fmask[2] = -np.inf
    check_sdpa(*qkv((2,), 4, 5, 3), attn_mask=Const(fmask))


@pytest.mark.parametrize("lengths", [(4, 4), (5, 3), (3, 6), (1, 4)])
def test_sdpa_causal(lengths):
    check_sdpa(*qkv((2, 2), *lengths, 3), is_causal=True)
    check_sdpa(*qkv((2, 2), *lengths, 3, dtype="float32"), is_causal=True, scale=0.5)


@pytest.mark.parametrize("heads_kv", [1, 2, 4])
def test_sdpa_gqa(heads_kv):
    check_sdpa(*qkv((2, 4), 3, 5, 2, heads_kv=heads_kv), enable_gqa=True)
    check_sdpa(*qkv((2, 4), 3, 5, 2, heads_kv=heads_kv), enable_gqa=True, is_causal=True)


def test_sdpa_empty_and_size_one():
    check_sdpa(*qkv((2,), 0, 3, 2))
    check_sdpa(*qkv((0, 2), 3, 3, 2))
    check_sdpa(*qkv((1,), 1, 1, 1))


def test_sdpa_double_backward():
    q, k, v = qkv((2,), 3, 4, 2)
    mask = np.array([[True, False, True, True]] * 3)
    mq, mk, mv = (munet.tensor(a, requires_grad=True) for a in (q, k, v))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    mo = F.scaled_dot_product_attention(mq, mk, mv, attn_mask=munet.from_numpy(mask))
    to = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(mask))
    mg = munet.autograd.grad((mo * mo).sum(), (mq, mk), create_graph=True)
    tg = torch.autograd.grad((to * to).sum(), (tq, tk), create_graph=True)
    (mg[0].sum() + (mg[1] * mg[1]).sum()).backward()
    (tg[0].sum() + (tg[1] * tg[1]).sum()).backward()
    for m, t in ((mq, tq), (mk, tk), (mv, tv)):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sdpa_half_precision(dtype):
    mask = rng(7).uniform(size=(4, 5)) < 0.7
    mask[:, 0] = True
    check_sdpa(*qkv((2, 2), 4, 5, 3, dtype=dtype), attn_mask=Const(mask))
    check_sdpa(*qkv((2, 2), 4, 5, 3, dtype=dtype), is_causal=True)


def _t(arr):
    return munet.from_numpy(np.asarray(arr).copy())


def test_sdpa_dropout_zero_is_identity_and_seeded():
    q, k, v = (_t(a) for a in qkv((2, 2), 4, 5, 3))
    np.testing.assert_array_equal(
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.0).numpy(), F.scaled_dot_product_attention(q, k, v).numpy()
    )
    munet.manual_seed(123)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4).numpy()
    munet.manual_seed(123)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, F.scaled_dot_product_attention(q, k, v).numpy())
    assert not np.any(F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy())


def test_sdpa_dropout_is_dropout_of_the_weights():
    q, k, v = (_t(a) for a in qkv((2,), 3, 4, 2))
    munet.manual_seed(7)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    weights = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(2), -1)
    munet.manual_seed(7)
    expected = F.dropout(weights, 0.5) @ v
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-10)
    scores = q.numpy() @ k.numpy().transpose(0, 2, 1) / math.sqrt(2)
    reference = np.exp(scores - scores.max(-1, keepdims=True))
    reference /= reference.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights.numpy(), reference, rtol=1e-10)


def test_sdpa_dropout_statistics():
    p, n = 0.3, 4000
    # zero scores: uniform attention 1/S; value ones: each output is kept-fraction / (1 - p)
    q = munet.zeros(n, 1, 2)
    k = munet.zeros(n, 8, 2)
    v = munet.ones(n, 8, 1)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=p).numpy().reshape(-1)
    assert abs(out.mean() - 1.0) < 0.02
    kept = out * (1 - p) * 8  # number of kept keys per row
    np.testing.assert_allclose(kept, np.round(kept), atol=1e-4)
    assert abs(kept.mean() / 8 - (1 - p)) < 0.01
    # gradients flow only through the kept weights
    vg = munet.ones(4, 8, 1, requires_grad=True)
    F.scaled_dot_product_attention(munet.zeros(4, 1, 2), munet.zeros(4, 8, 2), vg, dropout_p=p).sum().backward()
    g = vg.grad.numpy()
    scaled = 1 / 8 / (1 - p)
    assert np.all(np.isclose(g, 0.0) | np.isclose(g, scaled, rtol=1e-6)) and np.any(g)


def test_sdpa_errors():
    q, k, v = (_t(a) for a in qkv((2,), 3, 4, 2))
    with pytest.raises(
        RuntimeError, match="scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True"
    ):
        F.scaled_dot_product_attention(q, k, v, attn_mask=munet.ones(3, 4, dtype=munet.bool), is_causal=True)
    with pytest.raises(
        RuntimeError, match=r"expected query and key to have the same embedding size.*\[2, 3, 2\].*\[2, 4, 3\]"
    ):
        F.scaled_dot_product_attention(q, _t(randn(2, 4, 3, dtype="float64")), v)
    with pytest.raises(RuntimeError, match="expected key and value to have the same sequence length"):
        F.scaled_dot_product_attention(q, k, _t(randn(2, 5, 2, dtype="float64")))
    with pytest.raises(RuntimeError, match="expected query, key, and value to have the same dtype"):
        F.scaled_dot_product_attention(q, k, v.float())
    with pytest.raises(RuntimeError, match=r"attn_mask of shape \[3, 5\] does not broadcast"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=munet.ones(3, 5, dtype=munet.bool))
    with pytest.raises(RuntimeError, match=r"number of query heads \(3\) must be a multiple of the key heads \(2\)"):
        qh, kh, vh = (_t(a) for a in qkv((1, 3), 2, 2, 2))
        F.scaled_dot_product_attention(
            qh, _t(randn(1, 2, 2, 2, dtype="float64")), _t(randn(1, 2, 2, 2, dtype="float64")), enable_gqa=True
        )
    with pytest.raises(RuntimeError, match="expected attn_mask of dtype bool or floating point, got int64"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=munet.ones(3, 4, dtype=munet.int64))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(RuntimeError, match="expected query of rank >= 2"):
        F.scaled_dot_product_attention(_t(randn(2, dtype="float64")), k, v)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sdpa_weights_are_the_softmax_kernels_bit_for_bit(dtype):
    """The unmasked path writes softmax out as max/exp/sum/div (so the compiler can fuse it); in eager
    it must give exactly the softmax kernel's weights, causal rows (-inf entries) included."""
    q, k = (munet.from_numpy(randn(2, 3, 9, 5, dtype=dtype)) for _ in range(2))
    v = munet.from_numpy(np.eye(9, dtype=dtype)).expand(2, 3, 9, 9)  # the output is the weights themselves
    for causal in (False, True):
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(5))
        if causal:
            scores = munet.where(munet.from_numpy(np.tril(np.ones((9, 9), bool))), scores, -math.inf)
        expected = F.softmax(scores, -1).numpy()
        got = F.scaled_dot_product_attention(q, k, v, is_causal=causal).numpy()
        np.testing.assert_array_equal(got, expected)

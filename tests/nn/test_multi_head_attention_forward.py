"""F.multi_head_attention_forward against PyTorch's: packed and separate weights, static k/v,
bias_k/bias_v, zero attention, masks, unbatched inputs; outputs, weights and gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet
import munet.nn.functional as F
from tests.reference import assert_close, randn

E, HEADS, L, S, N = 8, 2, 3, 4, 2


def _arrays(separate: bool, kdim: int, bias_kv: bool, seed: int = 0) -> dict:
    names = {
        "in_proj_bias": (3 * E,),
        "out_proj_weight": (E, E),
        "out_proj_bias": (E,),
    }
    if separate:
        names.update(q_proj_weight=(E, E), k_proj_weight=(E, kdim), v_proj_weight=(E, kdim))
    else:
        names.update(in_proj_weight=(3 * E, E))
    if bias_kv:
        names.update(bias_k=(1, 1, E), bias_v=(1, 1, E))
    return {name: randn(*shape, seed=seed + i) * 0.5 for i, (name, shape) in enumerate(sorted(names.items()))}


def _call(lib_tensor, fn, arrays, q, k, v, **kwargs):
    leaves = {name: lib_tensor(a, requires_grad=True) for name, a in arrays.items()}
    inputs = [lib_tensor(x, requires_grad=True) for x in (q, k, v)]
    out, weights = fn(
        *inputs,
        E,
        HEADS,
        leaves.get("in_proj_weight"),
        leaves["in_proj_bias"],
        leaves.get("bias_k"),
        leaves.get("bias_v"),
        kwargs.pop("add_zero_attn", False),
        0.0,
        leaves["out_proj_weight"],
        leaves["out_proj_bias"],
        q_proj_weight=leaves.get("q_proj_weight"),
        k_proj_weight=leaves.get("k_proj_weight"),
        v_proj_weight=leaves.get("v_proj_weight"),
        use_separate_proj_weight="q_proj_weight" in leaves,
        **kwargs,
    )
    rng = np.random.default_rng(3)
    total = (out * lib_tensor(rng.standard_normal(tuple(out.shape)).astype(np.float32))).sum()
    if weights is not None:
        total = total + (weights * lib_tensor(rng.standard_normal(tuple(weights.shape)).astype(np.float32))).sum()
    total.backward()
    return out, weights, [x.grad for x in inputs] + [leaves[name].grad for name in sorted(leaves)]


def _compare(arrays, q, k, v, masks=(), **kwargs):
    m_masks = {name: munet.tensor(m) for name, m in masks}
    t_masks = {name: torch.tensor(m) for name, m in masks}
    m = _call(munet.tensor, F.multi_head_attention_forward, arrays, q, k, v, **kwargs, **m_masks)
    t = _call(torch.tensor, torch.nn.functional.multi_head_attention_forward, arrays, q, k, v, **kwargs, **t_masks)
    assert_close(m[0], t[0], rtol=1e-5, atol=1e-6)
    assert (m[1] is None) == (t[1] is None)
    if t[1] is not None:
        assert_close(m[1], t[1], rtol=1e-5, atol=1e-6, what="weights")
    for i, (a, b) in enumerate(zip(m[2], t[2])):
        if b is None:
            assert a is None or not np.any(a.numpy()), f"grad {i}"
        else:
            assert_close(a, b, rtol=1e-4, atol=1e-5, what=f"grad {i}")


@pytest.mark.parametrize("separate", [False, True])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("bias_kv,add_zero_attn", [(False, False), (True, True)])
def test_matches_pytorch(separate, need_weights, average, bias_kv, add_zero_attn):
    kdim = 5 if separate else E
    arrays = _arrays(separate, kdim, bias_kv)
    q, k, v = randn(L, N, E, seed=20), randn(S, N, kdim, seed=21), randn(S, N, kdim, seed=22)
    padding = np.zeros((N, S), dtype=bool)
    padding[1, -1] = True
    causal = np.triu(np.ones((L, S), dtype=bool), 1)
    _compare(
        arrays,
        q,
        k,
        v,
        masks=(("key_padding_mask", padding), ("attn_mask", causal)),
        need_weights=need_weights,
        average_attn_weights=average,
        add_zero_attn=add_zero_attn,
    )


def test_static_kv_and_unbatched():
    arrays = _arrays(False, E, False)
    q, k, v = randn(L, N, E, seed=30), randn(S, N, E, seed=31), randn(S, N, E, seed=32)
    static = randn(N * HEADS, S, E // HEADS, seed=33)
    m_out, _ = F.multi_head_attention_forward(
        munet.tensor(q),
        munet.tensor(k),
        munet.tensor(v),
        E,
        HEADS,
        *(munet.tensor(arrays[n]) for n in ("in_proj_weight", "in_proj_bias")),
        None,
        None,
        False,
        0.0,
        *(munet.tensor(arrays[n]) for n in ("out_proj_weight", "out_proj_bias")),
        static_k=munet.tensor(static),
        static_v=munet.tensor(static * 2),
    )
    t_out, _ = torch.nn.functional.multi_head_attention_forward(
        torch.tensor(q),
        torch.tensor(k),
        torch.tensor(v),
        E,
        HEADS,
        *(torch.tensor(arrays[n]) for n in ("in_proj_weight", "in_proj_bias")),
        None,
        None,
        False,
        0.0,
        *(torch.tensor(arrays[n]) for n in ("out_proj_weight", "out_proj_bias")),
        static_k=torch.tensor(static),
        static_v=torch.tensor(static * 2),
    )
    assert_close(m_out, t_out, rtol=1e-5, atol=1e-6)
    _compare(arrays, q[:, 0], k[:, 0], v[:, 0])
    with pytest.raises(RuntimeError, match="embedding dimension of 8"):
        F.multi_head_attention_forward(
            munet.zeros(L, N, 4),
            munet.zeros(S, N, 4),
            munet.zeros(S, N, 4),
            E,
            HEADS,
            munet.zeros(3 * E, E),
            None,
            None,
            None,
            False,
            0.0,
            munet.zeros(E, E),
            None,
        )

"""Attention: ``scaled_dot_product_attention``, a composite of matmul, softmax and masks.

Its decomposition, registered on the op, is PyTorch's math backend written with public ops, so
autograd, double backward, tracing, ONNX export and the compiler all see matmuls, a softmax and
elementwise masking. Under autocast it runs in the lower precision (PyTorch's list), as one op. The softmax is the ``softmax`` op;
the compiler replaces it by its decomposition (max, exp, sum and divide) and fuses that with the
scaling and the causal mask into reduction kernels. A backend may later register a fused
(flash) kernel; this decomposition stays the meaning.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet._sdp_selection import check_backend_available
from munet.ops._registry import Meta, apply, define
from munet.ops._utils import broadcast_shapes, is_tensor
from munet.ops.activation import dropout, softmax
from munet.ops.elementwise import where as _where

__all__: list[str] = []
__functional__ = ["scaled_dot_product_attention"]
__tensor_methods__: list[str] = []

_OP = "scaled_dot_product_attention"


def _sdpa_meta(query, key, value, attn_mask, *, dropout_p, is_causal, scale, enable_gqa):
    """The argument checks and the output's shape (..., L, Ev) and dtype."""
    _check_inputs(query, key, value)
    if is_causal and attn_mask is not None:
        raise RuntimeError(f"{_OP}: explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{_OP}: dropout probability has to be between 0 and 1, but got {dropout_p}")
    if enable_gqa:
        _kv_repeats(query, key, value)
    if attn_mask is not None and not is_tensor(attn_mask):
        raise TypeError(f"{_OP}: expected attn_mask to be a Tensor, got {type(attn_mask).__name__}")
    k_batch, v_batch = tuple(key.shape[:-2]), tuple(value.shape[:-2])
    if enable_gqa:  # key and value heads are repeated to the query's
        k_batch, v_batch = (*k_batch[:-1], query.shape[-3]), (*v_batch[:-1], query.shape[-3])
    batch = broadcast_shapes(tuple(query.shape[:-2]), k_batch, v_batch, op=_OP)
    return Meta((*batch, query.shape[-2], value.shape[-1]), query.dtype)


def _sdpa_decomposition(query, key, value, attn_mask, *, dropout_p, is_causal, scale, enable_gqa):
    """PyTorch's math backend: scaled scores, the causal or given mask, a (safe) softmax, dropout
    from random bits, and the weighted sum of the values."""
    if enable_gqa:
        hk, hv = _kv_repeats(query, key, value)
        key, value = _repeat_heads(key, hk), _repeat_heads(value, hv)
    n_query, n_key = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        scores = _where(_causal_mask(n_query, n_key, query.device), scores, -math.inf)
    masked = attn_mask is not None
    if masked:
        scores = _apply_mask(scores, attn_mask, query.dtype)
    weights = _safe_softmax(scores) if masked else softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return weights @ value


scaled_dot_product_attention_op = define(
    _OP,
    inputs=("query", "key", "value", "attn_mask"),
    meta=_sdpa_meta,
    decomposition=_sdpa_decomposition,
)


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale=None,
    enable_gqa: bool = False,
):
    """``softmax(query @ key.mT * scale + mask) @ value`` over shapes (..., L, E), (..., S, E), (..., S, Ev).

    - ``attn_mask``: bool (True = takes part) or float (added to the scores), broadcast to (..., L, S).
    - ``is_causal``: query i attends to keys j <= i (upper-left aligned when L != S); not with ``attn_mask``.
    - ``scale``: defaults to ``1 / sqrt(E)``.
    - ``dropout_p``: dropout on the attention weights (always applied when > 0, like PyTorch).
    - ``enable_gqa``: key/value have fewer heads (dim -3) than query; each is repeated to match.

    Rows whose every key is masked out give zeros (PyTorch's safe softmax), with zero gradient.
    A backend selection that allows no kernel (``munet.backends.cuda.enable_math_sdp(False)`` and the
    fused ones off, or ``sdpa_kernel([])``) raises, as in PyTorch.
    """
    check_backend_available(_OP)
    attrs = dict(
        dropout_p=float(dropout_p),
        is_causal=bool(is_causal),
        scale=None if scale is None else float(scale),
        enable_gqa=bool(enable_gqa),
    )
    return apply(scaled_dot_product_attention_op, query, key, value, attn_mask, **attrs)


def _check_inputs(query, key, value) -> None:
    for role, x in (("query", query), ("key", key), ("value", value)):
        if not is_tensor(x):
            raise TypeError(f"{_OP}: expected {role} to be a Tensor, got {type(x).__name__}")
        if x.ndim < 2:
            raise RuntimeError(f"{_OP}: expected {role} of rank >= 2 (..., L or S, E), got shape {list(x.shape)}")
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"{_OP}: expected {role} of a floating point dtype, got {x.dtype.name}")
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError(
            f"{_OP}: expected query, key, and value to have the same dtype, got query.dtype: {query.dtype.name}, "
            f"key.dtype: {key.dtype.name} and value.dtype: {value.dtype.name}"
        )
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(
            f"{_OP}: expected query and key to have the same embedding size (last dim), got query {list(query.shape)} "
            f"and key {list(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(
            f"{_OP}: expected key and value to have the same sequence length (dim -2), got key {list(key.shape)} "
            f"and value {list(value.shape)}"
        )


def _kv_repeats(query, key, value) -> tuple:
    """How many times each key and value head is repeated to match the query heads (enable_gqa)."""
    if query.ndim < 3 or key.ndim < 3 or value.ndim < 3:
        raise RuntimeError(
            f"{_OP}: enable_gqa needs query, key and value of rank >= 3 (..., H, L, E), got query {list(query.shape)}"
        )
    hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
    if hk == 0 or hv == 0 or hq % hk or hq % hv:
        raise RuntimeError(
            f"{_OP}: with enable_gqa the number of query heads ({hq}) must be a multiple of the key heads ({hk}) "
            f"and value heads ({hv})"
        )
    return hq // hk, hq // hv


def _repeat_heads(x, repeats: int):
    """``x.repeat_interleave(repeats, dim=-3)`` as an expand of a new axis and a reshape."""
    if repeats == 1:
        return x
    shape = tuple(x.shape)
    expanded = x.unsqueeze(-3).expand((*shape[:-3], shape[-3], repeats, *shape[-2:]))
    return expanded.reshape((*shape[:-3], shape[-3] * repeats, *shape[-2:]))


def _causal_mask(n_query: int, n_key: int, device):
    from munet.ops.creation import arange

    rows = arange(n_query, device=device).unsqueeze(-1)
    cols = arange(n_key, device=device).unsqueeze(0)
    return cols <= rows


def _apply_mask(scores, attn_mask, dtype):
    try:
        broadcast_shapes(tuple(attn_mask.shape), tuple(scores.shape), op=_OP)
    except RuntimeError:
        raise RuntimeError(
            f"{_OP}: attn_mask of shape {list(attn_mask.shape)} does not broadcast to the attention scores of "
            f"shape {list(scores.shape)} (..., L, S)"
        ) from None
    if attn_mask.dtype is D.bool_:
        return _where(attn_mask, scores, -math.inf)
    if not attn_mask.dtype.is_floating_point:
        raise RuntimeError(f"{_OP}: expected attn_mask of dtype bool or floating point, got {attn_mask.dtype.name}")
    return scores + attn_mask.to(dtype)


def _safe_softmax(scores):
    """Softmax over the last dim, with zeros (and zero gradient) for rows that are all -inf."""
    dead = (scores == -math.inf).all(-1, keepdim=True)
    weights = softmax(_where(dead, 0.0, scores), -1)
    return _where(dead, 0.0, weights)

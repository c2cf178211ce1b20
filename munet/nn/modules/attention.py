"""Multi-head attention: ``MultiheadAttention`` with PyTorch's parameters, masks and outputs.

Parameter names, shapes and initialization are PyTorch's: a packed ``in_proj_weight``
(3E, E) when key/value dims equal ``embed_dim``, else ``q_proj_weight``/``k_proj_weight``/
``v_proj_weight``; ``in_proj_bias`` (3E); ``out_proj`` (a Linear); optional ``bias_k``/``bias_v``.

The forward pass is PyTorch's ``multi_head_attention_forward`` math path, written with
``munet.nn.functional``: with ``need_weights=True`` the attention weights are computed
explicitly (softmax of the scaled scores plus the additive mask) so they can be returned;
with ``need_weights=False`` it calls ``F.scaled_dot_product_attention``. Boolean masks mean
"True = may not attend" (PyTorch's MHA convention) and become additive ``-inf`` masks.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import munet
import munet.nn.functional as F
from munet import _dtype as D
from munet._tensor import Tensor
from munet.nn import init
from munet.nn.module import Module
from munet.nn.modules.linear import Linear
from munet.nn.parameter import Parameter

__all__ = ["MultiheadAttention"]

_NAME = "MultiheadAttention"


class NonDynamicallyQuantizableLinear(Linear):
    """The ``out_proj`` of MultiheadAttention: a plain Linear under PyTorch's class name (for repr)."""


def _canonical_mask(mask, mask_name: str, other, other_name: str, target_dtype, check_other: bool = True):
    """A bool mask becomes an additive float mask (``-inf`` where True); float masks pass through."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"{_NAME}: expected {mask_name} to be a Tensor or None, got {type(mask).__name__}")
    is_float = mask.dtype.is_floating_point
    if mask.dtype is not D.bool_ and not is_float:
        raise TypeError(f"{_NAME}: only bool and floating types of {mask_name} are supported, got {mask.dtype.name}")
    if check_other and other is not None and mask.dtype is not other.dtype:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both instead.",
            stacklevel=4,
        )
    if is_float:
        return mask
    return munet.zeros_like(mask, dtype=target_dtype).masked_fill(mask, float("-inf"))


def _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads: int) -> bool:
    """PyTorch's rank rules; returns whether the input is batched."""
    for role, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, Tensor):
            raise TypeError(f"{_NAME}: expected {role} to be a Tensor, got {type(x).__name__}")
    if query.dim() not in (2, 3):
        raise ValueError(
            f"{_NAME}: query should be unbatched 2D or batched 3D tensor but received {query.dim()}-D query tensor"
        )
    batched = query.dim() == 3
    rank, kind = (3, "batched (3-D)") if batched else (2, "unbatched (2-D)")
    if key.dim() != rank or value.dim() != rank:
        raise ValueError(
            f"{_NAME}: For {kind} `query`, expected `key` and `value` to be {rank}-D but found {key.dim()}-D and "
            f"{value.dim()}-D tensors respectively"
        )
    if key_padding_mask is not None and key_padding_mask.dim() != rank - 1:
        raise ValueError(
            f"{_NAME}: For {kind} `query`, expected `key_padding_mask` to be `None` or {rank - 1}-D but found "
            f"{key_padding_mask.dim()}-D tensor instead"
        )
    if attn_mask is not None and attn_mask.dim() not in (2, 3):
        raise ValueError(
            f"{_NAME}: For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
            f"{attn_mask.dim()}-D tensor instead"
        )
    if not batched and attn_mask is not None and attn_mask.dim() == 3:
        expected = (num_heads, query.shape[0], key.shape[0])
        if tuple(attn_mask.shape) != expected:
            raise ValueError(f"{_NAME}: Expected `attn_mask` shape to be {expected} but got {tuple(attn_mask.shape)}")
    return batched


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of size ``embed_dim // num_heads`` (PyTorch's MultiheadAttention).

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (attn_output, attn_weights or None)``.
    Shapes: query (L, N, E) ((N, L, E) with ``batch_first``) or unbatched (L, E); key (S, N, kdim),
    value (S, N, vdim); ``key_padding_mask`` (N, S); ``attn_mask`` (L, S) or (N * num_heads, L, S).
    ``is_causal`` is a hint that ``attn_mask`` is the causal mask (which must then be given).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                f"num_heads={num_heads} instead"
            )
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError(f"embed_dim must be divisible by num_heads, got {embed_dim} and {num_heads}")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(munet.empty((3 * embed_dim, embed_dim), **factory))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(munet.empty((embed_dim, embed_dim), **factory))
            self.k_proj_weight = Parameter(munet.empty((embed_dim, self.kdim), **factory))
            self.v_proj_weight = Parameter(munet.empty((embed_dim, self.vdim), **factory))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(munet.empty(3 * embed_dim, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **factory)
        if add_bias_kv:
            self.bias_k = Parameter(munet.empty((1, 1, embed_dim), **factory))
            self.bias_v = Parameter(munet.empty((1, 1, embed_dim), **factory))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        batched = isinstance(query, Tensor) and query.dim() == 3
        if batched and self.batch_first:
            query, key, value = (x.transpose(0, 1) if isinstance(x, Tensor) else x for x in (query, key, value))
        separate = not self._qkv_same_embed_dim
        output, weights = multi_head_attention_forward(
            query,
            key,
            value,
            self.embed_dim,
            self.num_heads,
            self.in_proj_weight,
            self.in_proj_bias,
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
            self.dropout,
            self.out_proj.weight,
            self.out_proj.bias,
            training=self.training,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            use_separate_proj_weight=separate,
            q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
        )
        if batched and self.batch_first:
            output = output.transpose(0, 1)
        return output, weights


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """PyTorch's ``F.multi_head_attention_forward``: the computation of ``MultiheadAttention`` with
    its weights passed in. Inputs are (L, N, E) / (S, N, kdim) / (S, N, vdim), or unbatched
    (L, E); ``static_k``/``static_v`` (N * num_heads, S, head_dim) replace the projected keys and
    values. Returns ``(attn_output, attn_weights or None)``."""
    batched = _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", attn_mask, "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError(
            f"{_NAME}: Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
            "method `generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # scaled_dot_product_attention builds the causal mask itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is no longer causal
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    if query.shape[-1] != embed_dim_to_check:
        raise RuntimeError(
            f"{_NAME}: was expecting embedding dimension of {embed_dim_to_check}, but got {query.shape[-1]}"
        )
    if embed_dim_to_check % num_heads:
        raise RuntimeError(f"{_NAME}: embed_dim {embed_dim_to_check} not divisible by num_heads {num_heads}")
    projections = _projection_weights(
        embed_dim_to_check,
        in_proj_weight,
        in_proj_bias,
        use_separate_proj_weight,
        q_proj_weight,
        k_proj_weight,
        v_proj_weight,
    )
    heads = _Heads(num_heads, bias_k, bias_v, add_zero_attn, static_k, static_v, out_proj_weight, out_proj_bias)
    output, weights = _attend(
        query,
        key,
        value,
        projections,
        heads,
        key_padding_mask,
        attn_mask,
        need_weights,
        average_attn_weights,
        is_causal,
        dropout_p if training else 0.0,
    )
    if not batched:
        output = output.squeeze(1)
        weights = weights.squeeze(0) if weights is not None else None
    return output, weights


class _Heads(NamedTuple):
    """What multi_head_attention_forward applies around the attention proper."""

    num_heads: int
    bias_k: Tensor | None
    bias_v: Tensor | None
    add_zero_attn: bool
    static_k: Tensor | None
    static_v: Tensor | None
    out_weight: Tensor
    out_bias: Tensor | None


def _projection_weights(e, in_proj_weight, in_proj_bias, separate, w_q, w_k, w_v):
    """``((w_q, b_q), (w_k, b_k), (w_v, b_v))`` from the packed or the separate weights."""
    b_q, b_k, b_v = (
        (None, None, None)
        if in_proj_bias is None
        else (
            in_proj_bias[:e],
            in_proj_bias[e : 2 * e],
            in_proj_bias[2 * e :],
        )
    )
    if not separate:
        if in_proj_weight is None:
            raise RuntimeError(f"{_NAME}: use_separate_proj_weight is False but in_proj_weight is None")
        w_q, w_k, w_v = in_proj_weight[:e], in_proj_weight[e : 2 * e], in_proj_weight[2 * e :]
    elif w_q is None or w_k is None or w_v is None:
        raise RuntimeError(
            f"{_NAME}: use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight is None"
        )
    return (w_q, b_q), (w_k, b_k), (w_v, b_v)


def _check_inputs(query: Tensor, key: Tensor, value: Tensor, projections) -> None:
    for role, x, (w, _) in (("key", key, projections[1]), ("value", value, projections[2])):
        if x.shape[-1] != w.shape[1]:
            raise RuntimeError(f"{_NAME}: expected {role} with last dimension {w.shape[1]}, got shape {list(x.shape)}")
    if tuple(key.shape[:2]) != tuple(value.shape[:2]):
        raise RuntimeError(
            f"{_NAME}: key's sequence and batch dims {list(key.shape[:2])} do not match value's {list(value.shape[:2])}"
        )
    if tuple(query.shape[1:2]) != tuple(key.shape[1:2]):
        raise RuntimeError(f"{_NAME}: query batch size {query.shape[1]} does not match key's {key.shape[1]}")


def _static(x: Tensor, given: Tensor | None, role: str, batch_heads: int, head_dim: int) -> Tensor:
    """The (N * heads, S, head_dim) keys or values: projected, or the given static ones."""
    if given is None:
        return x.reshape(x.shape[0], batch_heads, head_dim).transpose(0, 1)
    if given.dim() != 3 or given.shape[0] != batch_heads or given.shape[2] != head_dim:
        raise RuntimeError(
            f"{_NAME}: expecting static_{role} of shape ({batch_heads}, S, {head_dim}), got {list(given.shape)}"
        )
    return given


def _attend(
    query, key, value, projections, heads, key_padding_mask, attn_mask, need_weights, average, is_causal, dropout_p
):
    """The attention proper, on (L, N, E) inputs; masks are already additive float masks."""
    _check_inputs(query, key, value, projections)
    tgt_len, bsz, embed_dim = query.shape
    num_heads = heads.num_heads
    head_dim = embed_dim // num_heads
    (w_q, b_q), (w_k, b_k), (w_v, b_v) = projections
    q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
    src_len = k.shape[0]
    if attn_mask is not None:
        attn_mask = _check_attn_mask(attn_mask, bsz * num_heads, tgt_len, src_len)
    if heads.bias_k is not None and heads.bias_v is not None:
        if heads.static_k is not None or heads.static_v is not None:
            raise RuntimeError(f"{_NAME}: bias cannot be added to static key or value")
        k = munet.cat([k, heads.bias_k.expand(1, bsz, embed_dim)])
        v = munet.cat([v, heads.bias_v.expand(1, bsz, embed_dim)])
        attn_mask = F.pad(attn_mask, (0, 1)) if attn_mask is not None else None
        key_padding_mask = F.pad(key_padding_mask, (0, 1)) if key_padding_mask is not None else None
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _static(k, heads.static_k, "k", bsz * num_heads, head_dim)
    v = _static(v, heads.static_v, "v", bsz * num_heads, head_dim)
    if heads.add_zero_attn:
        zeros = munet.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k = munet.cat([k, zeros], dim=1)
        v = munet.cat([v, zeros], dim=1)
        attn_mask = F.pad(attn_mask, (0, 1)) if attn_mask is not None else None
        key_padding_mask = F.pad(key_padding_mask, (0, 1)) if key_padding_mask is not None else None
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise RuntimeError(
                f"{_NAME}: expected key_padding_mask of shape {(bsz, src_len)} (N, S), got "
                f"{list(key_padding_mask.shape)}"
            )
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if need_weights:
        scores = (q * math.sqrt(1.0 / head_dim)) @ k.transpose(-2, -1)
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = F.softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        out = weights @ v
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = F.linear(out, heads.out_weight, heads.out_bias).reshape(tgt_len, bsz, embed_dim)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average:
            weights = weights.mean(dim=1)
        return out, weights
    if attn_mask is not None:
        if attn_mask.shape[0] == 1:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = F.linear(out, heads.out_weight, heads.out_bias).reshape(tgt_len, bsz, embed_dim)
    return out, None


def _check_attn_mask(attn_mask: Tensor, batch_heads: int, tgt_len: int, src_len: int) -> Tensor:
    if attn_mask.dim() == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(
                f"{_NAME}: The shape of the 2D attn_mask is {list(attn_mask.shape)}, but should be "
                f"{(tgt_len, src_len)}."
            )
        return attn_mask.unsqueeze(0)
    expected = (batch_heads, tgt_len, src_len)
    if tuple(attn_mask.shape) != expected:
        raise RuntimeError(
            f"{_NAME}: The shape of the 3D attn_mask is {list(attn_mask.shape)}, but should be {expected}."
        )
    return attn_mask

"""Embedding lookup (``F.embedding``) and ``F.one_hot``.

``embedding`` is a composite (a check of the indices and a row gather, ``index_select``) whose
gradient is the composite ``embedding_backward`` (the rows added into a zero table with
``index_add``, skipping ``padding_idx`` and optionally divided by index frequency, like PyTorch's
``embedding_dense_backward``). The two are adjoint, so each is the other's gradient and double
backward works. cpu and vulkan keep one-kernel forms of both, tested against the decompositions.
With ``sparse=True`` the gradient is instead a sparse COO tensor (``munet.sparse``) holding one row
per looked-up index (PyTorch's ``embedding_sparse_backward``); it cannot be differentiated again.
"""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet.autograd.grad_mode import no_grad
from munet.ops._registry import Meta, apply, define
from munet.ops.checks import check_values
from munet.ops.creation import tensor, zeros

# torch.embedding is (weight, indices, ...), the reverse of F.embedding; not exported as munet.embedding.
__all__ = ["embedding_renorm_"]
__functional__ = ["embedding", "embedding_bag", "one_hot"]
__tensor_methods__: list[str] = []

_INDEX_DTYPES = (D.int64, D.int32)

# Every backend's embedding kernel checks its indices (on the device) and raises this, PyTorch's wording.
INDEX_OUT_OF_RANGE = "embedding: index out of range in self (indices must be in [0, {size}), got {value})"


def _check_indices(indices, op: str) -> None:
    if indices.dtype not in _INDEX_DTYPES:
        raise RuntimeError(f"{op}: expected indices of dtype int64 or int32, got {indices.dtype.name}")


def _embedding_meta(weight, indices, **_):
    if weight.ndim != 2:
        raise RuntimeError(
            f"embedding: expected weight of rank 2 (num_embeddings, embedding_dim), got shape {list(weight.shape)}"
        )
    _check_indices(indices, "embedding")
    return Meta(tuple(indices.shape) + (weight.shape[1],), weight.dtype)


def _embedding_backward(ctx, g):
    indices = ctx.saved_tensor("indices")
    attrs = dict(ctx.attrs)
    num_weights = ctx.input_shapes[0][0]
    if attrs.pop("sparse"):
        return _sparse_weight_grad(g, indices, num_weights, **attrs), None
    return apply(embedding_backward_op, g, indices, num_weights=num_weights, **attrs), None


def _sparse_weight_grad(g, indices, num_weights: int, *, padding_idx, scale_grad_by_freq):
    """The weight's gradient as a sparse COO tensor: row ``k`` of ``g`` at index ``indices[k]`` (not
    coalesced; ``padding_idx``'s entries left out), PyTorch's ``embedding_sparse_backward``."""
    from munet.autograd.grad_mode import is_grad_enabled
    from munet.ops._registry import refuse_under_trace
    from munet.sparse.coo import SparseCOOTensor

    if scale_grad_by_freq:
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
    refuse_under_trace("embedding", "sparse=True gradients are not supported inside munet.compile")
    if is_grad_enabled():
        raise RuntimeError(
            "embedding: a sparse=True gradient cannot be differentiated again (create_graph=True); use sparse=False"
        )
    flat = indices.reshape(-1).to(D.int64)
    rows = g.reshape(-1, g.shape[-1])
    if padding_idx is not None:
        keep = flat != padding_idx
        flat, rows = flat[keep], rows[keep]
    return SparseCOOTensor._build(flat.unsqueeze(0), rows, (num_weights, g.shape[-1]), False)


def _check_in_range(indices, size: int, message: str) -> None:
    from munet.ops.checks import IndexOutOfRangeError, check_values

    check_values((indices >= 0) & (indices < size), message, IndexOutOfRangeError, indices)


def _embedding_decomposition(weight, indices, *, padding_idx, scale_grad_by_freq, sparse):
    """``weight``'s rows at ``indices`` (``padding_idx``, the frequency scaling and ``sparse`` only shape
    the gradient)."""
    _check_in_range(indices, weight.shape[0], INDEX_OUT_OF_RANGE.format(size=weight.shape[0], value="{value}"))
    rows = weight.index_select(0, indices.reshape(-1))
    return rows.reshape(tuple(indices.shape) + (weight.shape[1],))


embedding_op = define(
    "embedding",
    inputs=("weight", "indices"),
    meta=_embedding_meta,
    backward=_embedding_backward,
    saves=("indices",),
    decomposition=_embedding_decomposition,
)


def _embedding_backward_meta(grad, indices, *, num_weights, padding_idx, scale_grad_by_freq):
    return Meta((num_weights, grad.shape[-1]), grad.dtype)


def _embedding_backward_backward(ctx, gg):
    indices = ctx.saved_tensor("indices")
    padding_idx, by_freq = ctx.attrs["padding_idx"], ctx.attrs["scale_grad_by_freq"]
    if by_freq:
        # the adjoint of "divide by frequency, then scatter" is "gather, then divide by frequency"
        ones = gg.new_ones(tuple(indices.shape) + (1,))
        counts = apply(
            embedding_backward_op, ones, indices, num_weights=gg.shape[0], padding_idx=None, scale_grad_by_freq=False
        )
        gg = gg / counts.clamp_min(1.0)
    out = apply(embedding_op, gg, indices, padding_idx=None, scale_grad_by_freq=False, sparse=False)
    if padding_idx is not None:
        out = out * (indices != padding_idx).unsqueeze(-1).to(out.dtype)
    return out, None


def _embedding_backward_decomposition(grad, indices, *, num_weights, padding_idx, scale_grad_by_freq):
    """The rows of ``grad`` added into a zero ``(num_weights, D)`` table at ``indices`` (a row
    looked up by several indices gets their sum, an unused row +0.0); with ``scale_grad_by_freq``
    each row first divided by how often its index occurs; ``padding_idx``'s row stays +0.0."""
    from munet.ops.elementwise import where

    message = f"embedding_backward: index {{value}} is out of bounds for dimension 0 with size {num_weights}"
    _check_in_range(indices, num_weights, message)
    flat = indices.reshape(-1)
    rows = grad.reshape(-1, grad.shape[-1])
    if scale_grad_by_freq:
        ones = rows.new_ones((flat.shape[0],))
        counts = zeros((num_weights,), dtype=rows.dtype, device=rows.device).index_add(0, flat, ones)
        rows = rows / counts.index_select(0, flat).unsqueeze(1)
    if padding_idx is not None:
        rows = where((flat != padding_idx).unsqueeze(1), rows, 0.0)
    return zeros((num_weights, rows.shape[1]), dtype=rows.dtype, device=rows.device).index_add(0, flat, rows)


embedding_backward_op = define(
    "embedding_backward",
    inputs=("grad", "indices"),
    meta=_embedding_backward_meta,
    backward=_embedding_backward_backward,
    saves=("indices",),
    decomposition=_embedding_backward_decomposition,
)


def embedding_renorm_(weight, indices, max_norm: float, norm_type: float):
    """``torch.embedding_renorm_``: rescale the rows of ``weight`` looked up by ``indices`` to norm at most
    ``max_norm`` (``max_norm / (norm + 1e-7)``), in place and without gradient; returns ``weight``."""
    import munet

    with no_grad():
        flat = indices.reshape(-1).to(D.int64)
        rows = weight.index_select(0, flat)
        norms = rows.norm(norm_type, 1, keepdim=True)
        scale = munet.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).to(weight.dtype)
        weight.index_copy_(0, flat, rows * scale)
    return weight


def embedding(
    input,
    weight,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
):
    """Rows of ``weight`` at ``input`` (int64/int32 indices): output shape ``(*input.shape, D)``.

    ``padding_idx``'s row gets no gradient; ``max_norm`` renormalizes the looked-up rows of
    ``weight`` in place first (without gradient), like PyTorch. ``sparse=True`` makes ``weight``'s
    gradient a sparse COO tensor (see ``docs/sparse.md``).
    """
    _check_indices(input, "embedding")
    num = weight.shape[0] if weight.ndim >= 1 else 0
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise ValueError(f"embedding: padding_idx must be within num_embeddings ({num}), got {padding_idx}")
        padding_idx = padding_idx % num
    if max_norm is not None:  # the renorm reads the rows first: check the indices before it does
        message = INDEX_OUT_OF_RANGE.format(size=num, value="{value}")
        check_values((input >= 0) & (input < num), message, IndexError, input)
        embedding_renorm_(weight, input, float(max_norm), float(norm_type))
    return apply(
        embedding_op,
        weight,
        input,
        padding_idx=padding_idx,
        scale_grad_by_freq=bool(scale_grad_by_freq),
        sparse=bool(sparse),
    )


# one_hot --------------------------------------------------------------------------------------------------


def _one_hot_decomposition(x, *, num_classes):
    """``x[..., None] == arange(num_classes)`` as int64."""
    from munet.ops.creation import arange

    return (x.unsqueeze(-1) == arange(num_classes, device=x.device)).to(D.int64)


one_hot_op = define(
    "one_hot",
    meta=lambda x, *, num_classes: Meta(tuple(x.shape) + (num_classes,), D.int64),
    decomposition=_one_hot_decomposition,
)


def one_hot(tensor, num_classes: int = -1):
    """``(*, num_classes)`` int64 tensor with a 1 at each value of ``tensor`` (``-1`` infers ``max + 1``)."""
    if tensor.dtype is not D.int64:
        raise RuntimeError(f"one_hot is only applicable to index tensor of type LongTensor, got {tensor.dtype.name}")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("one_hot: can not infer total number of classes from empty tensor")
        with no_grad():  # the output's shape depends on the values: a host read (refused while tracing)
            num_classes = int(tensor.max()) + 1
    check_values(tensor >= 0, "one_hot: class values must be non-negative, got {value}", RuntimeError, tensor)
    message = f"one_hot: class values must be smaller than num_classes ({num_classes}), got {{value}}"
    check_values(tensor < num_classes, message, RuntimeError, tensor)
    return apply(one_hot_op, tensor, num_classes=int(num_classes))


def _bag_layout(input, offsets, include_last_offset: bool, op: str):
    """Flat indices plus, per flat position, its bag (-1 outside every bag), and the bag count."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                f"{op}: if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed "
                f"length sequences. However, found offsets of type {type(offsets)}"
            )
        bags, length = input.shape
        return input.reshape(-1), np.repeat(np.arange(bags), length), bags
    if input.ndim != 1:
        raise ValueError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if offsets is None:
        raise ValueError(f"{op}: offsets has to be a 1D Tensor but got None")
    if offsets.ndim != 1:
        raise ValueError(f"{op}: offsets has to be a 1D Tensor, got shape {list(offsets.shape)}")
    if offsets.dtype.is_floating_point or offsets.dtype.name == "bool":
        raise TypeError(f"{op}: offsets must be an integer tensor, got {offsets.dtype.name}")
    total = input.shape[0]
    bounds = offsets.detach().cpu().numpy().astype(np.int64)
    if not include_last_offset:
        bounds = np.append(bounds, total)
    bags = max(len(bounds) - 1, 0)
    if len(bounds) and bounds[0] != 0:
        raise ValueError(
            f"{op}: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
            f"position 0. However, got {int(bounds[0])}"
        )
    if np.any(np.diff(bounds) < 0) or (len(bounds) and bounds[-1] > total):
        raise ValueError(f"{op}: offsets must be non-decreasing and at most len(input)={total}, got {bounds.tolist()}")
    bag_of = np.full(total, -1, dtype=np.int64)
    if bags:
        bag_of[: bounds[-1]] = np.repeat(np.arange(bags), np.diff(bounds))
    return input, bag_of, bags


def embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type: float = 2, scale_grad_by_freq: bool = False,
    mode: str = "mean", sparse: bool = False, per_sample_weights=None, include_last_offset: bool = False,
    padding_idx=None,
):  # fmt: skip
    """Sum, mean or max of each bag of embedding rows (PyTorch's ``F.embedding_bag``).

    Composed from differentiable ops: ``embedding`` for the lookup and max-norm
    renormalization, ``index_select`` to drop padding entries, ``index_add`` for sums and
    ``scatter_reduce('amax')`` for maxima. The bag layout is read from the indices and offsets
    on the host, so it runs eagerly but cannot be traced. ``sparse=True`` (sum and mean) makes
    ``weight``'s gradient a sparse COO tensor with a row per index, padding entries left out.
    """
    op = "embedding_bag"
    if weight.ndim != 2:
        raise ValueError(f"{op}: weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if per_sample_weights is not None and tuple(per_sample_weights.shape) != tuple(input.shape):
        raise ValueError(
            f"{op}: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, then it must have the "
            f"same shape as the input ({list(input.shape)})"
        )
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError(f"{op}: max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError(f"{op}: max mode does not support sparse weights")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            f"{op}: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' "
            f"(got mode='{mode}')"
        )
    flat, bag_of, bags = _bag_layout(input, offsets, include_last_offset, op)
    # The lookup covers every index (so max_norm and gradient frequencies see all of them, like
    # PyTorch); entries outside every bag and padding entries are then dropped. A sparse gradient
    # leaves padding entries out, as PyTorch's does.
    rows = embedding(flat, weight, padding_idx if sparse else None, max_norm, norm_type, scale_grad_by_freq, sparse)
    keep = bag_of >= 0
    if padding_idx is not None:
        keep &= flat.detach().cpu().numpy() != padding_idx
    positions = tensor(np.nonzero(keep)[0], device=weight.device)
    rows = rows.index_select(0, positions)
    bag_ids = tensor(bag_of[keep], device=weight.device)
    dim = weight.shape[1]
    out = zeros((bags, dim), dtype=weight.dtype, device=weight.device)
    if mode == "max":
        index = bag_ids.unsqueeze(1).expand(bag_ids.shape[0], dim)
        return out.scatter_reduce(0, index, rows, "amax", include_self=False)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1).index_select(0, positions).unsqueeze(1)
    out = out.index_add(0, bag_ids, rows)
    if mode == "mean":
        counts = np.maximum(np.bincount(bag_of[keep], minlength=bags), 1)
        out = out / tensor(counts, dtype=weight.dtype, device=weight.device).unsqueeze(1)
    return out

"""Lookup-table layers: ``Embedding`` and ``EmbeddingBag``.

``EmbeddingBag`` is composed from existing differentiable ops (``embedding`` for the row
lookup and max-norm renormalization, ``index_select`` to drop padding entries, ``index_add``
for sums, ``scatter_reduce('amax')`` for maxima); the bag layout is read from the indices and
offsets on the host, so it runs eagerly but cannot be traced.
"""

from __future__ import annotations

import numpy as np

from munet.autograd.grad_mode import no_grad
from munet.nn import functional as F
from munet.nn import init
from munet.nn.module import Module
from munet.nn.parameter import Parameter
from munet.ops.creation import empty, tensor, zeros

__all__ = ["Embedding", "EmbeddingBag"]


def _wrap_padding_idx(padding_idx, num_embeddings: int, layer: str):
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"{layer}: padding_idx must be within num_embeddings ({num_embeddings}), got {padding_idx}")
    return padding_idx % num_embeddings


def _init_weight(module, num_embeddings, embedding_dim, _weight, freeze, device, dtype):
    name = type(module).__name__
    if _weight is None:
        module.weight = Parameter(empty((num_embeddings, embedding_dim), device=device, dtype=dtype), not freeze)
        module.reset_parameters()
        return
    if list(_weight.shape) != [num_embeddings, embedding_dim]:
        raise ValueError(
            f"{name}: shape of weight {list(_weight.shape)} does not match num_embeddings and embedding_dim "
            f"[{num_embeddings}, {embedding_dim}]"
        )
    module.weight = Parameter(_weight, requires_grad=not freeze)


class _EmbeddingBase(Module):
    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)


class Embedding(_EmbeddingBase):
    """A ``(num_embeddings, embedding_dim)`` table indexed by integer tensors.

    Weights start ``N(0, 1)``; the ``padding_idx`` row starts at zero and gets no gradient.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight=None,
        _freeze: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _wrap_padding_idx(padding_idx, num_embeddings, "Embedding")
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        _init_weight(self, num_embeddings, embedding_dim, _weight, _freeze, device, dtype)

    def forward(self, input):
        return F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse
        )

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(
        cls,
        embeddings,
        freeze: bool = True,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
    ) -> Embedding:
        """An ``Embedding`` whose weight shares ``embeddings`` (2-D); frozen unless ``freeze=False``."""
        if embeddings.ndim != 2:
            raise ValueError(
                f"Embedding.from_pretrained: embeddings are expected to be 2-dimensional, got shape "
                f"{list(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        return cls(
            num_embeddings=rows,
            embedding_dim=cols,
            _weight=embeddings,
            _freeze=freeze,
            padding_idx=padding_idx,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            sparse=sparse,
        )


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
    for b in range(bags):
        bag_of[bounds[b] : bounds[b + 1]] = b
    return input, bag_of, bags


def _embedding_bag(
    input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, per_sample_weights, include_last_offset,
    padding_idx,
):  # fmt: skip
    """``F.embedding_bag``'s semantics: reduce the embedding rows of each bag to one row."""
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
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            f"{op}: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' "
            f"(got mode='{mode}')"
        )
    flat, bag_of, bags = _bag_layout(input, offsets, include_last_offset, op)
    # The lookup covers every index (so max_norm and gradient frequencies see all of them, like
    # PyTorch); entries outside every bag and padding entries are then dropped.
    rows = F.embedding(flat, weight, None, max_norm, norm_type, scale_grad_by_freq)
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


class EmbeddingBag(_EmbeddingBase):
    """Sums, means or maxima of bags of embeddings, without materializing the per-index rows' layout.

    ``input`` is either 2-D ``(B, N)`` (B bags of N indices) or 1-D with ``offsets`` giving
    each bag's start (``include_last_offset=True``: offsets has B + 1 entries, the last the
    end). ``padding_idx`` entries are left out of bags (and of means' counts); empty bags
    give zeros. ``per_sample_weights`` (``mode='sum'`` only) scales each entry.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight=None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if sparse:
            raise NotImplementedError("EmbeddingBag: sparse=True gradients are not supported by munet")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _wrap_padding_idx(padding_idx, num_embeddings, "EmbeddingBag")
        _init_weight(self, num_embeddings, embedding_dim, _weight, False, device, dtype)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def forward(self, input, offsets=None, per_sample_weights=None):
        return _embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        )

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings!r}, {self.embedding_dim!r}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s

    @classmethod
    def from_pretrained(
        cls,
        embeddings,
        freeze: bool = True,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> EmbeddingBag:
        """An ``EmbeddingBag`` whose weight shares ``embeddings`` (2-D); frozen unless ``freeze=False``."""
        if embeddings.ndim != 2:
            raise ValueError(
                f"EmbeddingBag.from_pretrained: embeddings are expected to be 2-dimensional, got shape "
                f"{list(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        bag = cls(
            num_embeddings=rows,
            embedding_dim=cols,
            _weight=embeddings,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            mode=mode,
            sparse=sparse,
            include_last_offset=include_last_offset,
            padding_idx=padding_idx,
        )
        bag.weight.requires_grad = not freeze
        return bag

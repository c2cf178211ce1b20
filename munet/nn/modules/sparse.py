"""Lookup-table layers: ``Embedding`` and ``EmbeddingBag`` (over ``F.embedding`` and ``F.embedding_bag``)."""

from __future__ import annotations

from munet.autograd.grad_mode import no_grad
from munet.nn import functional as F
from munet.nn import init
from munet.nn.module import Module
from munet.nn.parameter import Parameter
from munet.ops.creation import empty

__all__ = ["Embedding", "EmbeddingBag"]


def _pretrained_shape(embeddings, layer: str) -> tuple[int, int]:
    """``(num_embeddings, embedding_dim)`` of a pretrained table, which must be 2-D."""
    if embeddings.ndim != 2:
        raise ValueError(
            f"{layer}.from_pretrained: embeddings are expected to be 2-dimensional, got shape {list(embeddings.shape)}"
        )
    rows, cols = embeddings.shape
    return rows, cols


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
        rows, cols = _pretrained_shape(embeddings, "Embedding")
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
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            self.sparse,
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
        rows, cols = _pretrained_shape(embeddings, "EmbeddingBag")
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

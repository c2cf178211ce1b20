"""``munet.nn.utils.rnn``: variable-length sequences, padded and packed, as PyTorch's.

A :class:`PackedSequence` holds the time steps of a batch of sequences sorted by decreasing
length, step after step: ``data`` is ``(sum(batch_sizes), *)`` and ``batch_sizes[t]`` says how many
sequences are still running at step ``t`` (always a prefix of the sorted batch).
``sorted_indices[i]`` is the original position of the ``i``-th sorted sequence and
``unsorted_indices`` its inverse. ``nn.RNN``, ``nn.LSTM`` and ``nn.GRU`` accept one and return one.

Lengths and batch sizes are host data (an int64 CPU tensor, or a list), as in PyTorch; every
rearrangement of the values is an ``index_select``, so gradients flow to the inputs. Among
sequences of equal length the sort keeps their original order (PyTorch leaves that order
unspecified; the unpacked results do not depend on it).
"""

from __future__ import annotations

from typing import NamedTuple

import munet
from munet import _dtype as D
from munet._tensor import Tensor

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedFields):
    """PyTorch's ``PackedSequence(data, batch_sizes, sorted_indices=None, unsorted_indices=None)``;
    build one with :func:`pack_padded_sequence` or :func:`pack_sequence`."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:  # PackedSequence((data, batch_sizes, ...)) as PyTorch also takes
            return cls(*data)
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """``data.to(...)``; the indices follow to its device, ``batch_sizes`` stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        moved = [None if i is None else i.to(data.device) for i in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, *moved)

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def cuda(self, device=None) -> PackedSequence:
        return self.to("cuda" if device is None else device)

    def float(self) -> PackedSequence:
        return self.to(D.float32)

    def double(self) -> PackedSequence:
        return self.to(D.float64)

    def half(self) -> PackedSequence:
        return self.to(D.float16)

    def bfloat16(self) -> PackedSequence:
        return self.to(D.bfloat16)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The permutation that undoes ``permutation`` (``out[permutation[i]] = i``)."""
    if permutation is None:
        return None
    order = permutation.tolist()
    inverse = [0] * len(order)
    for i, p in enumerate(order):
        inverse[p] = i
    return munet.tensor(inverse, dtype=D.int64, device=permutation.device)


def _lengths_list(lengths, where: str) -> list[int]:
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1:
            raise ValueError(f"{where}: expected a 1-D lengths tensor, got shape {tuple(lengths.shape)}")
        return [int(n) for n in lengths.tolist()]
    return [int(n) for n in lengths]


def _index(rows: list[int], device) -> Tensor:
    return munet.tensor(rows, dtype=D.int64, device=device)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False, enforce_sorted: bool = True):
    """Pack a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) of sequences whose
    lengths are ``lengths``. With ``enforce_sorted`` the lengths must be decreasing; otherwise the
    batch is sorted here and ``sorted_indices`` records the order."""
    lengths = _lengths_list(lengths, "pack_padded_sequence")
    batch_dim = 0 if batch_first else 1
    if len(lengths) != input.size(batch_dim):
        raise ValueError(
            f"pack_padded_sequence: expected {input.size(batch_dim)} lengths (the batch size), got {len(lengths)}"
        )
    if any(n <= 0 for n in lengths):
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    if max(lengths, default=0) > input.size(1 - batch_dim):
        raise ValueError(
            f"pack_padded_sequence: a length ({max(lengths)}) exceeds the padded length {input.size(1 - batch_dim)}"
        )
    sorted_indices = None
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
                "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement "
                "if you do not need ONNX exportability."
            )
        order = list(range(len(lengths)))
    else:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        sorted_indices = _index(order, input.device)
    steps = input if not batch_first else input.transpose(0, 1)
    batch = steps.size(1)
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(max(lengths, default=0))]
    # step t of sorted sequence i is row t * batch + order[i] of the flattened (T, B, *) input
    rows = [t * batch + order[i] for t, b in enumerate(batch_sizes) for i in range(b)]
    flat = steps.reshape(steps.size(0) * batch, *steps.shape[2:])
    data = flat.index_select(0, _index(rows, input.device))
    return PackedSequence(data, munet.tensor(batch_sizes, dtype=D.int64), sorted_indices, None)


def pad_packed_sequence(
    sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0, total_length: int | None = None
) -> tuple[Tensor, Tensor]:
    """Undo :func:`pack_padded_sequence`: ``(padded, lengths)`` in the original batch order, padded
    with ``padding_value`` to the longest sequence, or to ``total_length``."""
    data, batch_sizes = sequence.data, sequence.batch_sizes.tolist()
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {steps}"
            )
        steps = total_length
    batch = batch_sizes[0] if batch_sizes else 0
    unsorted = sequence.unsorted_indices.tolist() if sequence.unsorted_indices is not None else list(range(batch))
    padded_data = munet.cat(
        [data, munet.full((1, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)]
    )
    fill = data.size(0)  # the row of padding_value
    offsets = [0]
    for b in batch_sizes:
        offsets.append(offsets[-1] + b)
    rows = []
    for t in range(steps):
        running = batch_sizes[t] if t < len(batch_sizes) else 0
        rows.extend(offsets[t] + unsorted[j] if unsorted[j] < running else fill for j in range(batch))
    out = padded_data.index_select(0, _index(rows, data.device)).reshape(steps, batch, *data.shape[1:])
    sorted_lengths = [sum(1 for b in batch_sizes if b > i) for i in range(batch)]
    lengths = munet.tensor([sorted_lengths[unsorted[j]] for j in range(batch)], dtype=D.int64)
    return (out.transpose(0, 1) if batch_first else out), lengths


def pad_sequence(
    sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"
) -> Tensor:
    """Stack tensors of shapes ``(L_i, *)`` into ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``),
    padding each with ``padding_value`` at its end (``padding_side="right"``) or start."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    trailing = tuple(sequences[0].shape[1:])
    for s in sequences:
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(
                f"pad_sequence: every sequence must have trailing shape {trailing}, got {tuple(s.shape[1:])}"
            )
    longest = max(s.size(0) for s in sequences)
    padded = []
    for s in sequences:
        fill = munet.full((longest - s.size(0), *trailing), padding_value, dtype=s.dtype, device=s.device)
        padded.append(munet.cat([s, fill] if padding_side == "right" else [fill, s]))
    return munet.stack(padded, dim=0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list[Tensor]:
    """The list of sequences of :func:`pad_sequence` (right padding), each cut to its length."""
    batch = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [batch[i, :n] for i, n in enumerate(_lengths_list(lengths, "unpad_sequence"))]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of tensors of shapes ``(L_i, *)`` (decreasing ``L_i`` unless ``enforce_sorted=False``)."""
    sequences = list(sequences)
    lengths = [s.size(0) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of tensors that :func:`pack_sequence` packed, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)

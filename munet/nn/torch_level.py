"""The ``torch.*`` entry points of nn functions, with ATen's positional signatures.

PyTorch exposes the kernels behind ``nn.functional`` at the top level with their ATen schemas:
integer reductions (0 ``none``, 1 ``mean``, 2 ``sum``), ``batch_norm(input, weight, bias,
running_mean, running_var, training, momentum, eps, cudnn_enabled)``, ``embedding(weight,
indices, ...)``, the multi-layer recurrences ``lstm``/``gru``/``rnn_tanh``/``rnn_relu`` over a
flat parameter list, and so on. Each one here checks its arguments and calls the one MuNet
implementation of the function (``cudnn_enabled`` has no effect: there is no cuDNN).
"""

from __future__ import annotations

import numpy as np

import munet
import munet.nn.functional as F
from munet._tensor import Tensor
from munet.nn.channel_shuffle import channel_shuffle
from munet.nn.ctc import ctc_loss as _ctc_loss
from munet.nn.modules.rnn import cell_step, run_layers
from munet.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

__all__ = [
    "adaptive_max_pool1d",
    "batch_norm",
    "binary_cross_entropy_with_logits",
    "channel_shuffle",
    "constant_pad_nd",
    "cosine_embedding_loss",
    "ctc_loss",
    "embedding",
    "embedding_bag",
    "gru",
    "gru_cell",
    "hinge_embedding_loss",
    "instance_norm",
    "kl_div",
    "lstm",
    "lstm_cell",
    "margin_ranking_loss",
    "poisson_nll_loss",
    "rnn_relu",
    "rnn_relu_cell",
    "rnn_tanh",
    "rnn_tanh_cell",
    "triplet_margin_loss",
]

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value, op: str) -> str:
    if isinstance(value, bool) or value not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {value!r}")
    return _REDUCTIONS[value]


# normalization ---------------------------------------------------------------------------------------
def batch_norm(input, weight, bias, running_mean, running_var, training: bool, momentum: float, eps: float,
               cudnn_enabled: bool):  # fmt: skip
    """``torch.batch_norm``: ``F.batch_norm`` with ATen's argument order."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool):  # fmt: skip
    """``torch.instance_norm``: ``F.instance_norm`` with ATen's argument order."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


# embeddings ------------------------------------------------------------------------------------------
def embedding(weight, indices, padding_idx: int = -1, scale_grad_by_freq: bool = False, sparse: bool = False):
    """``torch.embedding``: rows of ``weight`` at ``indices``; a negative ``padding_idx`` means none (ATen's)."""
    return F.embedding(
        indices, weight, padding_idx if padding_idx >= 0 else None, None, 2.0, scale_grad_by_freq, sparse
    )


def embedding_bag(weight, indices, offsets, scale_grad_by_freq: bool = False, mode: int = 0, sparse: bool = False,
                  per_sample_weights=None, include_last_offset: bool = False, padding_idx=None):  # fmt: skip
    """``torch.embedding_bag``: ``(output, offset2bag, bag_size, max_indices)`` with ``mode`` 0 sum, 1 mean, 2 max.

    ``output`` is ``F.embedding_bag``'s. The other three are the bookkeeping of PyTorch's generic CPU
    kernel: the bag of each index, the size of each bag (zeros for sum), and for max the row of
    ``weight`` that gave each maximum (for mean, the bag sizes again; zeros for sum). PyTorch's
    float32 fast path for sum leaves ``offset2bag`` empty; here it is always filled.
    """
    names = {0: "sum", 1: "mean", 2: "max"}
    if mode not in names:
        raise ValueError(f"embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got {mode!r}")
    if indices.ndim != 1:
        raise ValueError(f"embedding_bag: expected 1-D indices with offsets, got shape {list(indices.shape)}")
    output = F.embedding_bag(indices, weight, offsets, None, 2, scale_grad_by_freq, names[mode], sparse,
                             per_sample_weights, include_last_offset, padding_idx)  # fmt: skip
    bags = output.shape[0]
    flat = indices.detach().cpu().numpy().astype(np.int64)
    bounds = np.append(offsets.detach().cpu().numpy().astype(np.int64)[:bags], len(flat))
    bag_of = np.repeat(np.arange(bags), np.diff(bounds))
    keep = flat != padding_idx if padding_idx is not None else np.ones(len(flat), dtype=bool)
    sizes = np.bincount(bag_of[keep], minlength=bags)
    long = {"dtype": munet.int64, "device": weight.device}
    if mode == 0:
        return output, munet.tensor(bag_of, **long), munet.zeros(bags, **long), munet.zeros(bags, **long)
    if mode == 1:
        return output, munet.tensor(bag_of, **long), munet.tensor(sizes, **long), munet.tensor(sizes, **long)
    rows = weight.detach().cpu().numpy()[flat]
    max_indices = np.zeros((bags, weight.shape[1]), dtype=np.int64)
    for bag in range(bags):
        members = np.nonzero((bag_of == bag) & keep)[0]
        if len(members):
            max_indices[bag] = flat[members[np.argmax(rows[members], axis=0)]]
    return output, munet.tensor(bag_of, **long), munet.tensor(sizes, **long), munet.tensor(max_indices, **long)


# losses ----------------------------------------------------------------------------------------------
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction: int = 1):
    """``torch.binary_cross_entropy_with_logits`` (integer ``reduction``)."""
    reduction = _reduction(reduction, "binary_cross_entropy_with_logits")
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=reduction, pos_weight=pos_weight)


def kl_div(input, target, reduction: int = 1, *, log_target: bool = False):
    """``torch.kl_div`` (integer ``reduction``; ``mean`` averages over every element, as ATen's)."""
    return F.kl_div(input, target, reduction=_reduction(reduction, "kl_div"), log_target=log_target)


def margin_ranking_loss(input1, input2, target, margin: float = 0.0, reduction: int = 1):
    """``torch.margin_ranking_loss`` (integer ``reduction``)."""
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction, "margin_ranking_loss"))


def hinge_embedding_loss(input, target, margin: float = 1.0, reduction: int = 1):
    """``torch.hinge_embedding_loss`` (integer ``reduction``)."""
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss"))


def cosine_embedding_loss(input1, input2, target, margin: float = 0.0, reduction: int = 1):
    """``torch.cosine_embedding_loss`` (integer ``reduction``)."""
    reduction = _reduction(reduction, "cosine_embedding_loss")
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=reduction)


def poisson_nll_loss(input, target, log_input: bool, full: bool, eps: float, reduction: int):
    """``torch.poisson_nll_loss``: every argument positional and required, as ATen's."""
    reduction = _reduction(reduction, "poisson_nll_loss")
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=reduction)


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                        swap: bool = False, reduction: int = 1):  # fmt: skip
    """``torch.triplet_margin_loss`` (integer ``reduction``)."""
    reduction = _reduction(reduction, "triplet_margin_loss")
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=reduction)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0, reduction: int = 1,
             zero_infinity: bool = False):  # fmt: skip
    """``torch.ctc_loss`` (integer ``reduction``; lengths as tensors or lists of ints)."""
    return _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction, "ctc_loss"),
                     zero_infinity)  # fmt: skip


# shapes, pooling, sampling ---------------------------------------------------------------------
def constant_pad_nd(input, pad, value: float = 0):
    """``torch.constant_pad_nd``: ``F.pad(input, pad, "constant", value)`` (negative pads crop)."""
    return F.pad(input, list(pad), "constant", value)


def adaptive_max_pool1d(input, output_size):
    """``torch.adaptive_max_pool1d``: always ``(output, indices)``."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


# recurrences -----------------------------------------------------------------------------------------
def _layer_weights(params, num_layers: int, num_directions: int, has_biases: bool, mode: str, op: str):
    """``params`` grouped per (layer, direction), and whether they carry LSTM projections."""
    per = 4 if has_biases else 2
    groups = num_layers * num_directions
    has_proj = mode == "LSTM" and len(params) == groups * (per + 1)
    if has_proj:
        per += 1
    if len(params) != groups * per:
        raise RuntimeError(
            f"{op}: expected {groups * per} parameters for {num_layers} layer(s), {num_directions} direction(s) "
            f"and has_biases={has_biases}, got {len(params)}"
        )
    return [list(params[i * per : (i + 1) * per]) for i in range(groups)], has_proj


def _recurrence(mode: str, op: str, input, batch_sizes, hx: list, params, has_biases: bool, num_layers: int,
                dropout: float, train: bool, bidirectional: bool, batch_first: bool):  # fmt: skip
    num_directions = 2 if bidirectional else 1
    weights, has_proj = _layer_weights(params, num_layers, num_directions, has_biases, mode, op)
    if batch_sizes is None:
        if input.ndim != 3:
            raise RuntimeError(f"{op}: expected a 3-D input, got shape {list(input.shape)}")
        steps = input.transpose(0, 1) if batch_first else input
        sizes = None
    else:
        steps, _ = pad_packed_sequence(PackedSequence(input, batch_sizes))
        sizes = batch_sizes.tolist()
    states = list(zip(*(h.unbind(0) for h in hx)))
    output, finals = run_layers(mode, steps, states, weights, num_layers=num_layers, bidirectional=bidirectional,
                                has_biases=has_biases, has_proj=has_proj, dropout=dropout, training=train,
                                batch_sizes=sizes)  # fmt: skip
    if sizes is not None:
        lengths = [sum(1 for b in sizes if b > i) for i in range(sizes[0])]
        output = pack_padded_sequence(output, lengths).data
    elif batch_first:
        output = output.transpose(0, 1)
    hidden = [munet.stack([final[k] for final in finals], 0) for k in range(len(hx))]
    return (output, *hidden)


def _split_overload(args: tuple, op: str):
    """ATen's two overloads: ``(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first)`` and ``(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional)``."""
    if len(args) == 9 and isinstance(args[1], Tensor) and isinstance(args[3], (list, tuple)):
        data, batch_sizes, hx, params, *flags = args
        return data, batch_sizes, hx, params, (*flags, False)
    if len(args) != 9:
        raise TypeError(f"{op}: expected 9 positional arguments (ATen's signature), got {len(args)}")
    input, hx, params, *flags = args
    return input, None, hx, params, tuple(flags)


def _single_state(mode: str, op: str, args: tuple):
    input, batch_sizes, hx, params, flags = _split_overload(args, op)
    return _recurrence(mode, op, input, batch_sizes, [hx], params, *flags)


def lstm(*args):
    """``torch.lstm``: ``(output, h_n, c_n)`` of a multi-layer LSTM over ``params`` (``w_ih, w_hh,
    (b_ih, b_hh), (w_hr)`` per layer and direction); ``hx`` is ``[h_0, c_0]``."""
    input, batch_sizes, hx, params, flags = _split_overload(args, "lstm")
    if len(hx) != 2:
        raise RuntimeError(f"lstm: expected hx to be [h_0, c_0], got {len(hx)} tensors")
    return _recurrence("LSTM", "lstm", input, batch_sizes, list(hx), params, *flags)


def gru(*args):
    """``torch.gru``: ``(output, h_n)`` of a multi-layer GRU over ``params``."""
    return _single_state("GRU", "gru", args)


def rnn_tanh(*args):
    """``torch.rnn_tanh``: ``(output, h_n)`` of a multi-layer Elman RNN with tanh."""
    return _single_state("RNN_TANH", "rnn_tanh", args)


def rnn_relu(*args):
    """``torch.rnn_relu``: ``(output, h_n)`` of a multi-layer Elman RNN with ReLU."""
    return _single_state("RNN_RELU", "rnn_relu", args)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.lstm_cell``: ``(h', c')`` from ``hx = [h, c]``."""
    return cell_step("LSTM", input, tuple(hx), w_ih, w_hh, b_ih, b_hh)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.gru_cell``: ``h'``."""
    return cell_step("GRU", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.rnn_tanh_cell``: ``tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    return cell_step("RNN_TANH", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.rnn_relu_cell``: ``relu(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    return cell_step("RNN_RELU", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]

"""Loss functions of ``munet.nn.functional`` (cross_entropy, nll_loss, mse_loss, ...).

Every loss is a composite of public ops (log_softmax, gather, where, clamp, log, ...), so its
gradient, double gradient and compiled form come from those ops. Semantics follow PyTorch:
``reduction`` is 'none' | 'mean' | 'sum' (plus 'batchmean' for kl_div), the legacy
``size_average`` / ``reduce`` flags map onto it, and a weighted 'mean' of the class losses
divides by the summed weights of the targets that took part (nan when every target is
ignored).

Values are validated by ``check_values`` (``munet/ops/checks.py``), an op of the graph rather
than a host read, so a class index out of range (IndexError), a probability outside [0, 1] or a
negative variance raises the same error in eager mode and in a compiled step.
"""

from __future__ import annotations

import math
import warnings

from munet import _dtype as D
from munet.ops._autocast import float32_under_autocast
from munet.ops._registry import Meta, apply, define
from munet.ops._utils import broadcast_shapes, is_tensor
from munet.ops.activation import log_softmax, logsigmoid
from munet.ops.checks import check_values
from munet.ops.distance import pairwise_distance
from munet.ops.elementwise import where as _where

__all__: list[str] = []
__functional__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cosine_embedding_loss",
    "cross_entropy",
    "gaussian_nll_loss",
    "hinge_embedding_loss",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "margin_ranking_loss",
    "mse_loss",
    "multi_margin_loss",
    "multilabel_soft_margin_loss",
    "nll_loss",
    "poisson_nll_loss",
    "smooth_l1_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]
__tensor_methods__: list[str] = []


# shared helpers ---------------------------------------------------------------------------------------


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    """Map the deprecated ``size_average`` / ``reduce`` flags onto ``reduction`` like PyTorch."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn(
        "size_average and reduce args will be deprecated, please use reduction='none'|'mean'|'sum' instead.",
        stacklevel=3,
    )
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _check_reduction(reduction: str, op: str, allowed=("none", "mean", "sum")) -> None:
    if reduction not in allowed:
        raise ValueError(
            f"{op}: {reduction!r} is not a valid value for reduction; expected one of {', '.join(map(repr, allowed))}"
        )


def _reduce(loss, reduction: str, op: str):
    _check_reduction(reduction, op)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_tensor(x, role: str, op: str) -> None:
    if not is_tensor(x):
        raise TypeError(f"{op}: expected {role} to be a Tensor, got {type(x).__name__}")


def _check_floating(x, role: str, op: str) -> None:
    _check_tensor(x, role, op)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected {role} of a floating point dtype, got {x.dtype.name}")


def _input_shape(input, target) -> tuple:
    return tuple(input.shape)


def _class_loss_shape(input, target) -> tuple:
    """Per-sample losses of (N, C, ...) scores: the index target's shape, or the input's without C."""
    if target.dtype.is_floating_point and tuple(target.shape) == tuple(input.shape):
        return (input.shape[0], *input.shape[2:]) if input.ndim > 1 else ()
    return tuple(target.shape)


def _define_loss(name: str, inputs: tuple, decomposition, reductions=("none", "mean", "sum"), shape=_input_shape):
    """A loss as a composite op: ``inputs`` are its tensor roles (``input``, ``target``, then
    optional weights), ``decomposition(*tensors, reduction=..., **params)`` its meaning. The
    public function checks and broadcasts its arguments first; the op's meta checks the reduction
    and gives the loss's shape (``shape(input, target)`` for 'none', a scalar otherwise)."""

    def meta(input, target, *rest, reduction, **params):
        _check_reduction(reduction, name, reductions)
        return Meta(() if reduction != "none" else shape(input, target), input.dtype)

    return define(name, inputs=inputs, meta=meta, decomposition=decomposition)


# multi_margin_loss has no ignore_index: a value no target can take.
_NO_IGNORE = -(2**63)


def _broadcast_pair(input, target, op: str):
    """Broadcast ``input`` and ``target`` to one shape (PyTorch warns when they differ)."""
    if tuple(input.shape) == tuple(target.shape):
        return input, target
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape), op=op)
    warnings.warn(
        f"{op}: using a target size ({list(target.shape)}) that is different to the input size ({list(input.shape)}). "
        "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
        stacklevel=3,
    )
    return input.expand(shape), target.expand(shape)


def _check_pointwise_weight(weight, input, op: str) -> None:
    """mse/l1/huber ``weight``: one per element of the (un-broadcast) input, like PyTorch."""
    _check_tensor(weight, "weight", op)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{op}: expected weight of the input's shape {list(input.shape)}, got {list(weight.shape)}")


def _class_weight_view(weight, ndim: int, class_dim: int):
    """``weight`` (C,) shaped to broadcast along the class dim of an ``ndim``-rank input."""
    shape = [1] * ndim
    shape[class_dim] = weight.shape[0]
    return weight.reshape(shape)


# class-index losses ------------------------------------------------------------------------------


def _check_class_weight(weight, n_classes: int, op: str) -> None:
    if weight is None:
        return
    _check_floating(weight, "weight", op)
    if tuple(weight.shape) != (n_classes,):
        raise RuntimeError(
            f"{op}: expected weight to be a 1D tensor of size {n_classes} (one per class), got shape {list(weight.shape)}"
        )


def _index_target_shape(input) -> tuple:
    if input.ndim == 1:
        return ()
    return (input.shape[0], *input.shape[2:])


def _check_index_target(input, target, ignore_index: int, op: str) -> None:
    """Shape, dtype and the range of a class-index target."""
    want = _index_target_shape(input)
    if tuple(target.shape) != want:
        raise RuntimeError(
            f"{op}: expected target of shape (N,) or (N, d1, ...) for input of shape (N, C, ...) "
            f"(or () for unbatched input (C,)): for input of shape {list(input.shape)} the target must have shape "
            f"{list(want)}, got {list(target.shape)}"
        )
    if target.dtype.is_floating_point or target.dtype is D.bool_:
        raise RuntimeError(f"{op}: expected target of class indices with an integer dtype, got {target.dtype.name}")
    n_classes = input.shape[0 if input.ndim == 1 else 1]
    ok = (target >= 0) & (target < n_classes)
    if ignore_index != _NO_IGNORE:
        ok = ok | (target == ignore_index)
    message = f"{op}: target {{value}} is out of bounds for {n_classes} classes (expected 0 <= target < {n_classes})"
    check_values(ok, message, IndexError, target)


def _class_targets(target, weight, ignore_index: int, dtype):
    """(ignored mask, indices safe to gather with, per-target weight that is 0 where ignored)."""
    ignored = target == ignore_index
    safe = _where(ignored, 0, target).to(D.int64)
    if weight is None:
        return ignored, safe, (~ignored).to(dtype)
    return ignored, safe, _where(ignored, 0, weight.gather(0, safe.reshape(-1)).reshape(safe.shape))


def _nll(logp, target, weight, ignore_index: int, reduction: str, targets=None):
    """Negative log-likelihood of validated ``logp`` (N, C, ...) / (C,) at class indices ``target``."""
    class_dim = 0 if logp.ndim == 1 else 1
    ignored, safe, w = targets or _class_targets(target, weight, ignore_index, logp.dtype)
    picked = logp.gather(class_dim, safe.unsqueeze(class_dim)).squeeze(class_dim)
    if weight is not None:
        picked = picked * w
    loss = _where(ignored, 0, -picked)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


def _check_nll_input(input, op: str) -> int:
    _check_floating(input, "input", op)
    if input.ndim < 1:
        raise ValueError(f"{op}: expected input of rank >= 1 ((C,), (N, C) or (N, C, d1, ...)), got a rank-0 tensor")
    return input.shape[0 if input.ndim == 1 else 1]


@float32_under_autocast
def nll_loss(
    input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None, reduction: str = "mean"
):
    """Negative log-likelihood of log-probabilities ``input`` (N, C, ...) at class indices ``target`` (N, ...).

    ``weight`` (C,) rescales each class; with 'mean' the sum is divided by the summed
    weights of the non-ignored targets.
    """
    op = "nll_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    n_classes = _check_nll_input(input, op)
    _check_tensor(target, "target", op)
    _check_class_weight(weight, n_classes, op)
    _check_index_target(input, target, ignore_index, op)
    return apply(nll_loss_op, input, target, weight, reduction=reduction, ignore_index=int(ignore_index))


def _nll_loss_decomposition(input, target, weight, *, reduction, ignore_index):
    return _nll(input, target, weight, ignore_index, reduction)


nll_loss_op = _define_loss("nll_loss", ("input", "target", "weight"), _nll_loss_decomposition, shape=_class_loss_shape)


@float32_under_autocast
def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
):
    """Cross entropy of logits ``input`` (N, C, ...) / (C,) against class indices or class probabilities.

    ``target`` holds class indices (shape (N, ...), integer dtype) or probabilities (the
    input's shape, floating). ``label_smoothing`` mixes the target with the uniform
    distribution over the C classes.
    """
    op = "cross_entropy"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    n_classes = _check_nll_input(input, op)
    _check_tensor(target, "target", op)
    _check_class_weight(weight, n_classes, op)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if not (target.dtype.is_floating_point and tuple(target.shape) == tuple(input.shape)):
        _check_index_target(input, target, ignore_index, op)
    attrs = dict(reduction=reduction, ignore_index=int(ignore_index), label_smoothing=float(label_smoothing))
    return apply(cross_entropy_op, input, target, weight, **attrs)


def _cross_entropy_decomposition(input, target, weight, *, reduction, ignore_index, label_smoothing):
    """``log_softmax`` over the class dim, then the nll of the class indices (with PyTorch's
    label smoothing) or the cross entropy with class probabilities."""
    class_dim = 0 if input.ndim == 1 else 1
    if target.dtype.is_floating_point and tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probs(input, target, weight, reduction, label_smoothing, class_dim)
    n_classes = input.shape[class_dim]
    logp = log_softmax(input, class_dim)
    targets = _class_targets(target, weight, ignore_index, logp.dtype)
    nll = _nll(logp, target, weight, ignore_index, reduction, targets)
    if label_smoothing == 0.0:
        return nll
    smooth = _smoothing_term(logp, weight, reduction, class_dim, targets)
    return (1 - label_smoothing) * nll + smooth * (label_smoothing / n_classes)


cross_entropy_op = _define_loss(
    "cross_entropy", ("input", "target", "weight"), _cross_entropy_decomposition, shape=_class_loss_shape
)


def _smoothing_term(logp, weight, reduction: str, class_dim: int, targets):
    """PyTorch's uniform-target part of label smoothing (weighted, ignoring ``ignore_index``).

    Its 'mean' divides by the same summed target weights as the nll part.
    """
    ignored, _, w = targets
    if weight is not None:
        logp = logp * _class_weight_view(weight, logp.ndim, class_dim)
    smooth = _where(ignored, 0, -logp.sum(class_dim))
    if reduction == "none":
        return smooth
    if reduction == "sum":
        return smooth.sum()
    return smooth.sum() / w.sum()


def _cross_entropy_probs(input, target, weight, reduction: str, label_smoothing: float, class_dim: int):
    n_classes = input.shape[class_dim]
    if label_smoothing > 0.0:
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    logp = log_softmax(input, class_dim)
    terms = logp * target
    if weight is not None:
        terms = terms * _class_weight_view(weight, input.ndim, class_dim)
    loss = -terms.sum(class_dim)
    if reduction == "mean":
        # Mean over the batch elements (input.numel() / C), not over the weights.
        return loss.sum() / (input.numel() // n_classes if n_classes else 0)
    return _reduce(loss, reduction, "cross_entropy")


# regression losses -------------------------------------------------------------------------------


def _pair(input, target, op: str, weight=None):
    """Validate and broadcast ``input`` and ``target`` (and the shape of a pointwise ``weight``)."""
    _check_floating(input, "input", op)
    _check_tensor(target, "target", op)
    if weight is not None:
        _check_pointwise_weight(weight, input, op)
    return _broadcast_pair(input, target, op)


def _weighted(loss, weight, reduction: str, op: str, mean_by_weight: bool = True):
    """PyTorch's pointwise ``weight``: 'mean' divides by the summed weights (mse, l1) or numel (huber)."""
    loss = loss * weight
    _check_reduction(reduction, op)
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction, op)


@float32_under_autocast
def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """Mean squared error ``(input - target) ** 2``, reduced; ``weight`` (input's shape) rescales elements."""
    op = "mse_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _pair(input, target, op, weight)
    return apply(mse_loss_op, input, target, weight, reduction=reduction)


def _mse_loss_decomposition(input, target, weight, *, reduction):
    diff = input - target
    loss = diff * diff
    if weight is not None:
        return _weighted(loss, weight, reduction, "mse_loss")
    return _reduce(loss, reduction, "mse_loss")


mse_loss_op = _define_loss("mse_loss", ("input", "target", "weight"), _mse_loss_decomposition)


@float32_under_autocast
def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """Mean absolute error ``|input - target|``, reduced; ``weight`` (input's shape) rescales elements."""
    op = "l1_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _pair(input, target, op, weight)
    return apply(l1_loss_op, input, target, weight, reduction=reduction)


def _l1_loss_decomposition(input, target, weight, *, reduction):
    loss = (input - target).abs()
    if weight is not None:
        return _weighted(loss, weight, reduction, "l1_loss")
    return _reduce(loss, reduction, "l1_loss")


l1_loss_op = _define_loss("l1_loss", ("input", "target", "weight"), _l1_loss_decomposition)


def _quadratic_then_linear(diff, threshold: float, linear_slope: float):
    """0.5 * z**2 below ``threshold`` (z = |diff|), ``linear_slope`` * (z - threshold / 2) above."""
    z = diff.abs()
    return _where(z < threshold, 0.5 * diff * diff, linear_slope * (z - 0.5 * threshold))


@float32_under_autocast
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
    """``0.5 * z**2 / beta`` where ``z = |input - target| < beta``, else ``z - beta / 2``; beta=0 is l1."""
    op = "smooth_l1_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError(f"{op}: beta must be non-negative, got {beta}")
    input, target = _pair(input, target, op)
    return apply(smooth_l1_loss_op, input, target, reduction=reduction, beta=float(beta))


def _smooth_l1_loss_decomposition(input, target, *, reduction, beta):
    diff = input - target
    if beta == 0.0:
        return _reduce(diff.abs(), reduction, "smooth_l1_loss")
    z = diff.abs()
    return _reduce(_where(z < beta, 0.5 * diff * diff / beta, z - 0.5 * beta), reduction, "smooth_l1_loss")


smooth_l1_loss_op = _define_loss("smooth_l1_loss", ("input", "target"), _smooth_l1_loss_decomposition)


@float32_under_autocast
def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """``0.5 * z**2`` where ``z = |input - target| < delta``, else ``delta * (z - delta / 2)``."""
    op = "huber_loss"
    if delta <= 0:
        raise RuntimeError(f"{op}: delta must be positive, got {delta}")
    input, target = _pair(input, target, op, weight)
    return apply(huber_loss_op, input, target, weight, reduction=reduction, delta=float(delta))


def _huber_loss_decomposition(input, target, weight, *, reduction, delta):
    loss = _quadratic_then_linear(input - target, delta, delta)
    if weight is not None:
        return _weighted(loss, weight, reduction, "huber_loss", mean_by_weight=False)
    return _reduce(loss, reduction, "huber_loss")


huber_loss_op = _define_loss("huber_loss", ("input", "target", "weight"), _huber_loss_decomposition)


# probabilistic losses ----------------------------------------------------------------------------


@float32_under_autocast
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
    """``-w * (t * log(x) + (1 - t) * log(1 - x))`` for probabilities ``x`` in [0, 1]; logs clamp at -100."""
    op = "binary_cross_entropy"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    _check_floating(input, "input", op)
    _check_floating(target, "target", op)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"{op}: using a target size ({list(target.shape)}) that is different to the input size "
            f"({list(input.shape)}) is not supported; please ensure they have the same size"
        )
    check_values((input >= 0) & (input <= 1), f"{op}: all elements of input should be between 0 and 1")
    if weight is not None:
        _check_tensor(weight, "weight", op)
        broadcast_shapes(tuple(weight.shape), tuple(input.shape), op=op)
    return apply(binary_cross_entropy_op, input, target, weight, reduction=reduction)


def _binary_cross_entropy_decomposition(input, target, weight, *, reduction):
    loss = -(target * _clamped_log(input) + (1 - target) * _clamped_log(1 - input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


binary_cross_entropy_op = _define_loss(
    "binary_cross_entropy", ("input", "target", "weight"), _binary_cross_entropy_decomposition
)


def _clamped_log(x):
    """``max(log(x), -100)`` for x in [0, 1], with gradient 0 (not nan) where x == 0.

    PyTorch's analytic rule gives ``(x - t) / max(x (1 - x), 1e-12)`` there instead; both
    vanish through a saturated sigmoid, the only common way to reach exactly 0 or 1.
    """
    positive = x > 0
    return _where(positive, _where(positive, x, 1).log(), -100.0).clamp(min=-100)


def _neg_log_sigmoid(x):
    """``-log(sigmoid(x))``, stable for large |x| (and with the exact gradient at 0)."""
    return -logsigmoid(x)


@float32_under_autocast
def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean", pos_weight=None
):
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits.

    ``pos_weight`` (broadcast over the last, class, dim) weighs the positive term.
    """
    op = "binary_cross_entropy_with_logits"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    _check_floating(input, "input", op)
    _check_tensor(target, "target", op)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"{op}: target size ({list(target.shape)}) must be the same as input size ({list(input.shape)})"
        )
    for role, t in (("pos_weight", pos_weight), ("weight", weight)):
        if t is not None:
            _check_tensor(t, role, op)
            broadcast_shapes(tuple(t.shape), tuple(input.shape), op=op)
    return apply(binary_cross_entropy_with_logits_op, input, target, weight, pos_weight, reduction=reduction)


def _bce_with_logits_decomposition(input, target, weight, pos_weight, *, reduction):
    """``(1 - t) x - w_pos log(sigmoid(x))`` with ``w_pos = (pos_weight - 1) t + 1``, from the logits."""
    neg_log_sig = _neg_log_sigmoid(input)
    if pos_weight is None:
        loss = (1 - target) * input + neg_log_sig
    else:
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + log_weight * neg_log_sig
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


binary_cross_entropy_with_logits_op = _define_loss(
    "binary_cross_entropy_with_logits", ("input", "target", "weight", "pos_weight"), _bce_with_logits_decomposition
)


@float32_under_autocast
def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False):
    """KL divergence ``target * (log(target) - input)`` with ``input`` given as log-probabilities.

    ``reduction='batchmean'`` divides the sum by the batch size (the mathematically correct
    KL); ``log_target=True`` takes ``target`` as log-probabilities too.
    """
    op = "kl_div"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op, ("none", "mean", "sum", "batchmean"))
    _check_floating(input, "input", op)
    _check_tensor(target, "target", op)
    if reduction == "mean":
        warnings.warn(
            "kl_div: reduction 'mean' divides the total loss by both the batch size and the support size; "
            "'batchmean' divides only by the batch size and aligns with the KL math definition",
            stacklevel=2,
        )
    return apply(kl_div_op, input, target, reduction=reduction, log_target=bool(log_target))


def _kl_div_decomposition(input, target, *, reduction, log_target):
    if log_target:
        loss = target.exp() * (target - input)
    else:
        positive = target > 0
        safe = _where(positive, target, 1)
        loss = _where(positive, target * safe.log(), 0) - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if loss.ndim else total
    return _reduce(loss, reduction, "kl_div")


kl_div_op = _define_loss(
    "kl_div", ("input", "target"), _kl_div_decomposition, reductions=("none", "mean", "sum", "batchmean")
)


@float32_under_autocast
def poisson_nll_loss(
    input,
    target,
    log_input: bool = True,
    full: bool = False,
    size_average=None,
    eps: float = 1e-8,
    reduce=None,
    reduction: str = "mean",
):
    """Negative log-likelihood of ``target`` under Poisson(rate), rate = exp(input) or input."""
    op = "poisson_nll_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    _check_floating(input, "input", op)
    _check_tensor(target, "target", op)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1
        safe = _where(big, target, 2)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + _where(big, stirling, 0)
    return _reduce(loss, reduction, op)


@float32_under_autocast
def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
    """Gaussian negative log-likelihood ``0.5 * (log(var) + (input - target)**2 / var)``.

    ``var`` has the input's shape, or one dim fewer (the last), or size 1 in one dim
    (homoscedastic); it is clamped to ``eps`` without affecting its gradient, like PyTorch.
    """
    op = "gaussian_nll_loss"
    _check_floating(input, "input", op)
    _check_tensor(target, "target", op)
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError(f"{op}: var has negative entry/entries")
        from munet.ops.creation import full_like

        var = full_like(input, float(var))
    else:
        check_values(~(var < 0), f"{op}: var has negative entry/entries", ValueError)
        var = _gaussian_var_shape(input, var, op)
    _check_reduction(reduction, op)
    clamped = _clamp_keep_grad(var, eps)
    diff = input - target
    loss = 0.5 * (clamped.log() + diff * diff / clamped)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, op)


def _gaussian_var_shape(input, var, op: str):
    if tuple(var.shape) == tuple(input.shape):
        return var
    if tuple(input.shape[:-1]) == tuple(var.shape):
        return var.unsqueeze(-1)
    if input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1:
        return var
    raise ValueError(
        f"{op}: var is of incorrect size: expected {list(input.shape)}, {list(input.shape[:-1])} or one dim of size 1, got {list(var.shape)}"
    )


def _clamp_keep_grad(x, low: float):
    """``x.clamp(min=low)`` whose gradient is the identity (PyTorch clamps ``var`` under no_grad)."""
    return x + (x.detach().clamp(min=low) - x.detach())


# margin and embedding losses ---------------------------------------------------------------------


@float32_under_autocast
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """``log(1 + exp(-target * input))`` for targets in {1, -1}."""
    op = "soft_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _pair(input, target, op)
    return _reduce(_neg_log_sigmoid(target * input), reduction, op)


@float32_under_autocast
def margin_ranking_loss(
    input1, input2, target, margin: float = 0, size_average=None, reduce=None, reduction: str = "mean"
):
    """``max(0, -target * (input1 - input2) + margin)``."""
    op = "margin_ranking_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_floating(input1, "input1", op)
    _check_tensor(input2, "input2", op)
    _check_tensor(target, "target", op)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise RuntimeError(
            f"{op}: all input tensors should have the same number of dims, got input1 {list(input1.shape)}, "
            f"input2 {list(input2.shape)}, target {list(target.shape)}"
        )
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction, op)


@float32_under_autocast
def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean"):
    """``input`` where target is 1, ``max(0, margin - input)`` where target is -1."""
    op = "hinge_embedding_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_floating(input, "input", op)
    _check_tensor(target, "target", op)
    margin_part = _where(target != 1, (margin - input).clamp(min=0), 0)
    self_part = _where(target != -1, input, 0)
    return _reduce(margin_part + self_part, reduction, op)


@float32_under_autocast
def cosine_embedding_loss(
    input1, input2, target, margin: float = 0, size_average=None, reduce=None, reduction: str = "mean"
):
    """``1 - cos(x1, x2)`` where target is 1, ``max(0, cos(x1, x2) - margin)`` where target is -1."""
    op = "cosine_embedding_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_floating(input1, "input1", op)
    _check_tensor(input2, "input2", op)
    _check_tensor(target, "target", op)
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise RuntimeError(
            f"{op}: expected input1 and input2 of the same shape (N, D) or (D,), got {list(input1.shape)} and {list(input2.shape)}"
        )
    if target.ndim != input1.ndim - 1:
        raise RuntimeError(
            f"{op}: expected target of rank {input1.ndim - 1} for inputs of rank {input1.ndim}, got shape {list(target.shape)}"
        )
    eps = 1e-12
    dot = (input1 * input2).sum(-1)
    norms = ((input1 * input1).sum(-1) + eps) * ((input2 * input2).sum(-1) + eps)
    cos = dot / norms.sqrt()
    positive = _where(target == 1, 1 - cos, 0)
    negative = _where(target == -1, (cos - margin).clamp(min=0), 0)
    return _reduce(positive + negative, reduction, op)


@float32_under_autocast
def triplet_margin_loss(
    anchor, positive, negative, margin: float = 1.0, p: float = 2, eps: float = 1e-6, swap: bool = False,
    size_average=None, reduce=None, reduction: str = "mean",
):  # fmt: skip
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the p-norm distance (``swap``: min with d(p, n))."""
    op = "triplet_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    for role, x in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _check_floating(x, role, op)
    if not (anchor.ndim == positive.ndim == negative.ndim) or anchor.ndim not in (1, 2):
        raise RuntimeError(
            f"{op}: expected anchor, positive and negative of the same rank 1 (D,) or 2 (N, D), got "
            f"{list(anchor.shape)}, {list(positive.shape)} and {list(negative.shape)}"
        )
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_swap = pairwise_distance(positive, negative, p, eps)
        d_neg = _where(d_swap < d_neg, d_swap, d_neg)
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction, op)


def triplet_margin_with_distance_loss(
    anchor, positive, negative, *, distance_function=None, margin: float = 1.0, swap: bool = False,
    reduction: str = "mean",
):  # fmt: skip
    """``max(d(a, p) - d(a, n) + margin, 0)`` with any ``distance_function(x1, x2)`` (default pairwise_distance)."""
    op = "triplet_margin_with_distance_loss"
    _check_reduction(reduction, op)
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise RuntimeError(
            f"{op}: the anchor, positive, and negative tensors are expected to have the same number of dimensions, "
            f"but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative {negative.ndim}D inputs"
        )
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        from munet.ops.elementwise import minimum

        d_neg = minimum(d_neg, distance(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction, op)


@float32_under_autocast
def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
    """Mean over classes of the binary logistic loss of each label; ``weight`` (C,) rescales classes."""
    op = "multilabel_soft_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_floating(input, "input", op)
    _check_tensor(target, "target", op)
    loss = target * _neg_log_sigmoid(input) + (1 - target) * _neg_log_sigmoid(-input)
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(-1) / input.shape[-1] if input.ndim else loss
    return _reduce(loss, reduction, op)


@float32_under_autocast
def multi_margin_loss(
    input, target, p: int = 1, margin: float = 1.0, weight=None, size_average=None, reduce=None, reduction: str = "mean"
):
    """Multi-class hinge loss: mean over classes i != y of ``max(0, margin - x[y] + x[i]) ** p``."""
    op = "multi_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 supported, got {p}")
    _check_floating(input, "input", op)
    _check_tensor(target, "target", op)
    if input.ndim not in (1, 2) or tuple(target.shape) != tuple(input.shape[:1] if input.ndim == 2 else ()):
        raise RuntimeError(
            f"{op}: expected input of shape (N, C) with target (N,), or (C,) with target (), "
            f"got input {list(input.shape)} and target {list(target.shape)}"
        )
    n_classes = input.shape[-1]
    _check_class_weight(weight, n_classes, op)
    _check_index_target(input, target, _NO_IGNORE, op)
    x = input if input.ndim == 2 else input.unsqueeze(0)
    t = target.reshape(-1, 1).to(D.int64)
    picked = x.gather(1, t)
    margins = (margin - picked + x).clamp(min=0)
    if p == 2:
        margins = margins * margins
    if weight is not None:
        margins = margins * weight.gather(0, t.reshape(-1)).unsqueeze(1)
    from munet.ops.creation import arange

    is_target = arange(n_classes, device=input.device).unsqueeze(0) == t
    loss = _where(is_target, 0, margins).sum(1) / n_classes
    if input.ndim == 1:
        loss = loss.squeeze(0)
    return _reduce(loss, reduction, op)

"""``F.linear_cross_entropy``, ``nn.LinearCrossEntropyLoss`` and ``nn.LinearCrossEntropyOptions``:
cross entropy of a linear projection, with PyTorch 2.13's signatures, checks and shapes.

The value is PyTorch's reference definition, ``cross_entropy(linear(input, W, b).reshape(N, C, *d),
target, ...)``. ``options`` selects PyTorch's batch-chunked kernel, a memory optimization with the
same value; MuNet validates the options and always computes the reference (its memory use is the
unchunked one).
"""

from __future__ import annotations

import dataclasses
import math

from munet import _dtype as D
from munet.nn import functional as F
from munet.nn.modules.linear import Linear
from munet.nn.modules.loss import _WeightedLoss

__all__ = ["LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]

_ACC_POLICIES = ("auto", "accurate", "balanced", "compact")
_ACC_DTYPES = (D.float16, D.bfloat16, D.float32, D.float64)


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """PyTorch's chunking options (validated as PyTorch validates them; see the module docstring)."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = self.chunking_method.partition(":")
            factor = factor if sep else "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (
            self.batch_chunk_size is None or (isinstance(self.batch_chunk_size, int) and self.batch_chunk_size > 0)
        ):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {self.batch_chunk_size!r}")
        if self.acc_dtype is not None and self.acc_dtype not in _ACC_DTYPES:
            raise ValueError(
                "acc_dtype must be one of {None, torch.float16, torch.bfloat16, torch.float32, torch.float64}, "
                f"got {self.acc_dtype!r}. Pass acc_dtype=None to let the op pick automatically."
            )


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction: str = "mean",
                         ignore_index: int | None = None, label_smoothing: float = 0.0, options=None):  # fmt: skip
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)`` for ``input`` (N, in) or
    (in,) and ``linear_weight`` (C, d_1, ..., d_K, in): logits (N, C, d_1, ..., d_K)."""
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.dim()}")
    num_batches = tuple(input.shape[:-1])
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(
            "expected equal input and linear_weight last dimensions (in_features), "
            f"got {input.shape[-1]} and {linear_weight.shape[-1]}, respectively"
        )
    num_classes = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got {tuple(linear_bias.shape)}")
    if out_features and not num_batches:
        raise RuntimeError(
            f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} requires batched "
            f"input, (N, {in_features}), got unbatched input with shape {tuple(input.shape)}"
        )
    if options is not None and not isinstance(options, LinearCrossEntropyOptions):
        raise TypeError(f"linear_cross_entropy: options must be LinearCrossEntropyOptions or None, got {options!r}")
    logits_shape = (*num_batches, num_classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    classes = math.prod(out_features, start=num_classes)
    logits = F.linear(
        input,
        linear_weight.reshape(classes, in_features),
        None if linear_bias is None else linear_bias.reshape(classes),
    ).reshape(logits_shape)
    return F.cross_entropy(
        logits,
        target,
        weight=weight,
        reduction=reduction,
        ignore_index=-100 if ignore_index is None else ignore_index,
        label_smoothing=label_smoothing,
    )


class LinearCrossEntropyLoss(_WeightedLoss):
    """A ``Linear(in_features, num_classes * prod(out_features))`` (``self.linear``) followed by cross entropy."""

    def __init__(self, in_features: int, num_classes: int, *, out_features: tuple = (), bias: bool = False,
                 device=None, dtype=None, reduction: str = "mean", weight=None, ignore_index: int | None = None,
                 label_smoothing: float = 0.0, options: LinearCrossEntropyOptions | None = None) -> None:  # fmt: skip
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got {label_smoothing}")
        super().__init__(weight=weight, reduction=reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        # stored flat, as PyTorch (Linear has 2-D weights); reshaped in forward
        self.linear = Linear(in_features, math.prod(self.out_features, start=num_classes), bias=bias, device=device,
                             dtype=dtype)  # fmt: skip
        self.options = options

    def forward(self, input, target):
        shape = (self.num_classes, *self.out_features)
        bias = None if self.linear.bias is None else self.linear.bias.reshape(shape)
        return linear_cross_entropy(input, self.linear.weight.reshape(*shape, self.linear.in_features), target,
                                    linear_bias=bias, weight=self.weight, reduction=self.reduction,
                                    ignore_index=self.ignore_index, label_smoothing=self.label_smoothing,
                                    options=self.options)  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
            f"out_features={self.out_features}, bias={self.linear.bias is not None}, reduction={self.reduction}, "
            f"ignore_index={self.ignore_index}, label_smoothing={self.label_smoothing}, options={self.options}"
        )

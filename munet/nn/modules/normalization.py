"""Normalization layers: batch, instance, layer, group, RMS and local-response norm.

Parameters and buffers are registered like PyTorch's (``running_mean``/``running_var``/
``num_batches_tracked`` buffers, ``None`` when not tracking), so state dicts interchange.
"""

from __future__ import annotations

import numbers
import warnings

from munet import _dtype as D
from munet.autograd.grad_mode import no_grad
from munet.nn import functional as F
from munet.nn import init
from munet.nn.module import Module
from munet.nn.parameter import Parameter
from munet.ops.creation import empty, ones, tensor, zeros

__all__ = [
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "CrossMapLRN2d",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LayerNorm",
    "LocalResponseNorm",
    "RMSNorm",
]


def _register_affine(module: Module, shape, bias: bool, device, dtype) -> None:
    """Register ``weight`` (and ``bias`` unless ``bias=False``) of ``shape``; ``shape=None``
    registers both as ``None`` (no affine transform)."""
    if shape is None:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)
        return
    module.weight = Parameter(empty(shape, device=device, dtype=dtype))
    if bias:
        module.bias = Parameter(empty(shape, device=device, dtype=dtype))
    else:
        module.register_parameter("bias", None)


class _NormBase(Module):
    """Common base of the batch and instance norms: affine parameters and running statistics."""

    _version = 2
    _optional_state_keys = ("num_batches_tracked",)  # added in PyTorch 0.4.1

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _register_affine(self, num_features if affine else None, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=D.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input) -> None:
        ranks = self._ranks
        if input.ndim not in ranks:
            expected = " or ".join(f"{r}D" for r in ranks)
            raise ValueError(
                f"{type(self).__name__}: expected {expected} input (got {input.ndim}D input of shape {list(input.shape)})"
            )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class _BatchNorm(_NormBase):
    _ranks: tuple = ()

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        # Batch statistics in training, and in eval when there are no running statistics.
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        # Running statistics are only passed when they are to be updated or used.
        pass_stats = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if pass_stats else None,
            self.running_var if pass_stats else None,
            self.weight,
            self.bias,
            use_batch_stats,
            factor,
            self.eps,
        )


class BatchNorm1d(_BatchNorm):
    """Batch norm over ``(N, C)`` or ``(N, C, L)`` inputs."""

    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over ``(N, C, H, W)`` inputs."""

    _ranks = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm over ``(N, C, D, H, W)`` inputs."""

    _ranks = (5,)


class _InstanceNorm(_NormBase):
    _ranks: tuple = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _apply_instance_norm(self, input):
        return F.instance_norm(
            input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )

    def forward(self, input):
        self._check_input_dim(input)
        no_batch_rank = self._ranks[0]
        feature_dim = input.ndim - no_batch_rank
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(
                    f"{type(self).__name__}: expected input's size at dim={feature_dim} to match num_features "
                    f"({self.num_features}), but got: {input.shape[feature_dim]}."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. You can silence this warning by "
                "not passing in num_features, which is not used because affine=False",
                stacklevel=2,
            )
        if input.ndim == no_batch_rank:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over ``(N, C, L)`` or ``(C, L)`` inputs."""

    _ranks = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over ``(N, C, H, W)`` or ``(C, H, W)`` inputs."""

    _ranks = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs."""

    _ranks = (4, 5)


def _shape_tuple(normalized_shape) -> tuple:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(normalized_shape)


class LayerNorm(Module):
    """Normalize over the trailing ``normalized_shape`` dims, with per-element affine parameters."""

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _register_affine(self, self.normalized_shape if elementwise_affine else None, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
            f"bias={self.bias is not None}"
        )


class GroupNorm(Module):
    """Normalize groups of ``num_channels // num_groups`` channels per sample."""

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ):
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups != 0:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _register_affine(self, num_channels if affine else None, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing ``normalized_shape`` dims.

    ``eps=None`` uses the input dtype's machine epsilon, like PyTorch.
    """

    def __init__(
        self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None, dtype=None
    ):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """Normalize each channel by the squares of ``size`` neighbouring channels (AlexNet's LRN)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


def _cross_map_windows(channels: int, size: int) -> list[list[int]]:
    """The channels summed for each output channel by PyTorch's legacy CrossMapLRN2d recurrence.

    Its running sum adds channel ``c + pre_pad - 1`` and removes ``c - pre_pad`` only for
    ``c > pre_pad``, so channel 0 stays in every window; replaying the recurrence keeps that.
    """
    pre_pad = int((size - 1) / 2 + 1)
    window = list(range(min(pre_pad, channels)))
    windows = [list(window)]
    for c in range(1, channels):
        if c < channels - pre_pad + 1:
            window.append(c + pre_pad - 1)
        if c > pre_pad:
            window.remove(c - pre_pad)
        windows.append(list(window))
    return windows


class CrossMapLRN2d(Module):
    """PyTorch's legacy cross-channel LRN over (N, C, H, W): ``x * (k + alpha / size * S)^-beta``,
    ``S`` the sum of squares over the channel window of its running-sum recurrence."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        n, channels, h, w = input.shape
        mixing = [[0.0] * channels for _ in range(channels)]
        for c, window in enumerate(_cross_map_windows(channels, self.size)):
            for j in window:
                mixing[c][j] = 1.0
        mixing = tensor(mixing, dtype=input.dtype, device=input.device)
        sums = (mixing @ (input * input).reshape(n, channels, h * w)).reshape(n, channels, h, w)
        return input * (sums * (self.alpha / self.size) + self.k).pow(-self.beta)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"

"""Lazy layers (``nn.LazyLinear``, ``nn.LazyConv2d``, ``nn.LazyBatchNorm1d`` ...): the input size
is read from the first input.

A lazy layer holds its constructor arguments and no parameters. Its first call builds the
ordinary layer with the inferred size (``in_features`` from the last input dim; ``in_channels``
or ``num_features`` from the channel dim), takes over its parameters and buffers, initialized as
that layer initializes them, and becomes an instance of it (``type(layer) is nn.Linear``), as
PyTorch's do. Until then ``has_uninitialized_params()`` is true and there is nothing to give an
optimizer or a state dict: run one batch through the model first (PyTorch's advice too; MuNet
has no ``UninitializedParameter`` placeholders, so a state dict loaded into a layer that has not
run reports its keys as unexpected).
"""

from __future__ import annotations

from munet._tensor import Tensor
from munet.nn.module import Module
from munet.nn.modules.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from munet.nn.modules.linear import Linear
from munet.nn.modules.normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)

__all__ = [
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
    "LazyLinear",
]


class _LazyLayer(Module):
    """Builds ``cls_to_become(inferred_size, *args, **kwargs)`` on the first call."""

    cls_to_become: type = Module

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()
        self._lazy_arguments = (args, kwargs)

    def _inferred_size(self, input: Tensor) -> int:
        raise NotImplementedError  # each lazy family says which dim holds the size

    def has_uninitialized_params(self) -> bool:
        """True until the first call (afterwards the layer is its ordinary class)."""
        return True

    def initialize_parameters(self, input: Tensor) -> None:
        """Build the parameters for ``input`` and become the ordinary layer."""
        if not isinstance(input, Tensor):
            raise TypeError(f"{type(self).__name__}: expected a Tensor input, got {type(input).__name__}")
        args, kwargs = self._lazy_arguments
        built = self.cls_to_become(self._inferred_size(input), *args, **kwargs)
        built.train(self.training)
        for key, value in built.__dict__.items():  # the user's hooks and mode stay this layer's
            if key != "training" and "hook" not in key:
                self.__dict__[key] = value
        del self.__dict__["_lazy_arguments"]
        self.__class__ = self.cls_to_become

    def forward(self, input, *args, **kwargs):
        self.initialize_parameters(input)
        return self.forward(input, *args, **kwargs)

    def extra_repr(self) -> str:
        args, kwargs = self._lazy_arguments
        return ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in kwargs.items())])


class LazyLinear(_LazyLayer):
    """``nn.Linear`` with ``in_features`` from the first input's last dim:
    ``LazyLinear(out_features, bias=True, device=None, dtype=None)``."""

    cls_to_become = Linear

    def _inferred_size(self, input: Tensor) -> int:
        return input.shape[-1] if input.ndim else 1


class _LazyConv(_LazyLayer):
    _spatial = 0

    def _inferred_size(self, input: Tensor) -> int:
        if input.ndim not in (self._spatial + 1, self._spatial + 2):
            raise ValueError(
                f"{type(self).__name__}: expected a {self._spatial + 1}D (unbatched) or {self._spatial + 2}D input, "
                f"got shape {list(input.shape)}"
            )
        return input.shape[0] if input.ndim == self._spatial + 1 else input.shape[1]


class LazyConv1d(_LazyConv):
    """``nn.Conv1d`` with ``in_channels`` from the first input: ``LazyConv1d(out_channels, kernel_size, ...)``."""

    cls_to_become, _spatial = Conv1d, 1


class LazyConv2d(_LazyConv):
    """``nn.Conv2d`` with ``in_channels`` from the first input: ``LazyConv2d(out_channels, kernel_size, ...)``."""

    cls_to_become, _spatial = Conv2d, 2


class LazyConv3d(_LazyConv):
    """``nn.Conv3d`` with ``in_channels`` from the first input: ``LazyConv3d(out_channels, kernel_size, ...)``."""

    cls_to_become, _spatial = Conv3d, 3


class LazyConvTranspose1d(_LazyConv):
    """``nn.ConvTranspose1d`` with ``in_channels`` from the first input."""

    cls_to_become, _spatial = ConvTranspose1d, 1


class LazyConvTranspose2d(_LazyConv):
    """``nn.ConvTranspose2d`` with ``in_channels`` from the first input."""

    cls_to_become, _spatial = ConvTranspose2d, 2


class LazyConvTranspose3d(_LazyConv):
    """``nn.ConvTranspose3d`` with ``in_channels`` from the first input."""

    cls_to_become, _spatial = ConvTranspose3d, 3


class _LazyBatchNorm(_LazyLayer):
    def _inferred_size(self, input: Tensor) -> int:
        if input.ndim < 2:
            raise ValueError(
                f"{type(self).__name__}: expected an input with a channel dim, got shape {list(input.shape)}"
            )
        return input.shape[1]


class LazyBatchNorm1d(_LazyBatchNorm):
    """``nn.BatchNorm1d`` with ``num_features`` from the first input:
    ``LazyBatchNorm1d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)``."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNorm):
    """``nn.BatchNorm2d`` with ``num_features`` from the first input."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyBatchNorm):
    """``nn.BatchNorm3d`` with ``num_features`` from the first input."""

    cls_to_become = BatchNorm3d


class _LazyInstanceNorm(_LazyLayer):
    def __init__(self, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True, track_running_stats: bool = True,
                 device=None, dtype=None, *, bias: bool = True) -> None:  # fmt: skip
        # PyTorch's lazy instance norms default to affine and tracked statistics, unlike InstanceNorm
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _inferred_size(self, input: Tensor) -> int:
        ranks = self.cls_to_become._ranks
        if input.ndim not in ranks:
            raise ValueError(
                f"{type(self).__name__}: expected a {ranks[0]}D (unbatched) or {ranks[1]}D input, "
                f"got shape {list(input.shape)}"
            )
        return input.shape[0] if input.ndim == ranks[0] else input.shape[1]


class LazyInstanceNorm1d(_LazyInstanceNorm):
    """``nn.InstanceNorm1d`` with ``num_features`` from the first input's channel dim:
    ``LazyInstanceNorm1d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)``."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm):
    """``nn.InstanceNorm2d`` with ``num_features`` from the first input's channel dim."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm):
    """``nn.InstanceNorm3d`` with ``num_features`` from the first input's channel dim."""

    cls_to_become = InstanceNorm3d

"""``munet.nn.init``: parameter initializers with PyTorch's formulas and defaults."""

from __future__ import annotations

import math
import warnings

import numpy as np

from munet._tensor import Tensor
from munet.autograd.grad_mode import no_grad

__all__ = [
    "calculate_gain",
    "constant",
    "dirac",
    "eye",
    "kaiming_normal",
    "kaiming_uniform",
    "normal",
    "orthogonal",
    "sparse",
    "uniform",
    "xavier_normal",
    "xavier_uniform",
    "constant_",
    "dirac_",
    "eye_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "sparse_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table)."""
    linear = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


@no_grad()
def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    return tensor.uniform_(a, b, generator=generator)


@no_grad()
def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    return tensor.normal_(mean, std, generator=generator)


@no_grad()
def trunc_normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None
) -> Tensor:
    """Normal(mean, std) truncated to [a, b], by inverse-CDF sampling like PyTorch."""

    def norm_cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    low, up = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    tensor.uniform_(2 * low - 1, 2 * up - 1, generator=generator)
    tensor.erfinv_()
    tensor.mul_(std * math.sqrt(2.0))
    tensor.add_(mean)
    tensor.clamp_(min=a, max=b)
    return tensor


@no_grad()
def constant_(tensor: Tensor, val: float) -> Tensor:
    return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


@no_grad()
def eye_(tensor: Tensor) -> Tensor:
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from munet.ops.creation import eye

    return tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype))


@no_grad()
def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_per_group = tensor.shape[0] // groups
    min_dim = min(out_per_group, tensor.shape[1])
    arr = np.zeros(tuple(tensor.shape), dtype=np.float64)
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(min_dim):
            arr[(g * out_per_group + d, d) + centre] = 1
    from munet.ops.creation import tensor as make

    return tensor.copy_(make(arr, dtype=tensor.dtype))


def _uniform_bound(tensor: Tensor, bound: float, generator) -> Tensor:
    return tensor.uniform_(-bound, bound, generator=generator)


@no_grad()
def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _uniform_bound(tensor, math.sqrt(3.0) * std, generator)


@no_grad()
def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return tensor.normal_(0.0, std, generator=generator)


@no_grad()
def kaiming_uniform_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return _uniform_bound(tensor, math.sqrt(3.0) * std, generator)


@no_grad()
def kaiming_normal_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return tensor.normal_(0.0, std, generator=generator)


@no_grad()
def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a normal sample, like PyTorch."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    from munet.ops.creation import tensor as make
    from munet.ops.random import randn

    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = randn(rows, cols, generator=generator, dtype=tensor.dtype).numpy().astype(np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return tensor.copy_(make(q.reshape(tuple(tensor.shape)) * gain, dtype=tensor.dtype))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """A 2-D ``tensor`` drawn from ``N(0, std)`` with ``ceil(sparsity * rows)`` random rows of each
    column set to zero (Martens, 2010), as PyTorch's ``nn.init.sparse_``."""
    from munet.ops.random import randperm

    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            zero_rows = randperm(rows, generator=generator, device=tensor.device)[:num_zeros]
            tensor[zero_rows, col] = 0
    return tensor


def _deprecated_alias(method):
    """The pre-underscore name of an initializer: warns as PyTorch does, then calls ``method``."""
    new_name = method.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(
            f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.", FutureWarning, stacklevel=2
        )
        return method(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    deprecated_init.__doc__ = f"Deprecated alias of :func:`munet.nn.init.{new_name}` (warns ``FutureWarning``)."
    return deprecated_init


uniform = _deprecated_alias(uniform_)
normal = _deprecated_alias(normal_)
constant = _deprecated_alias(constant_)
eye = _deprecated_alias(eye_)
dirac = _deprecated_alias(dirac_)
xavier_uniform = _deprecated_alias(xavier_uniform_)
xavier_normal = _deprecated_alias(xavier_normal_)
kaiming_uniform = _deprecated_alias(kaiming_uniform_)
kaiming_normal = _deprecated_alias(kaiming_normal_)
orthogonal = _deprecated_alias(orthogonal_)
sparse = _deprecated_alias(sparse_)

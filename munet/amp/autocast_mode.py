"""``autocast``: run chosen ops in float16/bfloat16 and numerically sensitive ones in float32.

The policy is a table keyed by op name, applied to the inputs of every primitive in
``apply`` (so methods, functions and composites all follow it) plus entry casts of the
composite functions listed in ``FP32_FUNCTIONS`` (losses and norms), decorated with
``@float32_under_autocast``:

- ``LOWER_PRECISION``: float32 inputs are cast to the autocast dtype (float64 is left alone).
- ``FLOAT32``: float16/bfloat16 inputs are cast to float32.
- every other op runs in the dtype its inputs promote to (PyTorch's rules).

Casts of leaf tensors (weights) are cached for the duration of the outermost autocast block.
"""

from __future__ import annotations

import functools

from munet import _dtype as D
from munet._device import as_device
from munet._tensor import Tensor
from munet.ops import _registry

LOWER_PRECISION = frozenset({"matmul", "convolution"})
FLOAT32 = frozenset(
    {
        "softmax",
        "log_softmax",
        "standardize",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "pow",
        "sum",
        "nansum",
        "prod",
        "cumsum",
        "cumprod",
        "logsumexp",
        "erfinv",
        "reciprocal",
        "rsqrt",
        "softplus",
        "acos",
        "asin",
        "cosh",
        "sinh",
        "tan",
        "grid_sampler_2d",
        "embedding_backward",
    }
)
FP32_FUNCTIONS: set[str] = set()


class _State:
    depth = 0
    dtype = None
    device_type = None
    cache: dict = {}


def is_autocast_enabled(device_type: str | None = None) -> bool:
    return _State.depth > 0 and _State.dtype is not None and (device_type is None or device_type == _State.device_type)


def get_autocast_dtype(device_type: str = "cpu"):
    return _State.dtype if _State.dtype is not None else D.bfloat16


def _cast(t, dtype):
    from munet.ops.convert import cast

    if t._grad_fn is None and t.requires_grad:
        key = (id(t), dtype)
        hit = _State.cache.get(key)
        if hit is not None and hit[0] is t and hit[2] == t._version:
            return hit[1]
        out = cast(t, dtype)
        _State.cache[key] = (t, out, t._version)
        return out
    return cast(t, dtype)


def _cast_all(args, wanted, eligible):
    out = []
    for a in args:
        if isinstance(a, Tensor) and eligible(a.dtype):
            out.append(_cast(a, wanted))
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
            out.append(type(a)(_cast(x, wanted) if eligible(x.dtype) else x for x in a))
        else:
            out.append(a)
    return tuple(out)


def _low(dtype) -> bool:
    return dtype is D.float16 or dtype is D.bfloat16


def _cast_inputs(op, args):
    name = op.name
    if name in LOWER_PRECISION:
        target = _State.dtype
        return _cast_all(args, target, lambda d: d.is_floating_point and d is not D.float64 and d is not target)
    if name in FLOAT32:
        return _cast_all(args, D.float32, _low)
    return args


def float32_under_autocast(fn):
    """Decorator for composite functions (losses, norms) that autocast runs in float32."""
    FP32_FUNCTIONS.add(fn.__name__)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _State.depth == 0:
            return fn(*args, **kwargs)
        args = _cast_all(args, D.float32, _low)
        kwargs = {k: (_cast(v, D.float32) if isinstance(v, Tensor) and _low(v.dtype) else v) for k, v in kwargs.items()}
        return fn(*args, **kwargs)

    return wrapper


class autocast:  # noqa: N801 - PyTorch's name
    """Mixed precision for the enclosed region: ``with munet.autocast("cpu", dtype=munet.bfloat16):``."""

    def __init__(self, device_type: str = "cpu", dtype=None, enabled: bool = True, cache_enabled: bool = True):
        device_type = as_device(device_type).type
        if dtype is None:
            dtype = D.bfloat16 if device_type == "cpu" else D.float16
        if dtype not in (D.float16, D.bfloat16):
            raise ValueError(f"autocast: dtype must be munet.float16 or munet.bfloat16, got {dtype!r}")
        self.device_type = device_type
        self.fast_dtype = dtype
        self.enabled = enabled
        self.cache_enabled = cache_enabled

    def __enter__(self):
        self._prev = (_State.depth, _State.dtype, _State.device_type, _registry._Autocast.cast_inputs)
        if self.enabled:
            _State.depth += 1
            _State.dtype = self.fast_dtype
            _State.device_type = self.device_type
            _registry._Autocast.cast_inputs = _cast_inputs
        else:
            _State.depth = 0
            _State.dtype = None
            _registry._Autocast.cast_inputs = None
        return self

    def __exit__(self, *exc):
        _State.depth, _State.dtype, _State.device_type, _registry._Autocast.cast_inputs = self._prev
        if _State.depth == 0:
            _State.cache = {}
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled, self.cache_enabled):
                return fn(*args, **kwargs)

        return wrapper

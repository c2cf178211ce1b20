"""Autocast policy: which ops run in low precision and which in float32 under ``munet.autocast``.

The policy is a table keyed by op name, applied to the inputs of every op in ``apply`` (a
registered composite's decomposition then runs without autocast, as a native op would), plus entry casts of
composite functions decorated with ``@float32_under_autocast`` (the losses) or
``@lower_precision_under_autocast`` (linear and convolutions, whose bias joins the low dtype as
in PyTorch instead of promoting the result back to float32):

- ``LOWER_PRECISION``: float32 inputs are cast to the autocast dtype (float64 is left alone).
- ``FLOAT32``: float16/bfloat16 inputs are cast to float32 (PyTorch's CUDA list). On cpu only
  ``CPU_FLOAT32`` is, PyTorch's narrower CPU list: a bfloat16 softmax stays bfloat16 there.
- every other op runs in the dtype its inputs promote to (PyTorch's rules).

Autocast is on per device type (``autocast("cpu")`` casts only ops on cpu tensors); the device
type of an op is that of its first tensor argument.

Casts of leaf tensors (weights) are cached for the duration of the outermost autocast block.
``munet.amp.autocast`` switches the policy on and off. The switch, the dtype and the cache are
per thread, as in PyTorch: autocast in one thread leaves another's ops in their own precision.
"""

from __future__ import annotations

import functools
import threading

from munet import _dtype as D
from munet._tensor import Tensor

LOWER_PRECISION = frozenset({"matmul", "convolution", "scaled_dot_product_attention"})
FLOAT32 = frozenset(
    {
        "softmax",
        "log_softmax",
        "standardize",
        "layer_norm",
        "group_norm",
        "rms_norm",
        "batch_norm",
        "instance_norm",
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
        "grid_sampler_2d_bicubic",
        "grid_sampler_3d",
        "embedding_backward",
    }
)
# PyTorch's CPU policy is narrower: of the primitives above, only these run in float32 on cpu; the
# rest keep their input's dtype there (a bfloat16 softmax stays bfloat16 under CPU autocast).
CPU_FLOAT32 = frozenset({"prod", "grid_sampler_2d", "grid_sampler_2d_bicubic", "grid_sampler_3d", "embedding_backward"})
# composite losses that PyTorch's CPU policy does not list: on cpu they run in their inputs' dtype
CPU_KEEP_DTYPE_FUNCTIONS = frozenset({"gaussian_nll_loss", "multilabel_soft_margin_loss"})
FP32_FUNCTIONS: set[str] = set()
LOWER_PRECISION_FUNCTIONS: set[str] = set()


class _AutocastState(threading.local):
    """This thread's autocast: the dtype of each device type autocast is on for, the dtype each
    device type was last set to (``get_autocast_dtype``), the nesting depth, and the weight-cast
    cache (and whether to use it); the class attributes are what a new thread starts with."""

    depth = 0
    cache_enabled = True

    def __init__(self):
        self.dtypes: dict = {}  # device type -> autocast dtype, for the device types autocast is on for
        self.fast_dtypes: dict = {}  # device type -> dtype set by the innermost block (enabled or not)
        self.cache: dict = {}  # (id(leaf), dtype) -> (leaf, its cast, leaf version); this thread's


_State = _AutocastState()


def _device_type_of(args):
    """The device type of the first tensor among ``args`` (tensors or lists of tensors), or None."""
    for a in args:
        if isinstance(a, Tensor):
            return a.device.type
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
            return a[0].device.type
    return None


def _autocast_of(args, kwargs=None):
    """(device type, autocast dtype) for an op on these arguments, or (None, None) where autocast is
    off for their device in this thread."""
    if not _State.dtypes:
        return None, None
    device_type = _device_type_of(args)
    if device_type is None and kwargs:
        device_type = _device_type_of(tuple(kwargs.values()))
    dtype = _State.dtypes.get(device_type)
    return (device_type, dtype) if dtype is not None else (None, None)


def _cast(t, dtype):
    from munet.ops.convert import cast

    if t._grad_fn is None and t.requires_grad and _State.cache_enabled:
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


def _lowerable(target):
    """Which input dtypes autocast casts to ``target`` (float64 is left alone, as in PyTorch)."""
    return lambda d: d.is_floating_point and d is not D.float64 and d is not target


def _cast_inputs(op, args):
    name = op.name
    if name not in LOWER_PRECISION and name not in FLOAT32:
        return args
    device_type, dtype = _autocast_of(args)
    if dtype is None:
        return args
    if name in LOWER_PRECISION:
        return _cast_all(args, dtype, _lowerable(dtype))
    if device_type != "cpu" or name in CPU_FLOAT32:
        return _cast_all(args, D.float32, _low)
    return args


def casts_to_one_dtype(dtypes) -> bool:
    """Whether autocast, on in this thread, casts operands of these floating ``dtypes`` of a
    ``LOWER_PRECISION`` primitive to its dtype (a composite's same-dtype check lets the mix through)."""
    return bool(_State.dtypes) and all(d.is_floating_point and d is not D.float64 for d in dtypes)


def _entry_casts(fn, target_of):
    """``fn`` with its tensor arguments cast at entry while autocast is on for their device in this
    thread; ``target_of(device type, autocast dtype)`` gives the dtype and which input dtypes are
    cast to it, or None to leave them."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        device_type, dtype = _autocast_of(args, kwargs)
        rule = None if dtype is None else target_of(device_type, dtype)
        if rule is None:
            return fn(*args, **kwargs)
        target, eligible = rule
        args = _cast_all(args, target, eligible)
        kwargs = {
            k: (_cast(v, target) if isinstance(v, Tensor) and eligible(v.dtype) else v) for k, v in kwargs.items()
        }
        return fn(*args, **kwargs)

    return wrapper


def float32_under_autocast(fn):
    """Decorator for composite functions (losses, norms) that autocast runs in float32."""
    FP32_FUNCTIONS.add(fn.__name__)
    keeps_dtype_on_cpu = fn.__name__ in CPU_KEEP_DTYPE_FUNCTIONS
    return _entry_casts(
        fn, lambda device_type, dtype: None if keeps_dtype_on_cpu and device_type == "cpu" else (D.float32, _low)
    )


def lower_precision_under_autocast(fn):
    """Decorator for composite functions whose every floating input (bias included) autocast
    casts to its dtype, as PyTorch's lower-precision list does for ``linear`` and the convolutions."""
    LOWER_PRECISION_FUNCTIONS.add(fn.__name__)
    return _entry_casts(fn, lambda device_type, dtype: (dtype, _lowerable(dtype)))


def float32_region_under_autocast(fn):
    """Decorator for composites that PyTorch runs as one float32 op under autocast (the linalg
    factorizations and solves): float16/bfloat16 inputs are cast to float32 at entry, and autocast
    is off inside, so the composite's own matmuls stay in float32 as the native op's would."""
    FP32_FUNCTIONS.add(fn.__name__)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _autocast_of(args, kwargs)[1] is None:
            return fn(*args, **kwargs)
        from munet.ops._registry import _Autocast

        args = _cast_all(args, D.float32, _low)
        kwargs = {k: (_cast(v, D.float32) if isinstance(v, Tensor) and _low(v.dtype) else v) for k, v in kwargs.items()}
        saved = _State.dtypes, _Autocast.cast_inputs
        _State.dtypes, _Autocast.cast_inputs = {}, None
        try:
            return fn(*args, **kwargs)
        finally:
            _State.dtypes, _Autocast.cast_inputs = saved

    return wrapper

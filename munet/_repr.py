"""PyTorch-style ``repr`` of tensors: ``tensor([1.0000, 2.5000], requires_grad=True)``."""

from __future__ import annotations

import numpy as np

from munet import _dtype as D

_PRECISION = 4
_THRESHOLD = 1000
_EDGEITEMS = 3


def _float_formatter(values: np.ndarray):
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return lambda v: _special(v) or f"{v:.0f}."
    absval = np.abs(finite)
    nonzero = absval[absval != 0]
    integral = bool(np.all(finite == np.round(finite)))
    big, small = (float(nonzero.max()), float(nonzero.min())) if nonzero.size else (0.0, 0.0)
    if integral and big < 1e8:
        width = max(len(f"{v:.0f}") for v in finite) + 1
        return lambda v: (_special(v) or f"{v:.0f}.").rjust(width)
    if nonzero.size and (big / small > 1000.0 or big > 1e8 or small < 1e-4):
        return lambda v: _special(v) or f"{v:.{_PRECISION}e}"
    width = max(len(f"{v:.{_PRECISION}f}") for v in finite)
    return lambda v: (_special(v) or f"{v:.{_PRECISION}f}").rjust(width)


def _special(v) -> str | None:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def _format_data(t) -> str:
    arr = t.detach().cpu().numpy()
    if t.dtype in (D.float16, D.bfloat16):
        arr = arr.astype(np.float32)
    summarize = arr.size > _THRESHOLD
    if t.dtype.is_floating_point:
        shown = _edge_values(arr) if summarize else arr.reshape(-1)
        fmt = _float_formatter(shown.astype(np.float64))
        formatter = {"float_kind": lambda v: fmt(float(v))}
    elif t.dtype is D.bool_:
        width = 5 if arr.size and not arr.all() else 4
        formatter = {"bool": lambda v: ("True" if v else "False").rjust(width)}
    else:
        shown = _edge_values(arr) if summarize else arr.reshape(-1)
        width = max((len(str(int(v))) for v in shown), default=1)
        formatter = {"int": lambda v: str(int(v)).rjust(width)}
    return np.array2string(
        arr,
        separator=", ",
        prefix="tensor(",
        formatter=formatter,
        threshold=_THRESHOLD,
        edgeitems=_EDGEITEMS,
        max_line_width=80,
    )


def _edge_values(arr: np.ndarray) -> np.ndarray:
    if arr.ndim == 0:
        return arr.reshape(-1)
    index = tuple(np.r_[0 : min(_EDGEITEMS, n), max(n - _EDGEITEMS, 0) : n] for n in arr.shape)
    return arr[np.ix_(*index)].reshape(-1)


def tensor_repr(t) -> str:
    suffixes = []
    if t.numel() == 0 and t.ndim != 1:
        data = "[]"
        suffixes.append(f"size={tuple(t.shape)}")
    else:
        data = _format_data(t)
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    default_dtypes = (D.get_default_dtype(), D.int64, D.bool_)
    if t.dtype not in default_dtypes or (t.numel() == 0 and t.dtype is not D.get_default_dtype() and t.ndim == 1):
        suffixes.append(f"dtype=munet.{t.dtype.name}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    body = data + "".join(", " + s for s in suffixes)
    return f"tensor({body})"

"""PyTorch-style ``repr`` of tensors: ``tensor([1.0000, 2.5000], requires_grad=True)``."""

from __future__ import annotations

import numpy as np

from munet import _dtype as D

_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": float("inf"), "edgeitems": 3, "linewidth": 80},
}
_OPTIONS = dict(_PROFILES["default"], sci_mode=None)  # process-wide, as PyTorch's print options


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """PyTorch's print options: digits after the point, the element count above which a tensor is
    summarized, the items shown at each edge then, the line width, a ``profile`` ("default",
    "short", "full") setting the first four, and ``sci_mode`` (True/False forces scientific
    notation on or off; None decides per tensor)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        _OPTIONS.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems)):
        if value is not None:
            _OPTIONS[name] = value
    if linewidth is not None:
        _OPTIONS["linewidth"] = linewidth
    _OPTIONS["sci_mode"] = sci_mode


def get_printoptions() -> dict:
    return dict(_OPTIONS)


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
    precision, sci_mode = _OPTIONS["precision"], _OPTIONS["sci_mode"]
    if sci_mode is None:
        sci_mode = bool(nonzero.size) and (big / small > 1000.0 or big > 1e8 or small < 1e-4)
    spec = f".{precision}{'e' if sci_mode else 'f'}"
    width = max(len(format(v, spec)) for v in finite)
    return lambda v: (_special(v) or format(v, spec)).rjust(width)


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
    summarize = arr.size > _OPTIONS["threshold"]
    shown = _edge_values(arr) if summarize else arr.reshape(-1)
    if t.dtype.is_floating_point:
        float_fmt = _float_formatter(shown.astype(np.float64))

        def fmt(v):
            return float_fmt(float(v))
    elif t.dtype.is_complex:
        fmt = _complex_formatter(shown)
    elif t.dtype is D.bool_:
        width = 5 if shown.size and not shown.all() else 4

        def fmt(v):
            return ("True" if v else "False").rjust(width)
    else:
        width = max((len(str(int(v))) for v in shown), default=1)

        def fmt(v):
            return str(int(v)).rjust(width)

    return _nested_str(arr, len("tensor("), summarize, fmt)


def _complex_formatter(values: np.ndarray):
    """PyTorch's complex layout: the real parts aligned as floats, then the signed imaginary part."""
    real_fmt = _float_formatter(values.real.astype(np.float64))
    imag_fmt = _float_formatter(values.imag.astype(np.float64))

    def fmt(v):
        imag = imag_fmt(float(v.imag)).lstrip() + "j"
        return real_fmt(float(v.real)) + (imag if imag[0] in "+-" else "+" + imag)

    return fmt


def _nested_str(arr: np.ndarray, indent: int, summarize: bool, fmt) -> str:
    """PyTorch's layout of the values: rows wrapped at the line width, summarized dims elided."""
    edge = _OPTIONS["edgeitems"]
    elide = summarize and arr.shape and arr.shape[0] > 2 * edge
    if arr.ndim == 0:
        return fmt(arr.item()).strip()
    if arr.ndim == 1:
        items = [fmt(v) for v in (arr[:edge] if elide else arr)]
        if elide:
            items += [" ..."] + [fmt(v) for v in arr[-edge:]]
        per_line = max(1, int((_OPTIONS["linewidth"] - indent) // (len(fmt(arr[0])) + 2))) if arr.size else 1
        lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = range(edge) if elide else range(arr.shape[0])
    parts = [_nested_str(arr[i], indent + 1, summarize, fmt) for i in rows]
    if elide:
        parts += ["..."] + [_nested_str(arr[i], indent + 1, summarize, fmt) for i in range(len(arr) - edge, len(arr))]
    return "[" + ("," + "\n" * (arr.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _edge_values(arr: np.ndarray) -> np.ndarray:
    if arr.ndim == 0:
        return arr.reshape(-1)
    edge = _OPTIONS["edgeitems"]
    index = tuple(np.r_[0 : min(edge, n), max(n - edge, 0) : n] for n in arr.shape)
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
    default_dtypes = (D.get_default_dtype(), D.get_default_dtype().to_complex(), D.int64, D.bool_)
    if t.dtype not in default_dtypes or (t.numel() == 0 and t.dtype is not D.get_default_dtype() and t.ndim == 1):
        suffixes.append(f"dtype=munet.{t.dtype.name}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    body = data + "".join(", " + s for s in suffixes)
    return f"tensor({body})"

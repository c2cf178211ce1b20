"""``munet.testing.assert_close``: PyTorch's closeness check for tensors, numbers and containers.

Values are compared on the host with NumPy. Defaults, checks and messages are PyTorch's:

>>> munet.testing.assert_close(munet.tensor([1.0, 2.0]), munet.tensor([1.0, 2.5]))
AssertionError: Tensor-likes are not close!
<BLANKLINE>
Mismatched elements: 1 / 2 (50.0%)
...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from munet import _dtype as D
from munet._tensor import Tensor

__all__ = ["assert_close"]

# PyTorch's default (rtol, atol) per dtype; integer and bool dtypes compare exactly.
DEFAULT_TOLERANCES = {
    D.float16: (1e-3, 1e-5),
    D.bfloat16: (1.6e-2, 1e-5),
    D.float32: (1.3e-6, 1e-5),
    D.float64: (1e-7, 1e-7),
}


class _MismatchError(Exception):
    """A failed comparison: ``error`` is the exception type, ``path`` where in the containers."""

    def __init__(self, error: type, message: str, path: str = ""):
        super().__init__(message)
        self.error, self.message, self.path = error, message, path


def _tolerances(dtypes, rtol, atol) -> tuple[float, float]:
    if (rtol is None) != (atol is None):
        missing = "atol" if atol is None else "rtol"
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}.")
    if rtol is not None:
        return rtol, atol
    pairs = [DEFAULT_TOLERANCES.get(d, (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _mismatched(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    if actual.dtype.kind in "biu":
        return actual != expected
    with np.errstate(invalid="ignore"):
        close = (np.abs(actual - expected) <= atol + rtol * np.abs(expected)) & np.isfinite(expected)
    close |= actual == expected  # infinities of one sign
    if equal_nan:
        close |= np.isnan(actual) & np.isnan(expected)
    return ~close


def _greatest(diff: np.ndarray) -> tuple[object, tuple]:
    flat = diff.reshape(-1)
    nan = np.flatnonzero(np.isnan(flat)) if flat.dtype.kind == "f" else []
    i = int(nan[0]) if len(nan) else int(np.argmax(flat))
    return flat[i].item(), tuple(int(k) for k in np.unravel_index(i, diff.shape))


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype) -> None:
    for attribute in ("shape",) + (("device",) if check_device else ()) + (("dtype",) if check_dtype else ()):
        a, e = getattr(actual, attribute), getattr(expected, attribute)
        if a != e:
            raise _MismatchError(AssertionError, f"The values for attribute '{attribute}' do not match: {a} != {e}.")
    rtol, atol = _tolerances((actual.dtype, expected.dtype), rtol, atol)
    common = D.promote_types(actual.dtype, expected.dtype)
    a = actual.detach().cpu().numpy().astype(common.np)
    e = expected.detach().cpu().numpy().astype(common.np)
    bad = _mismatched(a, e, rtol, atol, equal_nan)
    if not bad.any():
        return
    exact = common.category != 2
    if exact:
        a, e = a.astype(np.int64), e.astype(np.int64)
    abs_diff = np.abs(a - e)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_diff = abs_diff / np.abs(e).astype(np.float64 if exact else e.dtype)
    (abs_max, abs_at), (rel_max, rel_at) = _greatest(abs_diff), _greatest(rel_diff)
    allowed_abs = "" if exact else f" (up to {atol} allowed)"
    allowed_rel = "" if exact else f" (up to {rtol} allowed)"
    count, total = int(bad.sum()), bad.size
    raise _MismatchError(
        AssertionError,
        f"Tensor-likes are not {'equal' if exact else 'close'}!\n\n"
        f"Mismatched elements: {count} / {total} ({count / total:.1%})\n"
        f"Greatest absolute difference: {abs_max} at index {abs_at}{allowed_abs}\n"
        f"Greatest relative difference: {rel_max} at index {rel_at}{allowed_rel}",
    )


def _compare_numbers(actual, expected, rtol, atol, equal_nan) -> None:
    exact = not any(isinstance(x, float) for x in (actual, expected))
    rtol, atol = _tolerances((D.int64,) if exact else (D.float64,), rtol, atol)
    if not _mismatched(np.array(actual), np.array(expected), rtol, atol, equal_nan).any():
        return
    abs_diff = abs(actual - expected)
    rel_diff = abs_diff / abs(expected) if expected else float("inf")
    allowed_abs, allowed_rel = ("", "") if exact else (f" (up to {atol} allowed)", f" (up to {rtol} allowed)")
    raise _MismatchError(
        AssertionError,
        f"Scalars are not {'equal' if exact else 'close'}!\n\nExpected {expected} but got {actual}.\n"
        f"Absolute difference: {abs_diff}{allowed_abs}\nRelative difference: {rel_diff}{allowed_rel}",
    )


def _compare(actual, expected, path: str, options: dict) -> None:
    try:
        _compare_pair(actual, expected, path, options)
    except _MismatchError as mismatch:
        if not mismatch.path:
            mismatch.path = path
        raise


def _compare_pair(actual, expected, path: str, options: dict) -> None:
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        return _compare_tensors(actual, expected, **options)
    if all(isinstance(x, (bool, int, float)) for x in (actual, expected)):
        if options["check_dtype"] and type(actual) is not type(expected):
            raise _MismatchError(
                AssertionError, f"The values for attribute 'dtype' do not match: {type(actual)} != {type(expected)}."
            )
        return _compare_numbers(actual, expected, options["rtol"], options["atol"], options["equal_nan"])
    if all(isinstance(x, Sequence) and not isinstance(x, str) for x in (actual, expected)):
        if len(actual) != len(expected):
            raise _MismatchError(
                AssertionError, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}"
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, f"{path}[{i}]", options)
        return None
    if all(isinstance(x, Mapping) for x in (actual, expected)):
        if set(actual) != set(expected):
            raise _MismatchError(
                AssertionError,
                f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                f"{sorted(map(repr, set(expected) - set(actual)))}\nExtra keys in the actual mapping: "
                f"{sorted(map(repr, set(actual) - set(expected)))}",
            )
        for key in expected:
            _compare(actual[key], expected[key], f"{path}[{key!r}]", options)
        return None
    raise _MismatchError(
        TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}."
    )


def assert_close(
    actual,
    expected,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg=None,
) -> None:
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` (tensors, Python numbers, or
    sequences and mappings of them) are close: ``|actual - expected| <= atol + rtol * |expected|``
    elementwise, with shape, device and dtype equal. Default tolerances follow the dtype (float32:
    ``rtol=1.3e-6, atol=1e-5``; integers and bool exactly). ``msg`` (a string, or a callable
    taking the generated message) replaces the message. ``allow_subclasses`` and ``check_layout``
    are accepted for PyTorch's signature: every MuNet tensor is a strided ``munet.Tensor``."""
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype)
    if (
        check_stride
        and isinstance(actual, Tensor)
        and isinstance(expected, Tensor)
        and actual.stride() != expected.stride()
    ):
        raise AssertionError(
            f"The values for attribute 'stride()' do not match: {actual.stride()} != {expected.stride()}."
        )
    try:
        _compare(actual, expected, "", options)
    except _MismatchError as mismatch:
        message = mismatch.message
        if mismatch.path:
            message += f"\n\nThe failure occurred for item {mismatch.path}"
        if callable(msg):
            message = msg(message)
        elif msg is not None:
            message = msg
        raise mismatch.error(message) from None

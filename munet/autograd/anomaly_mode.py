"""Anomaly detection: ``detect_anomaly`` and ``set_detect_anomaly``, per thread like grad mode.

In anomaly mode every backward node keeps the stack of the forward call that created it, and
the backward engine checks each gradient a node returns: a NaN raises ``RuntimeError`` naming
the node (``Function 'MulBackward0' returned nan values in its 0th output.``), and any error in
a node's backward is preceded by a warning that shows that forward stack, as PyTorch does.
"""

from __future__ import annotations

import functools
import threading
import traceback
import warnings


class _AnomalyMode(threading.local):
    """This thread's anomaly mode; the class attributes are every new thread's defaults."""

    enabled = False
    check_nan = True


_Anomaly = _AnomalyMode()


def is_anomaly_enabled() -> bool:
    return _Anomaly.enabled


def is_anomaly_check_nan_enabled() -> bool:
    return _Anomaly.check_nan


class detect_anomaly:  # noqa: N801
    """Turn anomaly detection on inside the block or decorated function.

    >>> with munet.autograd.detect_anomaly():
    ...     loss.backward()   # a NaN gradient raises, naming the op whose backward made it
    """

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should only be enabled "
            "for debugging.",
            stacklevel=2,
        )

    def __enter__(self) -> None:
        self._prev = (_Anomaly.enabled, _Anomaly.check_nan)
        _Anomaly.enabled, _Anomaly.check_nan = True, self.check_nan

    def __exit__(self, *exc) -> bool:
        _Anomaly.enabled, _Anomaly.check_nan = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:  # noqa: N801
    """Set anomaly detection to ``mode``: a function call, or a context manager restoring the old mode."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self._prev = (_Anomaly.enabled, _Anomaly.check_nan)
        _Anomaly.enabled, _Anomaly.check_nan = bool(mode), bool(check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> bool:
        _Anomaly.enabled, _Anomaly.check_nan = self._prev
        return False


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """``torch.set_anomaly_enabled``: switch anomaly mode for this thread."""
    _Anomaly.enabled, _Anomaly.check_nan = bool(enabled), bool(check_nan)


def forward_stack() -> str | None:
    """The current Python stack, for a node created in anomaly mode (``None`` otherwise)."""
    if not _Anomaly.enabled:
        return None
    return "".join(traceback.format_stack()[:-2])


def check_for_nan(node_name: str, grads) -> None:
    """Raise if a floating gradient a backward node returned holds a NaN (anomaly mode only)."""
    for i, g in enumerate(grads):
        if g is not None and g.is_sparse:
            g = g._values()  # a sparse gradient's stored values
        if g is not None and g.dtype.is_floating_point and bool(g.isnan().any()):
            raise RuntimeError(f"Function '{node_name}' returned nan values in its {i}th output.")


def warn_forward_stack(node_name: str, stack: str | None) -> None:
    """Before an error in ``node_name``'s backward propagates: the forward call that created it."""
    if stack is None:
        warnings.warn(
            f"Error detected in {node_name}. No forward pass information available. Enable detect anomaly during "
            "forward pass for more information.",
            stacklevel=2,
        )
        return
    warnings.warn(
        f"Error detected in {node_name}. Traceback of forward call that caused the error:\n{stack}", stacklevel=2
    )

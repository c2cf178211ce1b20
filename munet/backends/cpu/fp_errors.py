"""Running a kernel with NumPy's floating-point warnings off, cheaply.

PyTorch never warns about overflow, division by zero or invalid values, so the CPU kernels run
their ufuncs as under ``np.errstate(all="ignore")``. Entering ``np.errstate`` costs about as much
as a ufunc call on a small tensor (it rebuilds NumPy's error-state object each time), so
:func:`call_ignoring` sets NumPy's error-state context variable to a cached "ignore all" state
and restores it after the call: the same effect, for two context-variable writes. The cached
state is derived from the state in force (buffer size and error callback kept); NumPy versions
without that context variable (before 2.0) get ``np.errstate`` itself.
"""

from __future__ import annotations

import numpy as np

try:
    from numpy._core.umath import _extobj_contextvar as _STATE
except ImportError:  # NumPy 1.x keeps its error state elsewhere: errstate serves
    _STATE = None

# (the state in force, the same state with every error ignored); one entry, replaced when the
# state in force changes (a caller inside its own np.errstate), swapped whole so threads agree
_cached = (None, None)


def _ignoring(current):
    global _cached
    with np.errstate(all="ignore"):
        ignoring = _STATE.get()
    _cached = (current, ignoring)
    return ignoring


def call_ignoring(fn, *args):
    """``fn(*args)`` with every NumPy floating-point error ignored, as ``np.errstate(all="ignore")``."""
    current = _STATE.get()
    seen, ignoring = _cached
    token = _STATE.set(ignoring if seen is current else _ignoring(current))
    try:
        return fn(*args)
    finally:
        _STATE.reset(token)


if _STATE is None:

    def call_ignoring(fn, *args):  # noqa: F811 - NumPy 1.x: the public context manager
        """``fn(*args)`` with every NumPy floating-point error ignored, as ``np.errstate(all="ignore")``."""
        with np.errstate(all="ignore"):
            return fn(*args)

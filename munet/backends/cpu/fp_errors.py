"""Running a kernel with NumPy's floating-point warnings off, cheaply.

PyTorch never warns about overflow, division by zero or invalid values, so the CPU kernels run
their ufuncs as under ``np.errstate(all="ignore")``. Entering ``np.errstate`` costs about as much
as a ufunc call on a small tensor (it rebuilds NumPy's error-state object each time), so
:func:`ignore` sets NumPy's error-state context variable to a cached "ignore all" state and
:func:`restore` puts back the one before (:func:`call_ignoring` wraps a call in the two): the same
effect, for two context-variable writes. The cached
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


def ignore():
    """Ignore every NumPy floating-point error from now on in this context, as entering
    ``np.errstate(all="ignore")`` does; ``restore(token)`` with the token returned undoes it. For
    code that cannot afford a call around its work (the rendered formulas, small matrix products):
    ``token = ignore()``, then ``try: ... finally: restore(token)``."""
    current = _STATE.get()
    seen, ignoring = _cached
    return _STATE.set(ignoring if seen is current else _ignoring(current))


def call_ignoring(fn, *args):
    """``fn(*args)`` with every NumPy floating-point error ignored, as ``np.errstate(all="ignore")``."""
    token = ignore()
    try:
        return fn(*args)
    finally:
        restore(token)


if _STATE is None:  # NumPy 1.x: the public context manager

    def ignore():  # noqa: F811
        """Enter ``np.errstate(all="ignore")``; ``restore(token)`` leaves it."""
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def restore(state) -> None:
        state.__exit__(None, None, None)

    # (never matched: the hot paths' form below always calls ignore())
    DEFAULT = IGNORING_DEFAULT = object()

    def get_state():
        return None

    set_state = None
else:
    restore = _STATE.reset
    # The hot paths' form of ``ignore()``, without its call when the state in force is the one NumPy
    # started with: ``token = set_state(IGNORING_DEFAULT) if get_state() is DEFAULT else ignore()``.
    get_state, set_state = _STATE.get, _STATE.set
    DEFAULT = _STATE.get()
    IGNORING_DEFAULT = _ignoring(DEFAULT)

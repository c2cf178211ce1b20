"""``munet.use_deterministic_algorithms`` and the deterministic debug mode (PyTorch's flags).

Every cpu kernel of MuNet is deterministic: NumPy and the generated C kernels reduce in a fixed
order. The nondeterministic kernels are the vulkan ones that accumulate float32 values with atomic
compare-and-swap loops (``scatter_add``/``scatter_reduce`` sum, mean and prod, ``index_put_`` with
``accumulate=True``, ``index_add_``, and the backward of ``cummax``/``cummin``): the order of the
additions, hence the last bits, changes from run to run. With the flag on they call
:func:`alert_not_deterministic`, which raises as PyTorch does (or warns with ``warn_only=True``).
The flag is process-wide, as in PyTorch.

>>> munet.use_deterministic_algorithms(True)
>>> munet.are_deterministic_algorithms_enabled()
True
"""

from __future__ import annotations

import warnings

_MODES = ("default", "warn", "error")
_state = {"enabled": False, "warn_only": False}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Make ops with only a nondeterministic kernel raise (``warn_only=True``: warn) when they run."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(
            f"use_deterministic_algorithms(): argument 'warn_only' must be bool, not {type(warn_only).__name__}"
        )
    _state.update(enabled=mode, warn_only=warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _state["enabled"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state["warn_only"]


def set_deterministic_debug_mode(debug_mode: str | int) -> None:
    """The same flag as a mode: ``"default"``/0 (off), ``"warn"``/1 (warn only), ``"error"``/2 (raise)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _MODES:
            raise RuntimeError(
                f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got {debug_mode}"
            )
        debug_mode = _MODES.index(debug_mode)
    elif not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    if not _state["enabled"]:
        return 0
    return 1 if _state["warn_only"] else 2


def alert_not_deterministic(caller: str) -> None:
    """Called by a kernel that is not deterministic: raises (or warns) when the flag asks for it."""
    if not _state["enabled"]:
        return
    message = (
        f"{caller} does not have a deterministic implementation, but you set "
        "'munet.use_deterministic_algorithms(True)'. You can turn off determinism just for this operation, "
        "or you can use the 'warn_only=True' option, if that's acceptable for your application."
    )
    if _state["warn_only"]:
        warnings.warn(message, UserWarning, stacklevel=3)
        return
    raise RuntimeError(message)

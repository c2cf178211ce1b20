"""Value checks that run where the data is: ``check_values(ok, message, error, value)``.

A check that needs a tensor's values (class indices in range, probabilities in [0, 1], a
variance that is not negative) is this op, never a host read, so it means the same in eager
mode and in a compiled program, like PyTorch's device-side asserts. The ``check`` primitive
takes a bool tensor ``ok`` and raises ``error(message)`` when it is False anywhere:

- on cpu its kernel raises at the op, in eager mode and when a compiled program runs the node;
- on vulkan its kernel records a fault (``backends/vulkan/device_asserts.py``) that the next
  synchronization raises, as the index checks of gather and embedding do.

The op is *effectful*: the compiler never removes, merges, folds or fuses its node (its output,
a 0-dim ``True``, is a token nothing reads). ``message`` may name ``{value}``: the element of
the integer tensor ``value`` (``ok``'s shape) at the first failing position (on vulkan: at one
failing position), and ``{index}``: that position (flat, row-major).

    check_values((t >= 0) & (t < n), f"nll_loss: target {{value}} is out of bounds for {n} classes", IndexError, t)
"""

from __future__ import annotations

from munet import _dtype as D
from munet.ops._registry import Meta, apply, define

__all__: list[str] = []


class IndexOutOfRangeError(IndexError, RuntimeError):
    """An index outside ``[-size, size)`` (or ``[0, size)`` for ops without negative indices), raised by
    every backend's kernels and by the index checks of decompositions (PyTorch raises IndexError for
    some ops, RuntimeError for gather/scatter)."""


# The errors a check raises, by name (an attribute of the graph node, so saved programs keep it).
ERRORS = {
    "IndexError": IndexError,
    "ValueError": ValueError,
    "RuntimeError": RuntimeError,
    "IndexOutOfRangeError": IndexOutOfRangeError,
}


def _check_meta(ok, value, *, message: str, error: str):
    if ok.dtype is not D.bool_:
        raise RuntimeError(f"check: expected ok of dtype bool, got {ok.dtype.name}")
    if value is not None and (value.dtype.is_floating_point or tuple(value.shape) != tuple(ok.shape)):
        raise RuntimeError(
            f"check: expected value of integer dtype and ok's shape {list(ok.shape)}, "
            f"got {value.dtype.name} of shape {list(value.shape)}"
        )
    if error not in ERRORS:
        raise ValueError(f"check: error must be one of {sorted(ERRORS)}, got {error!r}")
    return Meta((), D.bool_)


check_op = define("check", inputs=("ok", "value"), meta=_check_meta, effectful=True)


def check_values(ok, message: str, error: type[Exception] = RuntimeError, value=None) -> None:
    """Raise ``error(message.format(value=...))`` where bool tensor ``ok`` is False (see the module docstring)."""
    if ok.numel():
        apply(check_op, ok, value, message=message, error=error.__name__)


def failure(message: str, error: str, value=None, index: int = 0) -> Exception:
    """The exception a backend's ``check`` kernel raises: ``value`` is the failing element, if any,
    ``index`` its flat position."""
    return ERRORS[error](message.format(value=value, index=index) if value is not None else message)

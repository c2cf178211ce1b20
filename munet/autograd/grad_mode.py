"""Grad mode: whether ops record autograd history (``no_grad``, ``enable_grad``, ...).

Grad mode and inference mode are per thread, as in PyTorch: a block in one thread does not
change what another records, and a new thread starts with grad enabled and inference mode
off, whatever the thread that started it had.
"""

from __future__ import annotations

import functools
import inspect

from munet import _grad_state

_State = _grad_state.STATE


def is_grad_enabled() -> bool:
    return _State.enabled


def is_inference_mode_enabled() -> bool:
    return _State.inference


class _GradModeContext:
    """Base for context managers that are also decorators, like PyTorch's: ``with no_grad():``,
    ``@no_grad()`` and bare ``@no_grad`` all work. A decorated generator function runs each of
    its steps in the mode, as in PyTorch."""

    _target: bool = True

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        if not callable(orig_func):
            raise TypeError(f"{cls.__name__}() takes no arguments, got {orig_func!r}")
        return cls()(orig_func)  # bare ``@no_grad``

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            return self._wrap_generator(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._clone():
                return fn(*args, **kwargs)

        return wrapper

    def _wrap_generator(self, fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            with self._clone():
                gen = fn(*args, **kwargs)
            sent = None
            while True:
                try:
                    with self._clone():
                        item = gen.send(sent)
                except StopIteration as stop:
                    return stop.value
                sent = yield item

        return generator

    def _clone(self):
        """A fresh context of the same kind, so nested and concurrent calls keep their own state."""
        return self.__class__()

    def clone(self):
        return self._clone()

    def __enter__(self):
        self._prev = _State.enabled
        _State.enabled = self._target

    def __exit__(self, *exc):
        _State.enabled = self._prev
        return False


class no_grad(_GradModeContext):  # noqa: N801
    """Disable autograd recording inside the block or decorated function."""

    _target = False


class enable_grad(_GradModeContext):  # noqa: N801
    """Enable autograd recording inside the block, even within ``no_grad``."""

    _target = True


class set_grad_enabled(_GradModeContext):  # noqa: N801
    """Set grad mode to ``mode``; usable as a function call, context manager or decorator."""

    def __new__(cls, mode: bool):
        return object.__new__(cls)

    def __init__(self, mode: bool):
        self._target = bool(mode)
        self._prev = _State.enabled
        _State.enabled = self._target

    def _clone(self):
        return set_grad_enabled(self._target)  # switches at construction, restores at exit

    def __call__(self, fn):
        _State.enabled = self._prev  # as a decorator it switches only inside calls, as in PyTorch
        return super().__call__(fn)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _State.enabled = self._prev
        return False


class inference_mode(_GradModeContext):  # noqa: N801
    """Like ``no_grad``; tensors created inside are marked as inference tensors.

    ``inference_mode(False)`` turns inference mode off and grad mode on inside the block (also
    within ``no_grad``), as in PyTorch. ``@inference_mode``, ``@inference_mode()`` and
    ``@inference_mode(False)`` decorate.
    """

    def __new__(cls, mode=True):
        if isinstance(mode, bool) or not callable(mode):
            return object.__new__(cls)
        return cls()(mode)  # bare ``@inference_mode``

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def _clone(self):
        return inference_mode(self.mode)

    def __enter__(self):
        self._prev = _State.enabled
        self._prev_inf = _State.inference
        _State.enabled = not self.mode
        _State.inference = self.mode

    def __exit__(self, *exc):
        _State.enabled = self._prev
        _State.inference = self._prev_inf
        return False


_multithreading = {"enabled": True}


class set_multithreading_enabled:  # noqa: N801 - PyTorch's name
    """Context manager or function that records whether backward may use worker threads.

    MuNet's backward always runs on the calling thread, so the flag changes nothing; it is kept
    (and restored on exit) so scripts that set it run unchanged.
    """

    def __init__(self, mode: bool) -> None:
        self.prev = _multithreading["enabled"]
        _multithreading["enabled"] = bool(mode)
        self.mode = mode

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        _multithreading["enabled"] = self.prev

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper

    def clone(self) -> set_multithreading_enabled:
        return type(self)(self.mode)


def is_multithreading_enabled() -> bool:
    """The flag ``set_multithreading_enabled`` last set (``True`` by default)."""
    return _multithreading["enabled"]

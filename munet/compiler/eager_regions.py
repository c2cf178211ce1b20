"""``munet.compiler.disable`` and ``munet.compiler.is_compiling``: code that stays out of a trace.

A disabled function called while ``munet.compile`` traces runs as plain eager Python with the
tracer set aside. With ``fullgraph=False`` (the default) the call is a graph break (breaks.py): the
graph traced so far runs, the call runs eagerly on real tensors at every call of the compiled
function, and tracing resumes after it. With ``fullgraph=True`` the graph cannot split: the call runs
once, when the specialization is traced (its side effects happen then, not at every call), and it may
not touch traced tensors nor return tensors (either would have to become part of the graph); both
raise ``HostReadError`` naming the function. Outside a trace it is an ordinary call.
"""

from __future__ import annotations

import contextlib
import functools

from munet._tensor import HOST_READS, Tensor
from munet.compiler.trace import HostReadError, is_symbolic
from munet.ops._registry import _Tracing


def is_compiling() -> bool:
    """True while ``munet.compile`` traces in this thread (the code runs on symbolic tensors)."""
    return _Tracing.tracer is not None


def disable(fn=None, recursive: bool = True, *, reason: str | None = None):
    """Keep ``fn`` out of compiled graphs; ``@munet.compiler.disable`` or ``disable(fn)``, as torch.compiler.disable.

    ``recursive=False`` (PyTorch: skip only ``fn``'s own frame, trace what it calls) is ordinary
    tracing in MuNet, which records ops, not Python frames: ``fn`` is returned unchanged.
    ``reason`` is shown in the error raised when the call cannot stay out of the graph.
    """
    if not isinstance(recursive, bool):
        raise TypeError(f"munet.compiler.disable: recursive must be a bool, got {type(recursive).__name__}")
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    if not callable(fn):
        raise TypeError(f"munet.compiler.disable: expected a callable, got {type(fn).__name__}")
    if not recursive:
        return fn

    @functools.wraps(fn)
    def run_eagerly(*args, **kwargs):
        tracer = _Tracing.tracer
        if tracer is None:
            return fn(*args, **kwargs)
        name = getattr(fn, "__qualname__", repr(fn))
        why = f" (disabled because: {reason})" if reason else ""
        if tracer.breaker is not None:  # fullgraph=False: the graph ends here and the call runs eagerly
            return tracer.breaker.call_eagerly(fn, args, kwargs, name + why)
        if any(is_symbolic(t) for t in _tensors_in((args, kwargs))):
            raise HostReadError(_cannot_stay_out(name, why, "was called with a traced tensor"))
        with _tracer_set_aside():
            try:
                result = fn(*args, **kwargs)
            except HostReadError as exc:
                raise HostReadError(_cannot_stay_out(name, why, "read a tensor the trace holds")) from exc
        if any(True for _ in _tensors_in(result)):
            raise HostReadError(
                _cannot_stay_out(name, why, "returned a tensor, which would be a constant of the graph")
            )
        return result

    return run_eagerly


def _cannot_stay_out(name: str, why: str, what: str) -> str:
    return (
        f"munet.compiler.disable: {name}{why} {what} while munet.compile(fullgraph=True) traces; a disabled "
        "function runs outside the graph, which fullgraph=True does not split, so it may only do untraced "
        "Python (its tensor inputs and outputs would have to be graph values). Compile with fullgraph=False "
        "(a graph break there) or call it outside the compiled function."
    )


@contextlib.contextmanager
def _tracer_set_aside():
    """Ops run eagerly and host reads are not guarded until the block ends (this thread only)."""
    tracer = _Tracing.tracer
    _Tracing.tracer = None
    del HOST_READS.watch
    try:
        yield
    finally:
        _Tracing.tracer = tracer
        HOST_READS.watch = tracer.read_on_host


def _tensors_in(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors_in(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors_in(item)

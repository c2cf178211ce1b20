"""``munet.jit``: PyTorch's TorchScript entry points, answered with :func:`munet.compile`.

``script(fn)`` and ``trace(fn, example_inputs)`` return ``munet.compile(fn)``: the function (or
module) traced through MuNet's dispatcher into a graph and replayed as generated kernels. There
is no TorchScript: the result is a Python callable, not a ``ScriptModule`` (no ``.code``,
``.graph`` or ``.save``), and Python control flow on tensor values is refused as in
``munet.compile``. ``save``/``load`` refuse, since MuNet reads and writes no TorchScript archives:
use ``munet.save(model.state_dict(), path)`` and ``munet.load``.

The TorchScript annotations run as plain Python, which is what MuNet's tracer sees: ``ignore``,
``unused``, ``export``, ``interface`` and ``script_if_tracing`` return their function unchanged,
``annotate(type, value)`` returns ``value``, ``isinstance(obj, list[int])`` checks the parametrized
type at run time, ``Attribute(value, type)`` is a named pair. ``fork(fn, *args)`` runs the call at
once and returns a completed :class:`munet.Future` (``wait`` returns its value): MuNet has no
inter-op thread pool. ``freeze`` and ``optimize_for_inference`` return the module compiled in eval
mode. ``ScriptModule`` and ``ScriptFunction`` exist for ``isinstance`` tests, which are False for
everything MuNet makes (there is no TorchScript object). The oneDNN and fusion-strategy switches
are recorded (``enable_onednn_fusion``, ``set_fusion_strategy`` returns the previous strategy);
MuNet's compiler uses neither.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import types
import typing

from munet.futures import Future

__all__ = [
    "Attribute",
    "Error",
    "Future",
    "ScriptFunction",
    "ScriptModule",
    "annotate",
    "enable_onednn_fusion",
    "export",
    "fork",
    "freeze",
    "ignore",
    "interface",
    "isinstance",
    "load",
    "onednn_fusion_enabled",
    "optimize_for_inference",
    "save",
    "script",
    "script_if_tracing",
    "set_fusion_strategy",
    "strict_fusion",
    "trace",
    "trace_module",
    "unused",
    "wait",
]

_NO_ARCHIVES = (
    "TorchScript archives are not supported by MuNet: save the weights with "
    "munet.save(model.state_dict(), path) and restore them with model.load_state_dict(munet.load(path))"
)


def script(obj, optimize=None, example_inputs=None):
    """``munet.compile(obj)``; ``example_inputs`` (a list of argument tuples), when given, are run
    once so the graph is traced now."""
    from munet.compiler import compile

    compiled = compile(obj)
    for args in example_inputs or ():
        compiled(*args)
    return compiled


def trace(func, example_inputs=None, optimize=None, check_trace: bool = True, strict: bool = True):
    """``munet.compile(func)``, run once on ``example_inputs`` (a tensor or a tuple of them) so
    the graph is traced now, as ``torch.jit.trace`` does."""
    from munet._tensor import Tensor
    from munet.compiler import compile

    compiled = compile(func)
    if example_inputs is not None:
        compiled(*((example_inputs,) if isinstance(example_inputs, Tensor) else example_inputs))
    return compiled


def save(m, f, _extra_files=None) -> None:
    raise RuntimeError(f"munet.jit.save: {_NO_ARCHIVES}")


def load(f, map_location=None, _extra_files=None):
    raise RuntimeError(f"munet.jit.load: {_NO_ARCHIVES}")


def trace_module(mod, inputs, optimize=None, check_trace: bool = True, check_inputs=None, check_tolerance=1e-05,
                 strict: bool = True, example_inputs_is_kwarg: bool = False):  # fmt: skip
    """``trace(mod, inputs["forward"])``: MuNet compiles a module's ``forward`` (``inputs`` maps method
    names to example inputs; only ``"forward"`` can be traced)."""
    if not builtins.isinstance(inputs, dict):
        raise AttributeError("trace_module: expected a dict of method names to example inputs")
    others = sorted(set(inputs) - {"forward"})
    if others:
        raise ValueError(f"trace_module: MuNet compiles forward only, got methods {others}")
    return trace(mod, inputs.get("forward"), optimize, check_trace, strict)


def _compiled_in_eval(mod, op: str):
    from munet.compiler import compile
    from munet.compiler.optimized_module import OptimizedModule
    from munet.nn import Module

    if not builtins.isinstance(mod, Module):
        raise RuntimeError(f"{op}: expected a module (or munet.jit.script(module)), got {type(mod).__name__}")
    original = mod._orig_mod if builtins.isinstance(mod, OptimizedModule) else mod  # compile's documented submodule
    if original.training:
        raise RuntimeError(
            f"{op}: freezing is only implemented for modules in eval mode. Please call .eval() on your module first."
        )
    return (mod if builtins.isinstance(mod, OptimizedModule) else compile(mod)).eval()


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    """The module (in eval mode) compiled: MuNet's compiled graph already holds the parameters it read."""
    return _compiled_in_eval(mod, "freeze")


def optimize_for_inference(mod, other_methods=None):
    """``freeze(mod.eval())``."""
    return _compiled_in_eval(mod.eval(), "optimize_for_inference")


def ignore(drop=False, **kwargs):
    """``@ignore`` or ``@ignore(drop=True)``: the function stays Python, as it always is in MuNet."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def interface(obj):
    return obj


def script_if_tracing(fn):
    return fn


def annotate(the_type, the_value):
    """``the_value``: a type hint for TorchScript."""
    return the_value


def isinstance(obj, target_type) -> bool:  # noqa: A001 - PyTorch's name
    """``builtins.isinstance`` that also checks parametrized types: ``list[int]``, ``dict[str, Tensor]``,
    ``tuple[int, ...]``, ``Optional[T]``/``T | None``, as TorchScript refines them."""
    origin = typing.get_origin(target_type)
    args = typing.get_args(target_type)
    if origin is None:
        return target_type is typing.Any or builtins.isinstance(obj, target_type)
    if origin in (typing.Union, types.UnionType):
        return any(isinstance(obj, t) for t in args)
    if not builtins.isinstance(obj, origin):
        return False
    if origin is list:
        return all(isinstance(v, args[0]) for v in obj) if args else True
    if origin is dict:
        return all(isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items()) if args else True
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return all(isinstance(v, args[0]) for v in obj)
        return len(obj) == len(args) and all(isinstance(v, t) for v, t in zip(obj, args))
    return True


Attribute = collections.namedtuple("Attribute", ["value", "type"])


class Error(Exception):
    """TorchScript's exception type (``torch.jit.Error``); MuNet raises it nowhere."""


class _NoTorchScriptObjects(type):
    def __call__(cls, *args, **kwargs):
        raise RuntimeError(f"munet.jit.{cls.__name__}: MuNet has no TorchScript objects; use munet.jit.script")

    def __instancecheck__(cls, obj) -> bool:
        return False


class ScriptModule(metaclass=_NoTorchScriptObjects):
    """For ``isinstance(m, munet.jit.ScriptModule)``: False, as MuNet makes no TorchScript modules."""


class ScriptFunction(metaclass=_NoTorchScriptObjects):
    """For ``isinstance(f, munet.jit.ScriptFunction)``: False, as MuNet makes no TorchScript functions."""


def fork(func, *args, **kwargs):
    """Run ``func(*args, **kwargs)`` now; a completed :class:`munet.Future` of its result."""
    future = Future()
    try:
        result = func(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - raised again by wait(), as PyTorch does
        future.set_exception(error)
    else:
        future.set_result(result)
    return future


def wait(future):
    return future.wait()


_onednn = [False]
_DEFAULT_FUSION = [("STATIC", 2), ("DYNAMIC", 10)]
_fusion = [list(_DEFAULT_FUSION)]


def enable_onednn_fusion(enabled: bool) -> None:
    """Recorded: MuNet calls no oneDNN (its fused cpu kernels are generated C)."""
    _onednn[0] = bool(enabled)


def onednn_fusion_enabled() -> bool:
    return _onednn[0]


def set_fusion_strategy(strategy):
    """Recorded and checked as PyTorch does (a list of ("STATIC" | "DYNAMIC", depth)); returns the
    previous strategy. MuNet's compiler specializes by its own rules (``munet.compile(dynamic=...)``)."""
    pairs = list(strategy)
    for pair in pairs:
        if (
            not builtins.isinstance(pair, (tuple, list))
            or len(pair) != 2
            or pair[0] not in ("STATIC", "DYNAMIC")
            or not builtins.isinstance(pair[1], int)
        ):
            raise RuntimeError(f'set_fusion_strategy: expected ("STATIC" | "DYNAMIC", int) pairs, got {pair!r}')
    previous, _fusion[0] = _fusion[0], [tuple(p) for p in pairs]
    return previous


class strict_fusion(contextlib.ContextDecorator):  # noqa: N801 - PyTorch's name
    """A no-op outside TorchScript, as in PyTorch's eager mode."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

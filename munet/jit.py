"""``munet.jit``: PyTorch's TorchScript entry points, answered with :func:`munet.compile`.

``script(fn)`` and ``trace(fn, example_inputs)`` return ``munet.compile(fn)``: the function (or
module) traced through MuNet's dispatcher into a graph and replayed as generated kernels. There
is no TorchScript: the result is a Python callable, not a ``ScriptModule`` (no ``.code``,
``.graph`` or ``.save``), and Python control flow on tensor values is refused as in
``munet.compile``. ``save``/``load`` refuse, since MuNet reads and writes no TorchScript archives:
use ``munet.save(model.state_dict(), path)`` and ``munet.load``.
"""

from __future__ import annotations

__all__ = ["load", "save", "script", "trace"]

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

"""What every rtc kernel shares: :class:`Kernel` (name, parsed signature, the launch path) and the
``rtc_launch`` op, which is a launch inside ``munet.compile``.

In eager mode a launch runs the kernel on the tensors' memory and bumps the version of every
written (non-const) tensor. While tracing, it records one effectful ``rtc_launch`` node (through
``apply_writes``): its inputs are the arguments, its outputs the new values of the written tensors,
so the graph orders it with the ops around it, fusion never crosses it, and memory planning sees
exactly what it reads and writes (a launch that writes nothing has one output, a token nothing
reads, as ``check`` has). The node's attributes are the kernel's source, options, exports, name and
signature and the launch configuration, all plain values: a saved program keeps them, and loading
it compiles the kernel again (the op's shape rule, which loading runs on every node, asks
``kernel_from_spec`` for it), so a machine without the compiler refuses the file at load.

A compiled program's ``rtc_launch`` kernel copies each written argument first (a node's outputs are
new values), then launches on the copies: an argument passed twice is two buffers there.
"""

from __future__ import annotations

import threading

import numpy as np

from munet import _dtype as D
from munet.ops._registry import Meta, apply_writes, define
from munet.rtc.signature import check_arguments, parse_signature, written

# kind ("c", "wgsl", "cuda") -> module class, filled by c.py, wgsl.py and cuda.py
MODULE_KINDS: dict[str, type] = {}
# (kind, source, options, exports, name, signature) -> Kernel: every kernel launched in this process,
# so the node of a traced launch finds its kernel without compiling it again
_KERNELS: dict[tuple, Kernel] = {}
_KERNELS_LOCK = threading.Lock()


class Kernel:
    """A function of a compiled module, with the signature it is launched with."""

    kind = ""

    def __init__(self, module, name: str, signature: str):
        self.module = module
        self.name = name
        self.signature = signature
        self.params = parse_signature(signature, self.label)

    def remember(self) -> None:
        """File this kernel under its spec, where a ``rtc_launch`` node of it finds it."""
        spec = self.module.spec()
        key = (self.kind, spec["source"], spec["options"], spec["exports"], self.name, self.signature)
        with _KERNELS_LOCK:
            _KERNELS.setdefault(key, self)

    @property
    def label(self) -> str:
        return f"{type(self).__name__}({self.name})"

    def __repr__(self) -> str:
        return f"{self.label}: ({self.signature})"

    def check(self, args) -> list:
        """The argument list, after the checks that need no device (count, dtypes, scalars)."""
        return check_arguments(self.label, self.params, args)

    def _launch(self, args: list, config: tuple, run_eager) -> None:
        """Run ``run_eager()`` now, or record the launch when tracing (``args`` passed the checks)."""
        self.remember()
        spec = self.module.spec()
        apply_writes(
            rtc_launch_op,
            (list(args),),
            written(self.params, args),
            run_eager,
            kind=self.kind,
            **spec,
            name=self.name,
            signature=self.signature,
            config=config,
        )


def kernel_from_spec(kind: str, source: str, options: tuple, exports: tuple, name: str, signature: str) -> Kernel:
    """The kernel a ``rtc_launch`` node names: the one this process made, else compiled now."""
    key = (kind, source, tuple(options), tuple(exports), name, signature)
    found = _KERNELS.get(key)
    if found is not None:
        return found
    if kind not in MODULE_KINDS:
        raise RuntimeError(f"rtc_launch: unknown kernel kind {kind!r}; expected one of {sorted(MODULE_KINDS)}")
    return MODULE_KINDS[kind].from_spec(source, tuple(options), tuple(exports)).get_kernel(name, signature)


def forget_kernels() -> None:
    """Drop the process's table of kernels (tests use it to make a loaded program compile again)."""
    with _KERNELS_LOCK:
        _KERNELS.clear()


def _rtc_launch_meta(args, *, kind, source, options, exports, name, signature, config):
    params = kernel_from_spec(kind, source, options, exports, name, signature).params
    if len(params) != len(args):
        raise TypeError(f"rtc_launch({name}) expects {len(params)} arguments but got {len(args)}")
    metas = tuple(Meta(tuple(a.shape), a.dtype) for p, a in zip(params, args) if p.written)
    return metas or Meta((), D.bool_)  # a launch that writes nothing: a token output


rtc_launch_op = define("rtc_launch", inputs=("args",), meta=_rtc_launch_meta, variadic=True, effectful=True)


def outputs_of(params, raws):
    """A compiled ``rtc_launch`` kernel's result: the written arguments, one or a tuple."""
    outs = [r for p, r in zip(params, raws) if p.written]
    if not outs:
        return np.ones((), np.bool_)  # the token of a launch that writes nothing
    return outs[0] if len(outs) == 1 else tuple(outs)

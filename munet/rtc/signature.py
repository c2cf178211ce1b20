"""Kernel signatures: ``"const float *x, float *y, float alpha"`` parsed into :class:`Param`s, and
the argument checks every module kind (CUDA, C, WGSL) runs before a launch.

Each argument reads ``(const) type (*) (name)``: ``*`` marks a tensor, ``const`` a tensor the kernel
only reads (a tensor without ``const`` is read and written), the name is optional. ``TYPES`` is the
type table; an unknown type raises ``TypeError`` listing it, a malformed argument ``ValueError``
showing the expected form.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError
from munet._tensor import Tensor
from munet.autograd.grad_mode import _State

# C type -> MuNet dtype (bool is one byte, as C++'s and NumPy's bool are).
TYPES = {
    "float": D.float32,
    "double": D.float64,
    "__half": D.float16,
    "__nv_bfloat16": D.bfloat16,
    "int8_t": D.int8,
    "char": D.int8,
    "uint8_t": D.uint8,
    "int": D.int32,
    "int32_t": D.int32,
    "int64_t": D.int64,
    "bool": D.bool_,
}

FORM = "'(const) type (*) (name)', e.g. 'const float *x', 'float *y' or 'float alpha'"
_ARGUMENT = re.compile(r"^(const\s+)?([A-Za-z_]\w*)\s*(\*)?\s*([A-Za-z_]\w*)?$")


class Param(NamedTuple):
    """One kernel argument: a tensor (``pointer``; ``const`` when only read) or a scalar."""

    name: str  # as written, or "argument i" when unnamed
    type: str  # the C type as written (a key of TYPES)
    dtype: object
    pointer: bool
    const: bool

    @property
    def written(self) -> bool:
        return self.pointer and not self.const


def parse_signature(signature: str, kernel: str = "kernel") -> tuple[Param, ...]:
    """The :class:`Param`\\ s of ``signature`` (``"const float *x, float *y, float alpha"``)."""
    if not isinstance(signature, str):
        raise TypeError(f"{kernel}: signature must be a string such as 'const float *x, float *y', got {signature!r}")
    text = " ".join(signature.split())
    if text in ("", "void"):
        return ()
    params = []
    for i, part in enumerate(text.split(",")):
        arg = part.strip()
        m = _ARGUMENT.match(arg)
        if m is None or (m.group(1) and not m.group(3)):
            problem = "const marks a read-only tensor, so it needs a '*'" if m is not None else "malformed"
            raise ValueError(f"{kernel}: argument {i} {arg!r} of signature {signature!r}: {problem}; expected {FORM}")
        const, ctype, star, name = m.groups()
        if ctype not in TYPES:
            raise TypeError(
                f"{kernel}: argument {i} {arg!r} has unsupported type '{ctype}'; supported types: {', '.join(TYPES)}"
            )
        params.append(Param(name or f"argument {i}", ctype, TYPES[ctype], star is not None, const is not None))
    return tuple(params)


def check_arguments(label: str, params: tuple[Param, ...], args) -> list:
    """Check ``args`` against ``params`` (count, each tensor's dtype, scalars are numbers); returns
    the argument list. These checks need no device: the caller checks device availability next,
    then ``check_devices``, so a machine without the device still reports a wrong dtype first.
    """
    args = list(args) if isinstance(args, (list, tuple)) else [args]
    if len(args) != len(params):
        raise TypeError(f"{label} expects {len(params)} arguments but got {len(args)}")
    for i, (p, a) in enumerate(zip(params, args)):
        where = f"{label}: argument {i} ('{p.name}')"
        if p.pointer:
            if not isinstance(a, Tensor):
                raise TypeError(f"{where} is '{p.type} *', expected a tensor, got {type(a).__name__}")
            if a.dtype is not p.dtype:
                raise TypeError(
                    f"{where} is '{p.type} *', expected a tensor of dtype {p.dtype.name}, got {a.dtype.name}"
                )
        elif isinstance(a, Tensor) or not isinstance(a, (int, float, bool, np.number, np.bool_)):
            raise TypeError(f"{where} is the scalar '{p.type}', expected a Python number, got {type(a).__name__}")
        elif not p.dtype.is_floating_point and isinstance(a, (float, np.floating)):
            raise TypeError(f"{where} is the integer scalar '{p.type}', got the float {a!r}")
        elif not p.dtype.is_floating_point and p.dtype is not D.bool_:
            info = np.iinfo(p.dtype.np)
            if not info.min <= int(a) <= info.max:
                raise OverflowError(f"{where}: {a} does not fit in '{p.type}' [{info.min}, {info.max}]")
    return args


def check_devices(label: str, params: tuple[Param, ...], args, device) -> None:
    """Each tensor lives on ``device`` (a device type such as ``"cpu"``, or a munet.device), is
    contiguous (a kernel sees a flat pointer: a strided view would be read wrongly), and a written
    one is not part of autograd's graph (a kernel has no gradient; wrap it in a Function)."""
    for i, (p, a) in enumerate(zip(params, args)):
        if not p.pointer:
            continue
        where = f"{label}: argument {i} ('{p.name}')"
        if not _on(a.device, device):
            raise DeviceError(f"{where}: expected a tensor on {device}, got one on {a.device}")
        if not a.is_contiguous():
            raise ValueError(
                f"{where}: expected a contiguous tensor (a kernel reads a flat buffer), got shape "
                f"{list(a.shape)} with strides {list(a.stride())}; call .contiguous() first"
            )
        if p.written and _State.enabled and a.requires_grad:
            raise RuntimeError(
                f"{where}: the kernel writes a tensor that requires grad; a kernel has no gradient rule: "
                "launch it under munet.no_grad() or inside a munet.autograd.Function"
            )


def _on(actual, expected) -> bool:
    if isinstance(expected, str):
        return actual.type == expected
    return actual.type == expected.type and (actual.index or 0) == (expected.index or 0)


def written(params: tuple[Param, ...], args) -> list:
    """The tensors among ``args`` that the kernel writes."""
    return [a for p, a in zip(params, args) if p.written]

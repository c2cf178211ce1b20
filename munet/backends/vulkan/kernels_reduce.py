"""Reductions on the reduction template (``reduction.py``): sum, amax, amin, argmax, argmin.

The input is read in place through its strides: the kept dims index the output, the reduced
dims are walked by each workgroup's threads (``j += 256``) and combined in a shared-memory
tree. Rows up to ``SHORT_ROW`` use one thread per output instead; long rows with few outputs
are split into chunks whose partial results a second reduction combines.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.vulkan.copies import copy_into, new_view
from munet.backends.vulkan.reduction import SHORT_ROW, Monoid, Rows, chunks_for, reduce_source
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import VkView, compute_dtype, storage_type
from munet.backends.vulkan.wgsl import WORKGROUP, elementwise

_COMBINE = {
    "sum": {"f32": "a.f0 + b.f0", "i32": "a.f0 + b.f0", "u32": "a.f0 + b.f0"},
    "amax": {"f32": "max_f(a.f0, b.f0)", "i32": "max(a.f0, b.f0)", "u32": "max(a.f0, b.f0)"},
    "amin": {"f32": "min_f(a.f0, b.f0)", "i32": "min(a.f0, b.f0)", "u32": "min(a.f0, b.f0)"},
}
_IDENTITY = {
    "sum": {"f32": "0.0", "i32": "0", "u32": "0u"},
    "amax": {"f32": "-inf_f()", "i32": "i32(-2147483647) - 1", "u32": "0u"},
    "amin": {"f32": "inf_f()", "i32": "2147483647", "u32": "1u"},
}


def _monoid(op: str, kind: str) -> Monoid:
    return Monoid((kind,), f"S({_IDENTITY[op][kind]})", f"return S({_COMBINE[op][kind]});", "return S(v0);")


def _out_shape(shape, dims, keepdim: bool) -> tuple:
    return tuple(1 if d in dims else n for d, n in enumerate(shape) if keepdim or d not in dims)


def reduce(rt, op: str, x: VkView, dims, keepdim: bool) -> VkView:
    dims = tuple(sorted(d % max(x.ndim, 1) for d in dims)) if x.ndim else ()
    out_shape = _out_shape(x.shape, dims, keepdim)
    kind = storage_type(x.dtype, op)
    n_out = math.prod(out_shape)
    rows = math.prod(x.shape[d] for d in dims)
    out = new_view(rt, out_shape, x.dtype)
    if n_out == 0:
        return out
    if rows == 0:
        return copy_into(rt, out, 0)
    geo = Rows(x.shape, dims, [x])
    chunks = chunks_for(n_out, rows)
    chunk_len = -(-rows // chunks)
    target = out if chunks == 1 else new_view(rt, (*out_shape, chunks), compute_dtype(x.dtype))
    # a row of up to SHORT_ROW folds in order, whatever the number of rows (codegen/wgsl.py does the same)
    tree = chunk_len > SHORT_ROW
    finish = "    OUT0[g] = s.f0;"  # g: the (output, chunk) pair
    source = reduce_source(_monoid(op, kind), [kind], [kind], finish, geo.wgsl(4), WORKGROUP, serial=not tree)
    params = [n_out, rows, chunks, chunk_len, *geo.params()]
    total = n_out * chunks
    groups = rt.grid(total if tree else -(-total // WORKGROUP))
    rt.dispatch(source, [target.buffer, x.buffer], [True, False], params, groups)
    if chunks == 1:
        return out
    partial = reduce(rt, op, target, (target.ndim - 1,), False)
    if partial.dtype is not x.dtype:
        return copy_into(rt, out, partial)
    return VkView(partial.buffer, out_shape, out.strides, 0, x.dtype)


@kernel("sum")
def sum_(rt, x, *, dims, keepdim, dtype=None):
    if x.dtype is D.bool_:
        raise DeviceError("sum: bool input must be cast to an integer dtype first")
    return reduce(rt, "sum", x, dims, keepdim)


@kernel("amax")
def amax(rt, x, *, dims, keepdim):
    return reduce(rt, "amax", x, dims, keepdim)


@kernel("amin")
def amin(rt, x, *, dims, keepdim):
    return reduce(rt, "amin", x, dims, keepdim)


@kernel("reduce_tie_weights")
def tie_weights(rt, x, result, *, dims, keepdim):
    """1/count at the elements equal to their reduced ``result`` (NaN matches NaN), else 0."""
    if not keepdim:  # re-insert the reduced dims as size-1 dims
        shape, strides, it = [], [], iter(zip(result.shape, result.strides))
        for d in range(x.ndim):
            shape.append(1) if d in dims else None
            strides.append(0) if d in dims else None
            if d not in dims:
                n, s = next(it)
                shape.append(n)
                strides.append(s)
        result = VkView(result.buffer, shape, strides, result.offset, result.dtype)
    kind = storage_type(x.dtype, "reduce_tie_weights")
    same = "a == b || (isnan_f(a) && isnan_f(b))" if kind == "f32" else "a == b"
    mask = elementwise(rt, same, [x, result], new_view(rt, x.shape, D.float32), cond=True)
    count = reduce(rt, "sum", mask, dims, True)
    return elementwise(rt, "a / max(b, 1.0)", [mask, count], new_view(rt, x.shape, D.float32))


def _arg_monoid(kind: str, largest: bool) -> tuple[Monoid, str]:
    """(value, index) states; the better one wins: larger (smaller), else the first NaN, else the lower index.

    The index 0xffffffff marks the identity (no element yet). Returns the monoid and its ``better``.
    """
    cmp = ">" if largest else "<"
    nan = "isnan_f(v) && !isnan_f(bv)" if kind == "f32" else "false"
    better = f"""fn better(v: {kind}, i: u32, bv: {kind}, bi: u32) -> bool {{
  if (bi == 0xffffffffu) {{ return i != 0xffffffffu; }}
  if (i == 0xffffffffu) {{ return false; }}
  {"if (isnan_f(bv)) { return isnan_f(v) && i < bi; }" if kind == "f32" else ""}
  if ({nan}) {{ return true; }}
  return v {cmp} bv || (v == bv && i < bi);
}}"""
    zero = {"f32": "0.0", "i32": "0", "u32": "0u"}[kind]
    monoid = Monoid(
        (kind, "u32"),
        f"S({zero}, 0xffffffffu)",
        "if (better(b.f0, b.f1, a.f0, a.f1)) { return b; } return a;",
        "return S(v0, j);",
    )
    return monoid, better


def _arg(rt, x: VkView, dim, keepdim: bool, largest: bool) -> VkView:
    if x.dtype is D.bool_:
        raise DeviceError("argmax/argmin: bool input is not supported")
    if dim is None:
        dims = tuple(range(x.ndim))
        out_shape = (1,) * x.ndim if keepdim else ()
    else:
        dims = (dim % x.ndim,) if x.ndim else ()
        out_shape = _out_shape(x.shape, dims, keepdim)
    out = new_view(rt, out_shape, D.int64)
    n_out = math.prod(out_shape)
    if n_out == 0:
        return out
    geo = Rows(x.shape, dims, [x])
    rows = math.prod(x.shape[d] for d in dims)
    kind = storage_type(x.dtype)
    monoid, better = _arg_monoid(kind, largest)
    source = reduce_source(monoid, [kind], ["i32"], "    OUT0[g] = i32(s.f1);", geo.wgsl(4), WORKGROUP, better)
    params = [n_out, rows, 1, rows, *geo.params()]
    rt.dispatch(source, [out.buffer, x.buffer], [True, False], params, rt.grid(n_out))
    return out


@kernel("argmax")
def argmax(rt, x, *, dim, keepdim):
    return _arg(rt, x, dim, keepdim, True)


@kernel("argmin")
def argmin(rt, x, *, dim, keepdim):
    return _arg(rt, x, dim, keepdim, False)

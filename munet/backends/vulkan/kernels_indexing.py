"""Indexing kernels: index, index_put, gather, scatter, scatter_reduce, masked_fill, nonzero.

Every kernel runs one thread per element of its "update space" (the result of ``index``/
``gather``, or the indexed region of ``index_put``/``scatter``) and reads its operands in
place through (offset, strides). Writes that may collide (``accumulate=True``, ``reduce=``)
are float/int atomics built from a 32-bit compare-and-swap loop, so duplicates combine
correctly but the order of float additions, and so the last bits of a sum, can vary between
runs. Plain writes to duplicate positions keep one of the values (as PyTorch on GPUs).
Indices are bounds-checked on the device (``device_asserts.py``): an out-of-range index is
neither read nor written, and raises the cpu backend's error, naming the op, at the next
synchronization. Negative indices wrap where PyTorch allows them (``wrap=True``).

``nonzero`` has a data-dependent size: flags are prefix-summed on the device (a workgroup
scan per 256 elements, block sums scanned recursively), the count is read back (4 bytes),
then each set element writes its coordinates at its prefix.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet._determinism import alert_not_deterministic
from munet._tensor import contiguous_strides
from munet.backends.vulkan.copies import contiguous, copy_into, new_view, work_copy
from munet.backends.vulkan.device_asserts import FAULT_DECLARATION, INDEX_FAULT, out_of_bounds
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import VkView, storage_type
from munet.backends.vulkan.wgsl import PRELUDE, WORKGROUP, Scalar, elementwise, scalar_word

# shared helpers (also used by kernels_sort and kernels_random) ------------------------------------


class Params:
    """The ``P`` words of a dispatch; ``add`` returns the WGSL expression that reads a word."""

    def __init__(self):
        self.words: list[int] = []

    def add(self, value: int) -> str:
        self.words.append(int(value))
        return f"P[{len(self.words) - 1}]"

    def add_all(self, values) -> list[str]:
        return [self.add(v) for v in values]

    def scalar(self, kind: str, value) -> str:
        self.words.append(scalar_word(kind, value))
        w = f"P[{len(self.words) - 1}]"
        return w if kind == "u32" else f"bitcast<{kind}>({w})"


def launch(rt, body: str, outs, ins, params: Params, threads: int, helpers: str = "", checked: bool = False) -> None:
    """One thread per ``i < threads`` running ``body``.

    ``outs``/``ins`` are ``(name, wgsl element type, DeviceBuffer)``; outputs are read_write.
    ``body`` sees ``i: u32`` and ``P``; ``threads`` is passed as the last parameter word.
    A ``checked`` kernel binds the device's fault record and tests its indices with :func:`check_index`.
    """
    if threads <= 0:
        return
    n = params.add(threads)
    lines = ["@group(0) @binding(0) var<storage, read> P: array<u32>;"]
    for b, (name, kind, _) in enumerate(outs):
        lines.append(f"@group(0) @binding({b + 1}) var<storage, read_write> {name}: array<{kind}>;")
    for b, (name, kind, _) in enumerate(ins):
        lines.append(f"@group(0) @binding({b + 1 + len(outs)}) var<storage, read> {name}: array<{kind}>;")
    if checked:  # the fault record, bound last by DeviceAsserts.dispatch
        lines.append(f"@group(0) @binding({1 + len(outs) + len(ins)}) {FAULT_DECLARATION}")
        helpers += INDEX_FAULT
    source = f"""{PRELUDE}
{chr(10).join(lines)}
{helpers}
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let i = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (i >= {n}) {{ return; }}
{body}
}}
"""
    buffers = [b for _, _, b in outs] + [b for _, _, b in ins]
    dispatch = rt.asserts.dispatch if checked else rt.dispatch
    dispatch(source, buffers, [True] * len(outs) + [False] * len(ins), params.words, rt.grid(-(-threads // WORKGROUP)))


def decompose(index: str, shape_words: list[str], prefix: str) -> str:
    """WGSL lines binding ``{prefix}0..`` to the coordinates of ``index`` over ``shape_words``."""
    lines = [f"  var rem_{prefix} = {index};"]
    for d in reversed(range(len(shape_words))):
        w = shape_words[d]
        lines.append(f"  let {prefix}{d} = rem_{prefix} % {w}; rem_{prefix} = rem_{prefix} / {w};")
    return "\n".join(lines)


def strided(params: Params, view: VkView, coords: list[str], strides=None) -> str:
    """WGSL offset of ``view`` at ``coords`` (``strides`` overrides the view's, e.g. broadcast)."""
    strides = view.strides if strides is None else strides
    terms = [params.add(view.offset)]
    terms += [f"{c} * {params.add(s)}" for c, s in zip(coords, strides) if s != 0]
    return " + ".join(terms)


def kind_of(view: VkView) -> str:
    return storage_type(view.dtype)


def value_operand(params: Params, value, kind: str, coords, shape, name: str = "V", broadcast: bool = True):
    """(WGSL expression, ``ins`` entries) of a tensor (broadcast to ``shape``) or a number.

    ``broadcast=False`` reads a same-rank tensor at the same coordinates (scatter's leading block).
    """
    if isinstance(value, VkView):
        same_rank = not broadcast and value.ndim == len(shape)
        off = strided(params, value, coords, value.strides if same_rank else value.expand_to(shape))
        vkind = kind_of(value)
        expr = f"{name}[{off}]"
        if vkind != kind:
            expr = f"{kind}({expr})" if kind != "u32" else f"u32({expr} != {vkind}(0))"
        return expr, [(name, vkind, value.buffer)]
    return params.scalar(kind, value), []


_ONE = {"f32": "1.0", "i32": "1", "u32": "1u"}


def cas_helper(kind: str, combine: str) -> str:
    """``atomic_combine(j, v)``: ``OUT[j] = combine(OUT[j], v)`` as a compare-and-swap loop on u32."""
    return f"""
fn combine(x: {kind}, y: {kind}) -> {kind} {{ return {combine}; }}
fn atomic_combine(j: u32, v: {kind}) {{
  var old = atomicLoad(&OUT[j]);
  loop {{
    let r = atomicCompareExchangeWeak(&OUT[j], old, bitcast<u32>(combine(bitcast<{kind}>(old), v)));
    if (r.exchanged) {{ break; }}
    old = r.old_value;
  }}
}}
"""


_COMBINE = {
    "add": {"f32": "x + y", "i32": "x + y", "u32": "x | y"},
    "multiply": {"f32": "x * y", "i32": "x * y", "u32": "x & y"},
    "amax": {"f32": "max_f(x, y)", "i32": "max(x, y)", "u32": "max(x, y)"},
    "amin": {"f32": "min_f(x, y)", "i32": "min(x, y)", "u32": "min(x, y)"},
}
_REDUCE_NAME = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "amax", "amin": "amin"}


def store(kind: str, target: str, value: str, reduce: str | None, caller: str) -> tuple[str, str]:
    """(body line, helper source) writing ``value`` at ``OUT[target]`` (OUT is atomic<u32>). A float
    sum or product in atomic order is not deterministic: ``caller`` is reported to
    ``munet.use_deterministic_algorithms``."""
    if reduce in ("add", "multiply") and kind == "f32":
        alert_not_deterministic(f"{caller} on vulkan")
    if reduce is None:
        word = value if kind == "u32" else f"bitcast<u32>({value})"
        return f"  atomicStore(&OUT[{target}], {word});", ""
    return f"  atomic_combine({target}, {value});", cas_helper(kind, _COMBINE[reduce][kind])


# gather / scatter -----------------------------------------------------------------------------------


def _as_1d(view: VkView) -> VkView:
    return VkView(view.buffer, (1,), (1,), view.offset, view.dtype) if view.ndim == 0 else view


def check_index(rt, p: Params, value: str, size: str, caller: str, dim: int, given: str | None = None) -> str:
    """The WGSL condition "``value`` (an i32) is outside ``[0, size)``" of a ``checked`` launch; when
    true, the fault is recorded as ``caller``'s, for the index ``given`` (default: ``value``)."""
    site = p.add(rt.asserts.site(out_of_bounds(caller, dim)))
    return f"index_out_of_range({value}, {given or value}, {size}, {site})"


@kernel("gather")
def gather(rt, x, index, *, dim):
    out = new_view(rt, index.shape, x.dtype)
    x1, i1 = _as_1d(x), _as_1d(index)
    p = Params()
    shape = p.add_all(i1.shape)
    coords = [f"c{d}" for d in range(i1.ndim)]
    at_index = strided(p, i1, coords)
    size = p.add(x1.shape[dim])
    xcoords = [("jj" if d == dim else c) for d, c in enumerate(coords)]
    at_x = strided(p, x1, xcoords)
    kind = kind_of(x)
    zero = {"f32": "0.0", "i32": "0", "u32": "0u"}[kind]
    body = f"""{decompose("i", shape, "c")}
  let j = IX[{at_index}];
  if ({check_index(rt, p, "j", size, "gather", dim)}) {{ OUT[i] = {zero}; return; }}
  let jj = u32(j);
  OUT[i] = X[{at_x}];"""
    outs, ins = [("OUT", kind, out.buffer)], [("IX", "i32", index.buffer), ("X", kind, x.buffer)]
    launch(rt, body, outs, ins, p, out.size, checked=True)
    return out


def _scatter_pass(rt, out: VkView, index: VkView, src, dim: int, reduce: str | None, caller: str) -> None:
    """``out[... index ...] (op)= src[...]`` over the elements of ``index`` (out is contiguous)."""
    o1, i1 = _as_1d(out), _as_1d(index)
    if isinstance(src, VkView):
        src = _as_1d(src)
    kind = kind_of(out)
    p = Params()
    shape = p.add_all(i1.shape)
    coords = [f"c{d}" for d in range(i1.ndim)]
    at_index = strided(p, i1, coords)
    size = p.add(o1.shape[dim])
    target = strided(p, o1, [("jj" if d == dim else c) for d, c in enumerate(coords)])
    value, ins = value_operand(p, src, kind, coords, i1.shape, broadcast=False)
    line, helper = store(kind, "t", value, reduce, caller)
    body = f"""{decompose("i", shape, "c")}
  let j = IX[{at_index}];
  if ({check_index(rt, p, "j", size, caller, dim)}) {{ return; }}
  let jj = u32(j);
  let t = {target};
{line}"""
    outs = [("OUT", "atomic<u32>", out.buffer)]
    launch(rt, body, outs, [("IX", "i32", index.buffer), *ins], p, i1.size, helper, checked=True)


@kernel("scatter")
def scatter(rt, x, index, src, *, dim, reduce, caller="scatter"):
    out = work_copy(rt, x)
    _scatter_pass(rt, out, index, src, dim, reduce, caller)
    return out


@kernel("scatter_")
def scatter_(rt, x, index, src, *, dim, reduce):
    """In place: the out-of-place kernel, copied back (its errors name ``scatter_``, as on the cpu)."""
    copy_into(rt, x, scatter(rt, x, index, src, dim=dim, reduce=reduce, caller="scatter_"))


_IDENTITY = {
    "sum": {"f32": 0.0, "i32": 0, "u32": 0},
    "mean": {"f32": 0.0, "i32": 0, "u32": 0},
    "prod": {"f32": 1.0, "i32": 1, "u32": 1},
    "amax": {"f32": float("-inf"), "i32": -(1 << 31), "u32": 0},
    "amin": {"f32": float("inf"), "i32": (1 << 31) - 1, "u32": 1},
}


@kernel("scatter_reduce", "scatter_reduce_values")
def scatter_reduce(rt, x, index, src, *, dim, reduce, include_self):
    out = work_copy(rt, x)
    kind = kind_of(out)
    if not include_self:
        _scatter_pass(rt, out, index, _IDENTITY[reduce][kind], dim, None, "scatter_reduce")
    _scatter_pass(rt, out, index, src, dim, _REDUCE_NAME[reduce], "scatter_reduce")
    if reduce != "mean":
        return out
    counts = copy_into(rt, new_view(rt, out.shape, D.int32), 1 if include_self else 0)
    _scatter_pass(rt, counts, index, 1, dim, "add", "scatter_reduce")
    expr = "a / f32(max(b, 1))" if kind == "f32" else "(a - select(0, max(b, 1) - 1, a < 0)) / max(b, 1)"
    return elementwise(rt, expr, [out, counts], new_view(rt, out.shape, out.dtype))


# index / index_put -----------------------------------------------------------------------------------


def _index_geometry(rt, p: Params, x: VkView, indices, positions, caller: str, wrap: bool, coords_prefix="c"):
    """(result shape, WGSL lines computing ``xo``: the offset into ``x`` of result coordinate ``c*``).

    Adjacent indexed dims are replaced by the broadcast index dims in place; otherwise those
    lead the result (NumPy's rule, as ``munet.ops.indexing.indexed_shape``). ``valid`` is false
    where an index is out of range (a fault of ``caller``); negative ones wrap if ``wrap``.
    """
    from munet.ops._utils import broadcast_shapes
    from munet.ops.indexing import indexed_shape

    bshape = broadcast_shapes(*(tuple(t.shape) for t in indices), op="index")
    shape = indexed_shape(x.shape, positions, bshape)
    b = len(bshape)
    first = positions[0]
    adjacent = positions[-1] - first + 1 == len(positions)
    bstart = first if adjacent else 0
    bcoords = [f"{coords_prefix}{bstart + k}" for k in range(b)]
    rest = [d for d in range(x.ndim) if d not in positions]
    xcoord: dict[int, str] = {}
    r = 0
    for out_d in range(len(shape)):
        if bstart <= out_d < bstart + b:
            continue
        xcoord[rest[r]] = f"{coords_prefix}{out_d}"
        r += 1
    lines = []
    for k, (t, pos) in enumerate(zip(indices, positions)):
        off = strided(p, t, bcoords, t.expand_to(bshape))
        size = p.add(x.shape[pos])
        lines.append(f"  let given{k} = IX{k}[{off}];")
        wrapped = f"select(given{k}, given{k} + i32({size}), given{k} < 0)" if wrap else f"given{k}"
        lines.append(f"  let v{k} = {wrapped};")
        lines.append(f"  if ({check_index(rt, p, f'v{k}', size, caller, pos, f'given{k}')}) {{ valid = false; }}")
        xcoord[pos] = f"u32(v{k})"
    offset = strided(p, x, [xcoord[d] for d in range(x.ndim)])
    body = "  var valid = true;\n" + "\n".join(lines) + f"\n  let xo = {offset};"
    ins = [(f"IX{k}", "i32", t.buffer) for k, t in enumerate(indices)]
    return shape, body, ins


def _index_result_shape(x, indices, positions):
    from munet.ops._utils import broadcast_shapes
    from munet.ops.indexing import indexed_shape

    return indexed_shape(x.shape, positions, broadcast_shapes(*(tuple(t.shape) for t in indices), op="index"))


@kernel("index")
def index(rt, x, indices, *, positions, caller="index", wrap=True):
    shape = _index_result_shape(x, indices, positions)
    out = new_view(rt, shape, x.dtype)
    kind = kind_of(x)
    p = Params()
    dims = p.add_all(shape)
    _, geometry, ins = _index_geometry(rt, p, x, indices, positions, caller, wrap)
    zero = {"f32": "0.0", "i32": "0", "u32": "0u"}[kind]
    body = f"""{decompose("i", dims, "c")}
{geometry}
  if (!valid) {{ OUT[i] = {zero}; return; }}
  OUT[i] = X[xo];"""
    launch(rt, body, [("OUT", kind, out.buffer)], [*ins, ("X", kind, x.buffer)], p, out.size, checked=True)
    return out


@kernel("index_put")
def index_put(rt, x, values, indices, *, positions, accumulate, caller="index_put_", wrap=True):
    out = work_copy(rt, x)
    kind = kind_of(out)
    shape = _index_result_shape(out, indices, positions)
    p = Params()
    dims = p.add_all(shape)
    _, geometry, ins = _index_geometry(rt, p, out, indices, positions, caller, wrap)
    value, vins = value_operand(p, values, kind, [f"c{d}" for d in range(len(shape))], shape)
    line, helper = store(kind, "xo", value, "add" if accumulate else None, caller)
    body = f"""{decompose("i", dims, "c")}
{geometry}
  if (!valid) {{ return; }}
{line}"""
    outs = [("OUT", "atomic<u32>", out.buffer)]
    launch(rt, body, outs, [*ins, *vins], p, math.prod(shape), helper, checked=True)
    return out


# masks ------------------------------------------------------------------------------------------------


@kernel("masked_fill")
def masked_fill(rt, x, mask, value):
    from munet.ops._utils import broadcast_shapes

    shape = broadcast_shapes(tuple(x.shape), tuple(mask.shape), op="masked_fill")
    out = new_view(rt, shape, x.dtype)
    kind = kind_of(x)
    if not isinstance(value, VkView):
        value = Scalar(kind, bool(value) if kind == "u32" else value)
    elif kind_of(value) != kind:
        from munet.backends.vulkan.copies import cast_to

        value = cast_to(rt, value, x.dtype)
    return elementwise(rt, "select(a, c, b != 0u)", [x, mask, value], out)


def exclusive_scan(rt, flags: VkView) -> VkView:
    """Exclusive prefix sums of a contiguous u32/i32 vector (a new i32 vector of the same length)."""
    n = flags.size
    out = new_view(rt, (n,), D.int32)
    blocks = -(-n // WORKGROUP)
    sums = new_view(rt, (blocks,), D.int32)
    p = Params()
    n_word, off = p.add(n), p.add(flags.offset)
    source = f"""@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> OUT: array<i32>;
@group(0) @binding(2) var<storage, read_write> SUMS: array<i32>;
@group(0) @binding(3) var<storage, read> IN: array<i32>;
var<workgroup> part: array<i32, {WORKGROUP}>;
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {{
  let g = wid.x + wid.y * nwg.x;
  let i = g * {WORKGROUP}u + t;
  var v = 0;
  if (i < {n_word}) {{ v = IN[{off} + i]; }}
  part[t] = v;
  workgroupBarrier();
  for (var s = 1u; s < {WORKGROUP}u; s = s << 1u) {{
    var add = 0;
    if (t >= s) {{ add = part[t - s]; }}
    workgroupBarrier();
    part[t] = part[t] + add;
    workgroupBarrier();
  }}
  if (i < {n_word}) {{ OUT[i] = part[t] - v; }}
  if (t == {WORKGROUP - 1}u && g < (({n_word}) + {WORKGROUP - 1}u) / {WORKGROUP}u) {{ SUMS[g] = part[t]; }}
}}
"""
    rt.dispatch(source, [out.buffer, sums.buffer, flags.buffer], [True, True, False], p.words, rt.grid(blocks))
    if blocks == 1:
        return out
    carried = exclusive_scan(rt, sums)
    q = Params()
    body = f"  OUT[i] = OUT[i] + S[i / {WORKGROUP}u];"
    launch(rt, body, [("OUT", "i32", out.buffer)], [("S", "i32", carried.buffer)], q, n)
    return out


def read_int(rt, view: VkView, position: int) -> int:
    """One int32 element of a contiguous vector, read on the host (a sync point)."""
    import numpy as np

    raw = rt.read(view.buffer, (view.offset + position) * 4, 4)
    return int(np.frombuffer(raw, np.int32)[0])


@kernel("nonzero")
def nonzero(rt, x):
    n = x.size
    ndim = x.ndim
    if n == 0:
        return new_view(rt, (0, ndim), D.int64)
    kind = kind_of(x)
    flags = new_view(rt, (n + 1,), D.int32)
    p = Params()
    dims = p.add_all(x.shape or (1,))
    coords = [f"c{d}" for d in range(max(ndim, 1))]
    at_x = strided(p, x if ndim else VkView(x.buffer, (1,), (1,), x.offset, x.dtype), coords)
    nz = "a != 0.0" if kind == "f32" else f"a != {kind}(0)"
    body = f"""  if (i == {p.add(n)}) {{ OUT[i] = 0; return; }}
{decompose("i", dims, "c")}
  let a = X[{at_x}];
  OUT[i] = select(0, 1, {nz});"""
    launch(rt, body, [("OUT", "i32", flags.buffer)], [("X", kind, x.buffer)], p, n + 1)
    prefix = exclusive_scan(rt, flags)
    count = read_int(rt, prefix, n)
    out = new_view(rt, (count, ndim), D.int64)
    if count == 0 or ndim == 0:
        return out
    q = Params()
    dims = q.add_all(x.shape)
    writes = "\n".join(f"  OUT[r * {ndim}u + {d}u] = i32(c{d});" for d in range(ndim))
    body = f"""  if (F[i] == 0) {{ return; }}
  let r = u32(S[i]);
{decompose("i", dims, "c")}
{writes}"""
    launch(rt, body, [("OUT", "i32", out.buffer)], [("F", "i32", flags.buffer), ("S", "i32", prefix.buffer)], q, n)
    return out


__all__ = ["Params", "launch", "decompose", "strided", "exclusive_scan", "read_int", "contiguous", "contiguous_strides"]

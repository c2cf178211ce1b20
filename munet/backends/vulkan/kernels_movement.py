"""Movement, embedding and scatter-add kernels: pad, flip, roll, tril/triu, cat, one_hot,
embedding and its gradient, and ``strided_scatter_add`` (the gradient of overlapping views).

``pad``/``flip``/``roll``/``tril``/``triu`` are one index-remapping kernel: each output
element computes its source coordinate per dim (``c * sign + shift``, optionally wrapped,
out-of-range -> the fill value) and reads the input through its strides.

The two scatter-adds are deterministic gathers, never atomics, so results are bit-identical
run to run:

- ``strided_scatter_add``: each output element enumerates the source elements that land on
  it. With the view's dims sorted by decreasing stride, index ``i_j`` can only range over
  ``[ceil((r - reach_j) / s_j), floor(r / s_j)]`` (``reach_j``: the farthest the smaller dims
  can go), and the last one is solved exactly, so each output visits only its overlap count.
- ``embedding_backward`` sorts (row, position) pairs with a bitonic sort (:func:`sort_keys`),
  then each (row, column) thread binary-searches its run and sums it in position order.
"""

from __future__ import annotations

from munet import _dtype as D
from munet._device import DeviceError
from munet._tensor import contiguous_strides
from munet.backends.vulkan.copies import contiguous, copy_into, new_view
from munet.backends.vulkan.device_asserts import FAULT_DECLARATION, INDEX_FAULT
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import VkView, storage_type
from munet.backends.vulkan.wgsl import PRELUDE, WORKGROUP, Scalar, _decompose, bindings, elementwise, scalar_word
from munet.ops.embedding import INDEX_OUT_OF_RANGE

_HEAD = f"""@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let idx = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (idx >= P[0]) {{ return; }}
"""


def _launch(rt, source, buffers, writable, params, threads: int) -> None:
    rt.dispatch(source, buffers, writable, params, rt.grid(-(-threads // WORKGROUP)))


# index remapping: pad, flip, roll, tril/triu ---------------------------------------------------


def _remap_source(kind: str, rank: int, keep: str) -> str:
    # P: [numel, out_shape.., x_off, x_strides.., in_shape.., sign.., shift.., wrap.., fill, diag]
    xs, ins = 1 + rank, 2 + 2 * rank
    sign, shift, wrap = ins + rank, ins + 2 * rank, ins + 3 * rank
    fill, diag = ins + 4 * rank, ins + 4 * rank + 1
    lines = [f"  var src = P[{xs}];", "  var ok = true;"]
    for d in range(rank):
        lines += [
            f"  var s{d} = i32(c{d}) * bitcast<i32>(P[{sign + d}]) + bitcast<i32>(P[{shift + d}]);",
            f"  let n{d} = i32(P[{ins + d}]);",
            f"  if (P[{wrap + d}] != 0u) {{ s{d} = ((s{d} % n{d}) + n{d}) % n{d}; }}",
            f"  ok = ok && s{d} >= 0 && s{d} < n{d};",
            f"  src = src + u32(max(s{d}, 0)) * P[{xs + 1 + d}];",
        ]
    fill_value = f"bitcast<{kind}>(P[{fill}])" if kind != "u32" else f"P[{fill}]"
    keep_expr = keep.format(diag=f"bitcast<i32>(P[{diag}])", row=f"i32(c{rank - 2})", col=f"i32(c{rank - 1})")
    return f"""{bindings(kind, [kind])}
{_HEAD}{_decompose("idx", 1, rank)}
{chr(10).join(lines)}
  var v = {fill_value};
  if (ok && ({keep_expr})) {{ v = IN0[src]; }}
  OUT[idx] = v;
}}
"""


def remap(rt, x: VkView, out_shape, sign, shift, wrap, fill=0, keep: str = "true", diag: int = 0) -> VkView:
    """out[c] = x[c * sign + shift] per dim (``wrap``: modulo the input size; out of range: ``fill``)."""
    kind = storage_type(x.dtype, "vulkan")
    out = new_view(rt, tuple(out_shape), x.dtype)
    if out.size == 0:
        return out
    rank = max(x.ndim, 1)
    shape, strides, ins = (tuple(out_shape), x.strides, x.shape) if x.ndim else ((1,), (0,), (1,))
    if not x.ndim:
        sign, shift, wrap = (1,), (0,), (0,)
    params = [out.size, *shape, x.offset, *strides, *ins]
    params += [s & 0xFFFFFFFF for s in sign] + [s & 0xFFFFFFFF for s in shift] + [int(w) for w in wrap]
    params += [scalar_word(kind, fill), diag & 0xFFFFFFFF]
    _launch(rt, _remap_source(kind, rank, keep), [out.buffer, x.buffer], [True, False], params, out.size)
    return out


@kernel("constant_pad_nd")
def constant_pad_nd(rt, x, *, pad, value):
    pad = tuple(pad) + ((0, 0),) * (x.ndim - len(pad))
    out_shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pad))
    n = x.ndim
    return remap(rt, x, out_shape, (1,) * n, tuple(-lo for lo, _ in pad), (0,) * n, fill=value)


@kernel("flip")
def flip(rt, x, *, dims):
    dims = {d % max(x.ndim, 1) for d in dims}
    sign = tuple(-1 if d in dims else 1 for d in range(x.ndim))
    shift = tuple(n - 1 if d in dims else 0 for d, n in enumerate(x.shape))
    return remap(rt, x, x.shape, sign, shift, (0,) * x.ndim)


@kernel("roll")
def roll(rt, x, *, shifts, dims):
    if dims is None:
        flat = contiguous(rt, x)
        flat = VkView(flat.buffer, (x.size,), (1,), flat.offset, x.dtype)
        out = remap(rt, flat, (x.size,), (1,), (-shifts[0],), (1,))
        return VkView(out.buffer, x.shape, contiguous_strides(x.shape), 0, x.dtype)
    shift = [0] * x.ndim
    for s, d in zip(shifts, dims):
        shift[d % x.ndim] -= s
    return remap(rt, x, x.shape, (1,) * x.ndim, tuple(shift), (1,) * x.ndim)


def _tri(rt, x, diagonal: int, lower: bool):
    keep = "{col} - {row} <= {diag}" if lower else "{col} - {row} >= {diag}"
    n = x.ndim
    return remap(rt, x, x.shape, (1,) * n, (0,) * n, (0,) * n, keep=keep, diag=diagonal)


@kernel("tril")
def tril(rt, x, *, diagonal):
    return _tri(rt, x, diagonal, True)


@kernel("triu")
def triu(rt, x, *, diagonal):
    return _tri(rt, x, diagonal, False)


@kernel("tril_")
def tril_(rt, out, *, diagonal):
    copy_into(rt, out, _tri(rt, out, diagonal, True))


@kernel("triu_")
def triu_(rt, out, *, diagonal):
    copy_into(rt, out, _tri(rt, out, diagonal, False))


@kernel("cat")
def cat(rt, tensors, *, dim, sizes):
    kept = [t for t, s in zip(tensors, sizes) if s is not None]
    if not kept:
        return new_view(rt, (0,), tensors[0].dtype)
    shape = list(kept[0].shape)
    shape[dim] = sum(s for s in sizes if s is not None)
    out = new_view(rt, tuple(shape), tensors[0].dtype)
    start = 0
    for t in kept:
        if t.size:  # one strided copy per input into its slice of the output
            copy_into(rt, VkView(out.buffer, t.shape, out.strides, start * out.strides[dim], out.dtype), t)
        start += t.shape[dim]
    return out


# embedding and one_hot ------------------------------------------------------------------------------


@kernel("one_hot")
def one_hot(rt, x, *, num_classes):
    out = new_view(rt, (*x.shape, num_classes), D.int64)
    expanded = VkView(x.buffer, out.shape, (*x.strides, 0), x.offset, x.dtype)
    return elementwise(rt, "a == i32(idx % b)", [expanded, Scalar("u32", num_classes)], out, cond=True)


def _embedding_source(kind: str) -> str:
    # P: [numel, dim, w_off, w_s0, w_s1, num_weights, idx_off, fault site]
    return f"""{bindings(kind, [kind, "i32"])}
@group(0) @binding(4) {FAULT_DECLARATION}
{INDEX_FAULT}
{_HEAD}  let row = IN1[P[6] + idx / P[1]];
  var v = {kind}(0);
  if (!index_out_of_range(row, row, P[5], P[7])) {{ v = IN0[P[2] + u32(row) * P[3] + (idx % P[1]) * P[4]]; }}
  OUT[idx] = v;
}}
"""


@kernel("embedding")
def embedding(rt, weight, indices, *, padding_idx, scale_grad_by_freq, sparse):
    kind = storage_type(weight.dtype, "embedding")
    dim = weight.shape[1]
    out = new_view(rt, (*indices.shape, dim), weight.dtype)
    if out.size == 0:
        return out
    idx = contiguous(rt, indices)
    params = [out.size, dim, weight.offset, weight.strides[0], weight.strides[1], weight.shape[0], idx.offset]
    buffers = [out.buffer, weight.buffer, idx.buffer]
    params.append(rt.asserts.site(INDEX_OUT_OF_RANGE))
    rt.asserts.dispatch(
        _embedding_source(kind), buffers, [True, False, False], params, rt.grid(-(-out.size // WORKGROUP))
    )
    return out


# deterministic sort of u32 keys (bitonic), shared with the grid sampler's backward ----------------

_BITONIC = f"""@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> KEYS: array<u32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<u32>;
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let i = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  let l = i ^ P[1];
  if (i >= P[0] || l <= i) {{ return; }}
  let ka = KEYS[i]; let kb = KEYS[l]; let ia = IDS[i]; let ib = IDS[l];
  let a_after_b = ka > kb || (ka == kb && ia > ib);
  let ascending = (i & P[2]) == 0u;
  if (a_after_b == ascending) {{ KEYS[i] = kb; KEYS[l] = ka; IDS[i] = ib; IDS[l] = ia; }}
}}
"""

# lower_bound of a key in the sorted KEYS[0..n): WGSL helper used by the gathers after a sort.
LOWER_BOUND = """fn lower_bound(key: u32, n: u32) -> u32 {
  var lo = 0u; var hi = n;
  loop { if (lo >= hi) { break; } let mid = (lo + hi) / 2u; if (SK[mid] < key) { lo = mid + 1u; } else { hi = mid; } }
  return lo;
}"""

SENTINEL = 0xFFFFFFFF


def sort_keys(rt, key_source: str, in_buffers, params, count: int, helpers: str = "", names=None):
    """Sort ``count`` (key, id) pairs by key, then id; returns (keys, ids, n) with n a power of 2.

    ``key_source`` is a WGSL body setting ``key`` (u32; leave ``0xffffffffu`` to drop the
    element) of element ``idx`` from the inputs (``in_buffers``: (kind, buffer), bound as
    ``names`` or ``IN0..``) and ``params`` (bound as ``P``; ``P[0]`` must be ``count``).
    Dropped elements sort last. The order is total, so the result is deterministic.
    """
    n = 1 << max(count - 1, 0).bit_length()
    keys = rt.allocator.allocate(n, D.int32)
    ids = rt.allocator.allocate(n, D.int32)
    names = names or [f"IN{k}" for k in range(len(in_buffers))]
    decls = [
        f"@group(0) @binding({3 + k}) var<storage, read> {name}: array<{kind}>;"
        for k, (name, (kind, _)) in enumerate(zip(names, in_buffers))
    ]
    source = f"""{PRELUDE}
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> KEYS: array<u32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<u32>;
{chr(10).join(decls)}
{helpers}
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let idx = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (idx >= P[{len(params)}]) {{ return; }}
  var key = 0xffffffffu;
  if (idx < P[0]) {{
{key_source}
  }}
  KEYS[idx] = key;
  IDS[idx] = idx;
}}
"""
    buffers = [keys, ids] + [b for _, b in in_buffers]
    writable = [True, True] + [False] * len(in_buffers)
    _launch(rt, source, buffers, writable, [*params, n], n)
    k = 2
    while k <= n:
        j = k // 2
        while j >= 1:
            _launch(rt, _BITONIC, [keys, ids], [True, True], [n, j, k], n)
            j //= 2
        k *= 2
    return keys, ids, n


def _embedding_backward_source(kind: str) -> str:
    # P: [numel, dim, n_sorted, g_off, g_s0, g_s1, padding_idx+1, scale]
    return f"""@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> OUT: array<{kind}>;
@group(0) @binding(2) var<storage, read> SK: array<u32>;
@group(0) @binding(3) var<storage, read> SI: array<u32>;
@group(0) @binding(4) var<storage, read> G: array<{kind}>;
{LOWER_BOUND}
{_HEAD}  let row = idx / P[1];
  let col = idx % P[1];
  let lo = lower_bound(row, P[2]);
  let hi = lower_bound(row + 1u, P[2]);
  var acc = {kind}(0);
  for (var k = lo; k < hi; k = k + 1u) {{ acc = acc + G[P[3] + SI[k] * P[4] + col * P[5]]; }}
  if (P[7] != 0u && hi > lo) {{ acc = acc / {kind}(hi - lo); }}
  if (row + 1u == P[6]) {{ acc = {kind}(0); }}
  OUT[idx] = acc;
}}
"""


@kernel("embedding_backward")
def embedding_backward(rt, grad, indices, *, num_weights, padding_idx, scale_grad_by_freq):
    kind = storage_type(grad.dtype, "embedding_backward")
    dim = grad.shape[-1]
    out = new_view(rt, (num_weights, dim), grad.dtype)
    if out.size == 0:
        return out
    count = indices.size
    if count == 0 or dim == 0:
        return copy_into(rt, out, 0)
    idx = contiguous(rt, indices)
    rows = contiguous(rt, grad)
    rows = VkView(rows.buffer, (count, dim), (dim, 1), rows.offset, rows.dtype)
    key = "    let r = IN0[P[2] + idx];\n    if (r >= 0 && u32(r) < P[3]) { key = u32(r); }"
    keys, ids, n = sort_keys(rt, key, [("i32", idx.buffer)], [count, 0, idx.offset, num_weights], count)
    pad = 0 if padding_idx is None else (padding_idx % num_weights) + 1
    params = [out.size, dim, n, rows.offset, dim, 1, pad, int(bool(scale_grad_by_freq))]
    buffers = [out.buffer, keys, ids, rows.buffer]
    _launch(rt, _embedding_backward_source(kind), buffers, [True, False, False, False], params, out.size)
    return out


# strided_scatter_add ----------------------------------------------------------------------------------


def _scatter_source(kind: str, zero_dims: int, dims: int) -> str:
    # P: [numel, offset, g_off, (n, gstride) per zero-stride dim.., (n, stride, gstride, reach) per dim..]
    zbase = 3
    base = zbase + 2 * zero_dims
    lines = ["  let r0 = i32(idx) - bitcast<i32>(P[1]);", f"  var acc = {kind}(0);", "  if (r0 >= 0) {"]
    depth = 1
    pad = lambda: "  " * (depth + 1)  # noqa: E731
    for z in range(zero_dims):
        lines.append(f"{pad()}for (var z{z} = 0u; z{z} < P[{zbase + 2 * z}]; z{z} = z{z} + 1u) {{")
        depth += 1
    goff = " + ".join(["P[2]"] + [f"z{z} * P[{zbase + 2 * z + 1}]" for z in range(zero_dims)])
    lines.append(f"{pad()}let g0 = {goff};")
    for j in range(dims):
        n, s, gs, reach = (f"P[{base + 4 * j + q}]" for q in range(4))
        if j == dims - 1:
            lines.append(f"{pad()}if (r{j} % i32({s}) == 0 && r{j} / i32({s}) < i32({n})) {{")
            lines.append(f"{pad()}  acc = acc + G[g{j} + u32(r{j} / i32({s})) * {gs}];")
            lines.append(f"{pad()}}}")
            break
        lines.append(
            f"{pad()}let lo{j} = select(0, (r{j} - i32({reach}) + i32({s}) - 1) / i32({s}), r{j} > i32({reach}));"
        )
        lines.append(f"{pad()}let hi{j} = min(i32({n}) - 1, r{j} / i32({s}));")
        lines.append(f"{pad()}for (var i{j} = lo{j}; i{j} <= hi{j}; i{j} = i{j} + 1) {{")
        depth += 1
        lines.append(f"{pad()}let r{j + 1} = r{j} - i{j} * i32({s});")
        lines.append(f"{pad()}let g{j + 1} = g{j} + u32(i{j}) * {gs};")
    if dims == 0:
        lines.append(f"{pad()}if (r0 == 0) {{ acc = acc + G[g0]; }}")
    while depth > 1:
        depth -= 1
        lines.append(f"{pad()}}}")
    lines.append("  }")
    return f"""@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> OUT: array<{kind}>;
@group(0) @binding(2) var<storage, read> G: array<{kind}>;
{_HEAD}{chr(10).join(lines)}
  OUT[idx] = acc;
}}
"""


@kernel("strided_scatter_add")
def strided_scatter_add(rt, grad, *, shape, size, stride, storage_offset):
    kind = storage_type(grad.dtype, "strided_scatter_add")
    out = new_view(rt, tuple(shape), grad.dtype)
    if out.size == 0:
        return out
    if grad.size == 0:
        return copy_into(rt, out, 0)
    if any(s < 0 for s in stride):
        raise DeviceError(f"strided_scatter_add: negative strides {tuple(stride)} are not supported on vulkan")
    dims = [(n, s, gs) for n, s, gs in zip(size, stride, grad.strides) if n != 1]
    zeros = [(n, gs) for n, s, gs in dims if s == 0]
    moving = sorted([d for d in dims if d[1] != 0], key=lambda d: -d[1])
    params = [out.size, storage_offset, grad.offset]
    for n, gs in zeros:
        params += [n, gs]
    for j, (n, s, gs) in enumerate(moving):
        reach = sum((m - 1) * t for m, t, _ in moving[j + 1 :])
        params += [n, s, gs, reach]
    source = _scatter_source(kind, len(zeros), len(moving))
    _launch(rt, source, [out.buffer, grad.buffer], [True, False], params, out.size)
    return out

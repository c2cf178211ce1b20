"""``gather``/``index`` and ``scatter``/``scatter_reduce``/``index_put`` on cuda: a strided "take"
kernel and its mirror, a "put" kernel, rendered as CUDA C and bounds-checked on the device
(``device_asserts.py``).

Both walk a *region* in row-major order, one thread per element ``i``: the region's coordinates ``c``
give x's offset ``sum_d c_d * xs_d + sum_k v_k * ps_k``, where ``xs_d`` is x's stride of the x dim
that region dim ``d`` is (0 for an index dim) and ``v_k`` is the k-th index tensor's element at
``b = sum_d c_d * bs_d`` (``bs_d``: the index tensors' common C-contiguous stride of region dim
``d``, 0 for a plain x dim), wrapped once when negative indices are allowed; ``ps_k`` is x's stride
along the indexed dim. So ``gather(x, dim, index)``/``scatter`` lay one index tensor over the whole
region (``index``'s shape), and ``x[i0, i1]``/``index_put`` the index tensors broadcast to one shape
(NumPy's advanced indexing, ``indexed_shape``).

Take reads ``out[i] = x[offset]`` into the C-contiguous output; its elements move as unsigned
integers of their width, so one kernel serves every dtype of a width. Put writes ``src`` (read at
``sum_d c_d * ss_d``: broadcast operands and Python numbers have stride 0) into ``x`` by a mode
(:func:`render_put`): a plain write resolved deterministically (the last write in region order wins,
``docs/decisions.md``'s rule for duplicate positions), an ``atomicAdd``, or a compare-and-swap loop
combining with the scalar formula forms of ``mul``/``maximum``/``minimum``. The runtime side gives
the put kernel a C-contiguous working array (a copy of the input, or the input itself in place),
widened to float32/int32 for the reducing modes of narrower dtypes, and converts back.

An index out of range records a fault with the cpu kernel's message (:class:`IndexOutOfRangeError`,
raised at the next synchronization); its element reads nothing (take stores 0) or writes nothing
(put). Geometry is passed by value (nothing to upload, so the kernels capture in graphs).
"""

from __future__ import annotations

import functools

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError
from munet._tensor import contiguous_strides
from munet.backends.cuda import copies, launch
from munet.backends.cuda.device_asserts import FAULT_HELPER
from munet.backends.cuda.kernels_rendered import numel, run_formula
from munet.backends.cuda.registry import kernel
from munet.backends.cuda.scalar_cuda import HEADER, render_apply
from munet.backends.cuda.source import CudaSource, kernel_head, offsets
from munet.ops._scalar import Apply, Arg
from munet.ops.checks import IndexOutOfRangeError
from munet.ops.indexing import indexed_shape

_WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned", 8: "unsigned long long"}


def _geometry_params(rank: int, k: int, families) -> list:
    """The parameters locating element ``i`` of a rank-``rank`` region (``n`` elements of shape ``os``)
    through stride ``families`` (``xs``: the indexed tensor's, first) and ``k`` index tensors."""
    params = [("long long", "n")]
    params += [("long long", f"{name}{d}") for name in ("os", *families) for d in range(rank)]
    for j in range(k):
        params += [("const long long *", f"v{j}"), ("long long", f"size{j}"), ("long long", f"ps{j}")]
        params += [("unsigned long long", f"site{j}")]
    params += [("bool", "wrap"), ("unsigned long long *", "fault")]
    return params


def _locate(rank: int, k: int, families) -> list:
    """Loop-body lines giving element ``i``'s offset ``at_<f>`` in each stride family ``f``; the index
    tensors (read at ``at_bs``) add theirs to ``at_xs``, and ``bad`` is set (a fault recorded) for an
    index out of range."""
    lines = [*offsets("i", "os", rank, families), "    bool bad = false;"]
    for j in range(k):
        lines += [
            f"    {{ const long long v = v{j}[at_bs];",
            f"      if (v >= size{j} || v < (wrap ? -size{j} : 0)) {{",
            f"        munet_fault(fault, site{j}, (unsigned long long)v, (unsigned long long)i); bad = true;",
            f"      }} else {{ at_xs += (v < 0 ? v + size{j} : v) * ps{j}; }} }}",
        ]
    return lines


@functools.lru_cache(maxsize=64)
def render_take(itemsize: int, rank: int, k: int) -> CudaSource:
    """The take kernel for elements of ``itemsize`` bytes, a rank-``rank`` output and ``k`` index tensors."""
    name = f"munet_take_{itemsize}b_r{rank}_k{k}"
    word = _WORDS[itemsize]
    params = ((f"const {word} *", "x"), (f"{word} *", "out"), *_geometry_params(rank, k, ("xs", "bs")))
    lines = [*kernel_head(name, params, "n"), *_locate(rank, k, ("xs", "bs"))]
    lines += ["    out[i] = bad ? 0 : x[at_xs];", "  }", "}"]
    return CudaSource(name, HEADER + FAULT_HELPER + "\n".join(lines) + "\n", params)


# the element types the reducing put kernels combine (narrower dtypes are widened to these first)
ATOMIC_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long"}
PUT_MODES = ("set", "add", "mul", "amax", "amin")
_COMBINE_OPS = {"add": "add", "mul": "mul", "amax": "maximum", "amin": "minimum"}
# (C word type, value -> word, word -> value) of each combined type, for the compare-and-swap loop
_BITS = {
    "float": ("unsigned", "__float_as_uint({})", "__uint_as_float({})"),
    "double": (
        "unsigned long long",
        "(unsigned long long)__double_as_longlong({})",
        "__longlong_as_double((long long){})",
    ),
    "int": ("unsigned", "(unsigned){}", "(int){}"),
    "long long": ("unsigned long long", "(unsigned long long){}", "(long long){}"),
}


def _update(mode: str, dtype: str) -> list:
    """Loop-body lines writing ``src[at_ss]`` into ``x[at_xs]`` by ``mode`` (see :func:`render_put`)."""
    if mode == "set":
        return [
            "    if (!claim) { x[at_xs] = src[at_ss]; }",
            "    else if (phase == 0) { atomicMax(claim + at_xs, (unsigned long long)i + 1ULL); }",
            "    else if (claim[at_xs] == (unsigned long long)i + 1ULL) { x[at_xs] = src[at_ss]; }",
        ]
    ctype = ATOMIC_TYPES[dtype]
    word, to_word, from_word = _BITS[ctype]
    if mode == "add":  # the hardware's atomic add (integers wrap through their unsigned type)
        cast = "" if ctype in ("float", "double") else f"({word})"
        target = "x + at_xs" if not cast else f"({word} *)(x + at_xs)"
        return [f"    atomicAdd({target}, {cast}src[at_ss]);"]
    combine = render_apply(Apply(_COMBINE_OPS[mode], (Arg(0, dtype), Arg(1, dtype)), dtype), ["acc", "v"])
    return [
        f"    {word} *word = ({word} *)(x + at_xs);",
        f"    const {ctype} v = src[at_ss];",
        f"    {word} seen = *word, assumed;",
        "    do {",
        "      assumed = seen;",
        f"      const {ctype} acc = {from_word.format('assumed')};",
        f"      seen = atomicCAS(word, assumed, {to_word.format(combine)});",
        "    } while (seen != assumed);",
    ]


@functools.lru_cache(maxsize=256)
def render_put(mode: str, dtype, rank: int, k: int) -> CudaSource:
    """The put kernel: for every element ``i`` of a rank-``rank`` region, ``src``'s element there
    (``at_ss``) goes to ``x``'s (``at_xs``, moved by the ``k`` index tensors) by ``mode``:

    - ``"set"`` (``dtype``: the element width in bytes, moved as an unsigned word): with a null
      ``claim`` a plain store (every writer of a position writes the same value); else two launches
      give the last write in region order, deterministically: ``phase`` 0 claims each position with
      ``atomicMax(claim[at_xs], i + 1)``, ``phase`` 1 stores from the element that won;
    - ``"add"``: ``atomicAdd`` (``dtype`` one of :data:`ATOMIC_TYPES`);
    - ``"mul"``, ``"amax"``, ``"amin"``: a compare-and-swap loop over the element's word combining with
      the scalar formula forms of ``mul``/``maximum``/``minimum`` (NaN propagates).

    An out-of-range index records a fault (the element writes nothing)."""
    if mode not in PUT_MODES:
        raise ValueError(f"render_put: mode must be one of {', '.join(PUT_MODES)}, got {mode!r}")
    ctype = _WORDS[dtype] if mode == "set" else ATOMIC_TYPES[dtype]
    tag = f"{dtype}b" if mode == "set" else dtype
    name = f"munet_put_{mode}_{tag}_r{rank}_k{k}"
    params = [(f"{ctype} *", "x"), (f"const {ctype} *", "src"), *_geometry_params(rank, k, ("xs", "bs", "ss"))]
    if mode == "set":
        params += [("unsigned long long *", "claim"), ("int", "phase")]
    lines = [*kernel_head(name, params, "n"), *_locate(rank, k, ("xs", "bs", "ss")), "    if (bad) continue;"]
    lines += [*_update(mode, dtype), "  }", "}"]
    return CudaSource(name, HEADER + FAULT_HELPER + "\n".join(lines) + "\n", tuple(params))


def _launch(rt, src, n: int, values) -> None:
    launch.launch(rt, src, n, list(zip((t for t, _ in src.params), values)))


def _index_values(indices) -> list:
    values = []
    for index, size, stride, site in indices:
        values += [index.data.ptr, size, stride, site]
    return values


def _complex_parts(x, xs, indices):
    """A complex ``x`` as its real and imaginary float views, with ``xs`` and the index strides in
    elements of those (twice ``x``'s): the kernels move and add the parts as real words."""
    doubled = [(index, size, 2 * stride, site) for index, size, stride, site in indices]
    return (x.real, x.imag), [2 * s for s in xs], doubled


def _take(rt, x, out_shape, xs, bs, indices, wrap: bool):
    """Launch the take kernel: ``indices`` is ``[(int64 contiguous array, size, x stride, site), ...]``."""
    cp = rt.cupy
    if x.dtype.kind == "c":
        parts, xs, indices = _complex_parts(x, xs, indices)
        out = cp.empty(tuple(out_shape), x.dtype)
        out.real[...], out.imag[...] = (_take(rt, part, out_shape, xs, bs, indices, wrap) for part in parts)
        return out
    out = cp.empty(tuple(out_shape), x.dtype)
    n = out.size
    if n == 0:
        return out
    rank = max(len(out_shape), 1)
    os_ = tuple(out_shape) or (1,)
    xs, bs = tuple(xs) or (0,), tuple(bs) or (0,)
    src = render_take(x.dtype.itemsize, rank, len(indices))
    asserts = rt.asserts
    values = [x.data.ptr, out.data.ptr, n, *os_, *xs, *bs, *_index_values(indices), wrap, asserts.record()]
    _launch(rt, src, n, values)
    asserts.launched()
    return out


def _put(rt, x, region, xs, bs, source, indices, wrap: bool, mode: str, claim: bool = True) -> None:
    """Launch the put kernel writing ``source`` (an array of ``x``'s dtype, read at the region's
    coordinates, broadcast) into the C-contiguous ``x``; ``indices`` as for :func:`_take`. ``claim``:
    whether ``"set"`` must resolve colliding writes (the last one in region order wins)."""
    n = numel(region)
    if n == 0:
        return
    if x.dtype.kind == "c":  # the parts are independent: "set" picks the same writer for both, "add" adds each
        if mode not in ("set", "add"):
            raise DeviceError(f"{mode}: complex tensors have no order or product scatter on cuda")
        parts, xs, indices = _complex_parts(x, xs, indices)
        for part, source_part in zip(parts, (source.real, source.imag)):
            _put(rt, part, region, xs, bs, source_part, indices, wrap, mode, claim)
        return
    rank = max(len(region), 1)
    os_ = tuple(region) or (1,)
    xs, bs, ss = tuple(xs) or (0,), tuple(bs) or (0,), _source_strides(source, region) or (0,)
    dtype = x.dtype.itemsize if mode == "set" else copies.dtype_of(x).name
    src = render_put(mode, dtype, rank, len(indices))
    asserts = rt.asserts
    fault = asserts.record() if indices else 0  # without index tensors nothing can be out of range
    values = [x.data.ptr, source.data.ptr, n, *os_, *xs, *bs, *ss, *_index_values(indices), wrap, fault]
    if mode != "set":
        _launch(rt, src, n, values)
    elif not claim:
        _launch(rt, src, n, [*values, 0, 0])
    else:
        reach = (
            1 + sum((n - 1) * s for n, s in zip(x.shape, _elements(x))) if x.size else 0
        )  # a complex part's: 2 n - 1
        claims = rt.empty((reach,), D.int64)  # a word per position of x: 0, or 1 + the last writer
        claims.fill(0)
        for phase in (0, 1):
            _launch(rt, src, n, [*values, claims.data.ptr, phase])
    if indices:
        asserts.launched()


def _source_strides(source, region) -> tuple:
    """``source``'s element strides at the region's coordinates (0 along a broadcast dim)."""
    own, pad = _elements(source), len(region) - source.ndim
    return tuple(0 if d < pad or source.shape[d - pad] == 1 else own[d - pad] for d in range(len(region)))


def _elements(x) -> tuple:
    return tuple(s // x.itemsize for s in x.strides)


def _as_int64(cp, index):
    return cp.ascontiguousarray(copies.cast(cp, index, D.int64) if index.dtype != cp.int64 else index)


def _message(caller: str, dim: int, size: int) -> str:
    return f"{caller}: index {{value}} is out of bounds for dimension {dim} with size {size}"


def _along_dim(rt, x, index, dim: int, caller: str):
    """gather/scatter's geometry: the region is ``index``'s shape, ``index`` moves along ``dim``."""
    flat = _as_int64(rt.cupy, index).reshape(tuple(index.shape) or (1,))
    xs = list(_elements(x))
    size, stride = x.shape[dim], xs[dim]
    xs[dim] = 0
    site = rt.asserts.site(_message(caller, dim, size), IndexOutOfRangeError)
    return flat.shape, xs, contiguous_strides(flat.shape), [(flat, size, stride, site)]


def _advanced(rt, x, indices, positions, caller: str):
    """index/index_put's geometry: ``x``'s dims ``positions`` indexed by ``indices`` broadcast together
    (NumPy's placement of the index dims, ``indexed_shape``)."""
    cp = rt.cupy
    bshape = _broadcast_shapes([tuple(i.shape) for i in indices])
    region = indexed_shape(x.shape, positions, bshape)
    xstr = _elements(x)
    first, last = positions[0], positions[-1]
    plain = [d for d in range(x.ndim) if d not in positions]
    bstr = contiguous_strides(bshape)
    if last - first + 1 == len(positions):  # the index dims replace the indexed ones in place
        before = [d for d in plain if d < first]
        layout = [("x", d) for d in before] + [("b", j) for j in range(len(bshape))]
        layout += [("x", d) for d in plain if d > last]
    else:  # NumPy's rule: the index dims go first
        layout = [("b", j) for j in range(len(bshape))] + [("x", d) for d in plain]
    xs = [xstr[i] if kind == "x" else 0 for kind, i in layout]
    bs = [bstr[i] if kind == "b" else 0 for kind, i in layout]
    tensors = []
    for t, p in zip(indices, positions):
        flat = cp.ascontiguousarray(cp.broadcast_to(_as_int64(cp, t), bshape))
        site = rt.asserts.site(_message(caller, p, x.shape[p]), IndexOutOfRangeError)
        tensors.append((flat, x.shape[p], xstr[p], site))
    return region, xs, bs, tensors


@kernel("gather")
def gather(rt, x, index, *, dim):
    if x.ndim == 0:  # gather of 0-d tensors: both as 1-d
        x = x.reshape(1)
    region, xs, bs, indices = _along_dim(rt, x, index, dim, "gather")
    return _take(rt, x, region, xs, bs, indices, False).reshape(tuple(index.shape))


@kernel("index")
def index(rt, x, indices, *, positions, caller="index", wrap=True):
    region, xs, bs, tensors = _advanced(rt, x, indices, positions, caller)
    return _take(rt, x, region, xs, bs, tensors, wrap)


def _broadcast_shapes(shapes) -> tuple:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for d, n in enumerate(s, rank - len(s)):
            if n != 1:
                out[d] = n
    return tuple(out)


# scatter, scatter_reduce, index_put: the put kernel into a working copy ------------------------------

# reducing writes combine 4- and 8-byte values: narrower dtypes work in float32/int32 (16-bit floats
# so accumulate in float32 and round once, as on the cpu; integers wrap alike; bool add is "or")
_WIDER = {"float16": D.float32, "bfloat16": D.float32, "int8": D.int32, "uint8": D.int32, "int16": D.int32,
          "bool": D.int32}  # fmt: skip
_MODES = {None: "set", "add": "add", "multiply": "mul", "sum": "add", "mean": "add", "prod": "mul", "amax": "amax",
          "amin": "amin"}  # fmt: skip


def _working(rt, x, mode: str, inplace: bool):
    """The C-contiguous array the put kernel writes: ``x`` itself (in place, when it is C-contiguous
    and of a type the mode combines), else a copy, widened for a reducing mode."""
    dtype = copies.dtype_of(x)
    wide = _WIDER.get(dtype.name, dtype) if mode != "set" else dtype
    if inplace and wide is dtype and x.flags.c_contiguous:
        return x
    return copies.cast(rt.cupy, x, wide)


def _source(rt, src, work, x):
    """``src`` (an array or a number) as an array of ``work``'s dtype that the kernel may read while
    it writes ``work`` (an operand sharing ``x``'s memory is copied first)."""
    cp = rt.cupy
    dtype = copies.dtype_of(work)
    if not isinstance(src, cp.ndarray):
        out = rt.empty((), dtype)
        copies.copy_into(cp, out, src)
        return out
    if copies.dtype_of(src) is not dtype:
        return copies.cast(cp, src, dtype)
    if src.size and src.data.mem is x.data.mem:
        return src.copy()
    return src


def _finish(rt, x, work, inplace: bool):
    """The result in ``x``'s dtype (written into ``x`` for an in-place kernel)."""
    cp = rt.cupy
    result = work if copies.dtype_of(work) is copies.dtype_of(x) else copies.cast(cp, work, copies.dtype_of(x))
    if inplace and result is not x:
        copies.copy_into(cp, x, result)
    return result


def _scatter(rt, x, index, src, dim: int, reduce, caller: str, inplace: bool, include_self: bool = True):
    mode = _MODES[reduce]
    work = _working(rt, x, mode, inplace)
    target = work.reshape(1) if work.ndim == 0 else work  # scatter into a 0-d tensor: as 1-d
    region, xs, bs, indices = _along_dim(rt, target, index, dim, caller)
    source = _source(rt, src, work, x)
    if not include_self:  # every position written starts from the reduction's identity
        identity = _source(rt, _identity(reduce, copies.dtype_of(x)), work, x)
        _put(rt, target, region, xs, bs, identity, indices, False, "set", claim=False)
    # a plain scatter collides only along dim: a single index there needs no claims
    _put(rt, target, region, xs, bs, source, indices, False, mode, claim=region[dim] > 1)
    if reduce != "mean":
        return _finish(rt, x, work, inplace)
    counts = rt.empty(target.shape, D.int64)  # C-contiguous like target: the same strides
    counts.fill(1 if include_self else 0)
    _put(rt, counts, region, xs, bs, _source(rt, 1, counts, x), indices, False, "add")
    return _mean(rt, _finish(rt, x, work, False).reshape(target.shape), counts).reshape(x.shape)


def _identity(reduce: str, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.is_floating_point:
        return -np.inf if reduce == "amax" else np.inf
    if dtype is D.bool_:
        return reduce == "amin"
    info = np.iinfo(dtype.np)
    return info.min if reduce == "amax" else info.max


def _mean(rt, total, counts):
    """``total / max(counts, 1)`` in ``total``'s dtype: floats divide in float64, integers floor-divide
    in int64 (the cpu kernel's arithmetic), through the formula kernels."""
    cp = rt.cupy
    dtype = copies.dtype_of(total)
    wide = D.float64 if dtype.is_floating_point else D.int64
    divisor = run_formula(rt, "maximum", (copies.cast(cp, counts, wide), 1), {})
    quotient = run_formula(
        rt, "div" if dtype.is_floating_point else "div_floor", (copies.cast(cp, total, wide), divisor), {}
    )
    return copies.cast(cp, quotient, dtype)


@kernel("scatter")
def scatter(rt, x, index, src, *, dim, reduce):
    return _scatter(rt, x, index, src, dim, reduce, "scatter", False)


@kernel("scatter_")
def scatter_(rt, x, index, src, *, dim, reduce):
    _scatter(rt, x, index, src, dim, reduce, "scatter_", True)


@kernel("scatter_reduce", "scatter_reduce_values")
def scatter_reduce(rt, x, index, src, *, dim, reduce, include_self):
    return _scatter(rt, x, index, src, dim, reduce, "scatter_reduce", False, include_self)


def _index_put(rt, x, values, indices, positions, accumulate, caller, wrap, inplace: bool):
    mode = "add" if accumulate else "set"
    work = _working(rt, x, mode, inplace)
    region, xs, bs, tensors = _advanced(rt, work, indices, positions, caller)
    _put(rt, work, region, xs, bs, _source(rt, values, work, x), tensors, wrap, mode)
    return _finish(rt, x, work, inplace)


@kernel("index_put")
def index_put(rt, x, values, indices, *, positions, accumulate, caller="index_put_", wrap=True):
    return _index_put(rt, x, values, indices, positions, accumulate, caller, wrap, False)


@kernel("index_put_")
def index_put_(rt, x, values, indices, *, positions, accumulate, caller="index_put_", wrap=True):
    _index_put(rt, x, values, indices, positions, accumulate, caller, wrap, True)


@kernel("strided_scatter_add")
def strided_scatter_add(rt, grad, *, shape, size, stride, storage_offset):
    """Zeros of ``shape`` with ``grad`` added at the strided view ``(size, stride, storage_offset)``
    (overlapping positions sum: the gradient of ``as_strided``/``unfold``, ``fold``): the put kernel
    with no index tensors, adding floats in float64 and rounding once (the cpu's bincount)."""
    dtype = copies.dtype_of(grad)
    wide = D.float64 if dtype.is_floating_point else _WIDER.get(dtype.name, dtype)
    work = rt.empty((numel(shape),), wide)
    work.fill(0)
    if work.size and grad.size:
        target = work[storage_offset:]
        _put(rt, target, tuple(grad.shape), tuple(stride), (0,) * grad.ndim, _source(rt, grad, work, work), [],
             False, "add")  # fmt: skip
    return copies.cast(rt.cupy, work, dtype).reshape(tuple(shape))

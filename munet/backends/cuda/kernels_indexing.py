"""``gather`` and ``index`` on cuda: one strided "take" kernel rendered as CUDA C, bounds-checked on
the device (``device_asserts.py``).

Both ops read ``out[i] = x[offset(i)]`` for every element ``i`` of the C-contiguous output: the
output's coordinates ``c`` give ``offset = sum_d c_d * xs_d + sum_k v_k * ps_k``, where ``xs_d`` is
x's stride of the x dim that output dim ``d`` is (0 for an index dim) and ``v_k`` is the k-th index
tensor's element at ``b = sum_d c_d * bs_d`` (``bs_d``: the index tensors' common C-contiguous
stride of output dim ``d``, 0 for a plain x dim), wrapped once when negative indices are allowed;
``ps_k`` is x's stride along the indexed dim. So ``gather(x, dim, index)`` is one index tensor
laid over the whole output, and ``x[i0, i1]`` (NumPy's advanced indexing, ``indexed_shape``) the
index tensors broadcast to one shape. An index out of range records a fault with the cpu kernel's
message (:class:`IndexOutOfRangeError`, raised at the next synchronization) and its element reads
nothing (0 is stored). Elements are moved as unsigned integers of their width, so one kernel serves
every dtype of a width; geometry is passed by value (nothing to upload, so it captures in graphs).
"""

from __future__ import annotations

import functools

from munet import _dtype as D
from munet.backends.cuda import copies, launch
from munet.backends.cuda.device_asserts import FAULT_HELPER
from munet.backends.cuda.registry import kernel
from munet.backends.cuda.scalar_cuda import HEADER
from munet.backends.cuda.source import CudaSource, kernel_head
from munet.ops.checks import IndexOutOfRangeError
from munet.ops.indexing import indexed_shape

_WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned", 8: "unsigned long long"}


def _params(itemsize: int, rank: int, k: int) -> tuple:
    word = _WORDS[itemsize]
    params = [(f"const {word} *", "x"), (f"{word} *", "out"), ("long long", "n")]
    params += [("long long", f"{name}{d}") for name in ("os", "xs", "bs") for d in range(rank)]
    for j in range(k):
        params += [("const long long *", f"v{j}"), ("long long", f"size{j}"), ("long long", f"ps{j}")]
        params += [("unsigned long long", f"site{j}")]
    params += [("bool", "wrap"), ("unsigned long long *", "fault")]
    return tuple(params)


@functools.lru_cache(maxsize=64)
def render_take(itemsize: int, rank: int, k: int) -> CudaSource:
    """The take kernel for elements of ``itemsize`` bytes, a rank-``rank`` output and ``k`` index tensors."""
    name = f"munet_take_{itemsize}b_r{rank}_k{k}"
    params = _params(itemsize, rank, k)
    lines = [*kernel_head(name, params, "n"), "    long long rem = i, off = 0, b = 0;"]
    for d in reversed(range(rank)):
        lines.append(f"    {{ const long long c = rem % os{d}; rem /= os{d}; off += c * xs{d}; b += c * bs{d}; }}")
    lines.append("    bool bad = false;")
    for j in range(k):
        lines += [
            f"    {{ long long v = v{j}[b];",
            f"      if (v >= size{j} || v < (wrap ? -size{j} : 0)) {{",
            f"        munet_fault(fault, site{j}, (unsigned long long)v, (unsigned long long)i); bad = true;",
            f"      }} else {{ off += (v < 0 ? v + size{j} : v) * ps{j}; }} }}",
        ]
    lines += ["    out[i] = bad ? 0 : x[off];", "  }", "}"]
    return CudaSource(name, HEADER + FAULT_HELPER + "\n".join(lines) + "\n", params)


def _strides(shape) -> tuple:
    """C-contiguous element strides of ``shape``."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _take(rt, x, out_shape, xs, bs, indices, wrap: bool):
    """Launch the take kernel: ``indices`` is ``[(int64 contiguous array, size, x stride, site), ...]``."""
    cp = rt.cupy
    out = cp.empty(tuple(out_shape), x.dtype)
    n = out.size
    if n == 0:
        return out
    rank = max(len(out_shape), 1)
    os_ = tuple(out_shape) or (1,)
    xs, bs = tuple(xs) or (0,), tuple(bs) or (0,)
    src = render_take(x.dtype.itemsize, rank, len(indices))
    asserts = rt.asserts
    values = [x.data.ptr, out.data.ptr, n, *os_, *xs, *bs]
    for index, size, stride, site in indices:
        values += [index.data.ptr, size, stride, site]
    values += [wrap, asserts.record()]
    launch.launch(rt, src, n, list(zip((t for t, _ in src.params), values)))
    asserts.launched()
    return out


def _elements(x) -> tuple:
    return tuple(s // x.itemsize for s in x.strides)


def _as_int64(cp, index):
    return cp.ascontiguousarray(copies.cast(cp, index, D.int64) if index.dtype != cp.int64 else index)


def _message(caller: str, dim: int, size: int) -> str:
    return f"{caller}: index {{value}} is out of bounds for dimension {dim} with size {size}"


@kernel("gather")
def gather(rt, x, index, *, dim):
    cp = rt.cupy
    if x.ndim == 0:  # gather of 0-d tensors: both as 1-d
        x = x.reshape(1)
    shape = tuple(index.shape)
    flat = _as_int64(cp, index).reshape(shape or (1,))
    xs = list(_elements(x))
    size, stride = x.shape[dim], xs[dim]
    xs[dim] = 0
    bs = _strides(flat.shape)
    site = rt.asserts.site(_message("gather", dim, size), IndexOutOfRangeError)
    return _take(rt, x, flat.shape, xs, bs, [(flat, size, stride, site)], False).reshape(shape)


@kernel("index")
def index(rt, x, indices, *, positions, caller="index", wrap=True):
    cp = rt.cupy
    bshape = _broadcast_shapes([tuple(i.shape) for i in indices])
    out_shape = indexed_shape(x.shape, positions, bshape)
    xstr = _elements(x)
    first, last = positions[0], positions[-1]
    plain = [d for d in range(x.ndim) if d not in positions]
    bstr = _strides(bshape)
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
    return _take(rt, x, out_shape, xs, bs, tensors, wrap)


def _broadcast_shapes(shapes) -> tuple:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for d, n in enumerate(s, rank - len(s)):
            if n != 1:
                out[d] = n
    return tuple(out)

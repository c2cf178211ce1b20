"""The cuda kernel table's entries for the rendered CUDA C kernels: formula ops, reductions, random.

Every op defined with a scalar formula gets ``name`` (a new array) and ``name_`` (in place, into
its first argument), as on the CPU; ``sum``, ``prod``, ``amax``, ``amin``, ``argmax`` and
``argmin`` are the reduction renderer's (``all``/``any`` its ``amin``/``amax`` of ``x != 0``);
the random ops (``uniform``, ``normal``, ``randint``, ``exponential``, ``bernoulli``,
``normal_tensor``, ``randperm``, ``multinomial``) the Philox kernels' (the CPU's numbers; their data
checks record device faults, ``kernels_random``'s docstring), which take the generator's ``(key,
counter)`` by value, or, while a compiled plan is captured as a CUDA graph, from a device slot that
is filled before each launch (``PhiloxSlots``). Each kernel lays
out its operands' geometry (pointers, element strides, broadcasting as stride 0), renders the
source once per dtypes, rank and index width
(``kernels_elementwise``, ``kernels_reduce``, ``kernels_random``: cached here) and hands it to
``launch.launch``, which compiles, loads and launches it on ``rt.stream``.

A dtype a formula has no CUDA form for raises ``munet.DeviceError`` naming the op and device;
complex operands of a formula op or ``sum`` go to ``complex_formula.py`` (CuPy's complex ufuncs).
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.cuda import complex_formula, copies, launch
from munet.backends.cuda import kernels_elementwise as E
from munet.backends.cuda import kernels_random as R
from munet.backends.cuda import kernels_reduce as Q
from munet.backends.cuda.kernels_sort import sort, topk
from munet.backends.cuda.registry import KERNELS, kernel
from munet.backends.cuda.scalar_cuda import UnrenderableError, compute_dtype
from munet.ops._registry import DEFINE_HOOKS, OPS
from munet.ops.random import draw_watchers

_DTYPES = {d.name: d for d in D.ALL_DTYPES}

# geometry -----------------------------------------------------------------------------------------


def _element_strides(label: str, x) -> tuple:
    strides = []
    for size, step in zip(x.shape, x.strides):
        if step < 0 or step % x.itemsize:
            raise DeviceError(f"{label}: cuda kernels take non-negative, aligned strides, got {x.strides}")
        strides.append(0 if size == 1 else step // x.itemsize)
    return tuple(strides)


def _broadcast_strides(label: str, x, shape: tuple) -> tuple:
    """``x``'s element strides seen at the broadcast ``shape`` (0 along a broadcast dim)."""
    own = _element_strides(label, x)
    pad = len(shape) - x.ndim
    return tuple(0 if d < pad or x.shape[d - pad] == 1 else own[d - pad] for d in range(len(shape)))


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _unrenderable(label: str, rt, error: Exception) -> DeviceError:
    return DeviceError(f"{label}: no kernel for device '{rt.label}' ({error})")


# formula ops --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _render_elementwise(name, operands, rank, scalars, attrs, index_bits):
    return E.render_elementwise(name, operands, rank=rank, scalars=scalars, attrs=dict(attrs), index_bits=index_bits)


def _scalar_value(value, dtype_name: str):
    """A Python number as the kernel's by-value operand: rounded to the storage dtype (integers
    wrap, as the CPU's operand conversion does), then of the compute dtype."""
    stored = np.array(value).astype(_DTYPES[dtype_name].np)
    return stored.astype(_DTYPES[compute_dtype(dtype_name)].np).item()


def run_formula(rt, name: str, args, attrs, out=None):
    """Formula op ``name`` over ``args`` (cupy arrays, Python numbers, None) into a new array, or
    into ``out`` (in place: ``out`` is ``args[0]``)."""
    cp = rt.cupy
    op = OPS[name]
    arrays = [a for a in args if isinstance(a, cp.ndarray)]
    if not arrays:
        raise DeviceError(f"{name}: the cuda kernel needs at least one tensor operand")
    if complex_formula.has_complex(cp, args):  # the CUDA C renderer prints real formulas only
        return complex_formula.run_formula(rt, name, args, attrs, out)
    shape = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    conditions = {i for i, role in enumerate(op.inputs) if role == "condition"}
    values = [copies.dtype_of(a).name for i, a in enumerate(args) if isinstance(a, cp.ndarray) and i not in conditions]
    value_dtype = values[0] if values else copies.dtype_of(arrays[0]).name
    operands, scalars = [], []
    for i, a in enumerate(args):
        if a is None:
            operands.append(None)
        elif isinstance(a, cp.ndarray):
            operands.append(copies.dtype_of(a).name)
        else:
            operands.append("bool" if i in conditions else value_dtype)
            scalars.append(i)
    geometries = [(_broadcast_strides(name, a, shape), 0) for a in arrays]
    if out is not None and tuple(out.shape) != shape:
        raise DeviceError(f"{name}_: the result of shape {shape} cannot be written into shape {tuple(out.shape)}")
    try:
        key = tuple(sorted(attrs.items()))
        hash(key)
    except TypeError:  # an unhashable attribute value: render uncached
        key = None
    index_bits = E.index_bits_for(
        shape, geometries + [(_element_strides(name, out), 0)] if out is not None else geometries
    )
    try:
        if key is None:
            src = E.render_elementwise(name, tuple(operands), rank=len(shape), scalars=tuple(scalars), attrs=attrs,
                                       index_bits=index_bits)  # fmt: skip
        else:
            src = _render_elementwise(name, tuple(operands), len(shape), tuple(scalars), key, index_bits)
    except UnrenderableError as error:
        raise _unrenderable(name if out is None else f"{name}_", rt, error) from None
    target = out
    if out is None or copies.dtype_of(out).name != src.out_dtype or _overlaps(out, arrays):
        target = rt.empty(shape, _DTYPES[src.out_dtype])
    if _numel(shape):
        inputs = []
        for i, a in enumerate(args):
            if isinstance(a, cp.ndarray):
                inputs.append((a.data.ptr, _broadcast_strides(name, a, shape), 0))
            elif a is not None:
                inputs.append(_scalar_value(a, operands[i]))
        fault_record = rt.asserts.record() if src.faults else None
        arguments = src.arguments(shape, (target.data.ptr, _element_strides(name, target), 0), inputs, fault_record)
        launch.launch(rt, src, _numel(shape), arguments)
        if src.faults:
            rt.asserts.launched()
    if out is not None and target is not out:
        copies.copy_into(cp, out, target)
        return out
    return target


def _overlaps(out, arrays) -> bool:
    """Whether another operand shares ``out``'s allocation (then the result goes through a copy,
    as an element may be read after another thread wrote it)."""
    return any(a is not out and a.data.mem is out.data.mem for a in arrays)


def _register_formula(op) -> None:
    if op.formula is None or op.name in KERNELS:
        return
    name = op.name

    def fresh(rt, *args, **attrs):
        return run_formula(rt, name, args, attrs)

    def inplace(rt, out, *args, **attrs):
        return run_formula(rt, name, (out, *args), attrs, out=out)

    fresh.__name__, inplace.__name__ = name, f"{name}_"
    kernel(name)(fresh)
    if f"{name}_" not in KERNELS:
        kernel(f"{name}_")(inplace)


for _op in list(OPS.values()):
    _register_formula(_op)
DEFINE_HOOKS.append(_register_formula)


# reductions ---------------------------------------------------------------------------------------


def run_reduction(rt, op: str, x, dims, keepdim: bool, out_dtype: str):
    """Reduction ``op`` of ``x`` over ``dims`` into a new C-contiguous array of ``out_dtype``."""
    dims = tuple(sorted({d % x.ndim for d in dims})) if x.ndim else ()
    strides = _element_strides(op, x)
    kept = [d for d in range(x.ndim) if d not in dims]
    kept_shape = tuple(x.shape[d] for d in kept)
    reduced_shape = tuple(x.shape[d] for d in dims)
    out = rt.empty(kept_shape, _DTYPES[out_dtype])
    n_out, n_red = _numel(kept_shape), _numel(reduced_shape)
    if n_out:
        reduced_strides = tuple(strides[d] for d in dims)
        layout = Q.choose_layout(n_red, reduced_strides[-1] if reduced_strides else 1)
        index_bits = E.index_bits_for(x.shape, [(strides, 0)])
        in_dtype = copies.dtype_of(x).name
        try:
            src = _render_reduction(op, in_dtype, out_dtype, len(kept), len(dims), layout, index_bits)
        except UnrenderableError as error:
            raise _unrenderable(op, rt, error) from None
        source = (x.data.ptr, tuple(strides[d] for d in kept), reduced_strides, 0)
        launch.launch(rt, src, n_out, src.arguments(kept_shape, reduced_shape, out.data.ptr, source))
    if keepdim:
        out = out.reshape(tuple(1 if d in dims else s for d, s in enumerate(x.shape)))
    return out


@functools.lru_cache(maxsize=1024)
def _render_reduction(op, in_dtype, out_dtype, kept_rank, reduced_rank, layout, index_bits):
    return Q.render_reduction(
        op, in_dtype, out_dtype, kept_rank=kept_rank, reduced_rank=reduced_rank, layout=layout, index_bits=index_bits
    )


def _accumulated(x, dtype) -> str:
    """``sum``/``prod``'s result dtype on the device: the requested one, a float's own, else int64."""
    if dtype is not None:
        return dtype.name
    own = copies.dtype_of(x)
    return own.name if own.is_floating_point else "int64"


@kernel("sum")
def sum_(rt, x, *, dims, keepdim, dtype=None):
    if x.dtype.kind == "c" and (dtype is None or dtype.is_complex):
        return complex_formula.reduce_sum(rt, x, dims, keepdim)
    return run_reduction(rt, "sum", x, dims, keepdim, _accumulated(x, dtype))


@kernel("prod")
def prod(rt, x, *, dims, keepdim):
    return run_reduction(rt, "prod", x, dims, keepdim, _accumulated(x, None))


def _extreme_kernel(op: str):
    def run(rt, x, *, dims, keepdim):
        return run_reduction(rt, op, x, dims, keepdim, copies.dtype_of(x).name)

    run.__name__ = op
    return run


def _arg_kernel(op: str):
    def run(rt, x, *, dim, keepdim):
        if dim is None:  # over every element, as a flat tensor
            out = run_reduction(rt, op, x, tuple(range(x.ndim)), False, "int64")
            return out.reshape((1,) * x.ndim) if keepdim else out
        return run_reduction(rt, op, x, (dim,), keepdim, "int64")

    run.__name__ = op
    return run


def _boolean_kernel(op: str, extreme: str):
    """``all``/``any``: the ``amin``/``amax`` of ``x != 0`` (bool), True/False over an empty row."""

    def run(rt, x, *, dims, keepdim):
        flags = x if copies.dtype_of(x) is D.bool_ else run_formula(rt, "ne", (x, 0), {})
        dims = tuple(sorted({d % x.ndim for d in dims})) if x.ndim else ()
        if x.ndim and _numel([x.shape[d] for d in dims]) == 0:
            shape = tuple(1 if d in dims else n for d, n in enumerate(x.shape) if keepdim or d not in dims)
            out = rt.empty(shape, D.bool_)
            out.fill(op == "all")
            return out
        return run_reduction(rt, extreme, flags, dims, keepdim, "bool")

    run.__name__ = op
    return run


for _name in ("amax", "amin"):
    kernel(_name)(_extreme_kernel(_name))
kernel("all")(_boolean_kernel("all", "amin"))
kernel("any")(_boolean_kernel("any", "amax"))
for _name in ("argmax", "argmin"):
    kernel(_name)(_arg_kernel(_name))


# random -------------------------------------------------------------------------------------------


class FrozenDrawError(RuntimeError):
    """A cuda kernel drew from a generator by value while a CUDA graph was captured (the graph would
    repeat the numbers at every replay)."""


_CAPTURE = threading.local()  # .slots: the PhiloxSlots of the graph this thread captures


class PhiloxSlots:
    """The Philox ``(key, counter)`` of the random kernels one CUDA graph holds, in device memory.

    A graph freezes its kernels' by-value arguments, so while a graph is captured (between
    :meth:`begin` and :meth:`end`, which ``munet.cuda.CUDAGraph.capture_begin``/``capture_end`` call:
    a user's ``munet.cuda.graph`` capture and a compiled plan's alike) every random kernel here takes
    the address of a slot of six uint64 words (``kernels_random.philox_slot_words``) and records its
    generator and block count instead of advancing the generator. Before each launch of the graph
    (``CUDAGraph.replay``), :meth:`advance` makes the same ``philox_advance`` calls, in the same
    order, as the region run op by op would, and uploads the ``(key, counter)`` they give into the
    slots (one copy per block of slots, on the stream the graph is launched on). So a replay draws
    the numbers the uncaptured region would, and a reseed between replays takes effect.

    A draw from a cuda generator by value during the capture (a kernel that does not take a slot)
    raises :class:`FrozenDrawError`, naming the generator, and so does a random kernel on another
    cuda device (it would run now, and the graph's draws at each replay would come after it). Draws
    from other device types' generators (a cpu ``rand`` in the captured block) run as usual.
    """

    CHUNK = 16  # slots per device block; a graph with more random kernels gets more blocks

    def __init__(self, rt):
        self.runtime = rt
        self.draws: list = []  # (generator, blocks, block index, row) in capture order
        self.blocks: list = []  # device arrays of (slots, 6) 64-bit words
        self.host: list = []  # their host images
        self._capture = None  # while capturing: (the slots this thread captured into before, the watcher)

    def __len__(self) -> int:
        return len(self.draws)

    def begin(self) -> None:
        """Route this thread's random kernels on ``rt`` to new slots until :meth:`end`."""
        thread = threading.get_ident()

        def by_value(generator):  # any other cuda draw on this thread would be frozen into the graph
            if (
                threading.get_ident() == thread
                and getattr(_CAPTURE, "slots", None) is self
                and generator.device.type == "cuda"
            ):
                raise FrozenDrawError(
                    f"a kernel drew from {generator!r} with its Philox counter as a launch argument during a "
                    "CUDA graph capture, which the graph would repeat at every replay"
                )

        self._capture = (getattr(_CAPTURE, "slots", None), by_value)
        _CAPTURE.slots = self
        draw_watchers.append(by_value)

    def end(self) -> None:
        """Stop routing (the capture ended, or failed); a nested capture's outer slots route again."""
        if self._capture is None:
            return
        previous, by_value = self._capture
        self._capture = None
        draw_watchers.remove(by_value)
        _CAPTURE.slots = previous

    def reserve(self, generator, blocks: int) -> int:
        """The device address of a new slot for a draw of ``blocks`` counter blocks from ``generator``."""
        row = len(self.draws) % self.CHUNK
        if row == 0:  # allocated while capturing: from the graph's private pool, kept with the graph
            self.blocks.append(self.runtime.empty((self.CHUNK, R.PHILOX_SLOT_WORDS), D.int64))
            self.host.append(np.zeros((self.CHUNK, R.PHILOX_SLOT_WORDS), np.uint64))
        self.draws.append((generator, int(blocks), len(self.blocks) - 1, row))
        return self.blocks[-1].data.ptr + row * 8 * R.PHILOX_SLOT_WORDS

    def advance(self) -> None:
        """Draw every slot's ``(key, counter)`` from its generator, in capture order, and upload them
        (call before each launch of the graph, outside any capture)."""
        for generator, blocks, index, row in self.draws:
            key, counter = generator.philox_advance(blocks)
            self.host[index][row] = R.philox_slot_words(key, counter)
        with self.runtime.scope():
            for block, host in zip(self.blocks, self.host):
                block.set(host.view(np.int64))  # the words' bits: int64 is the device's 64-bit dtype


def _philox(rt, generator, blocks: int) -> tuple[int, int, int]:
    """``(key, counter, slot)`` for a draw of ``blocks`` counter blocks: the generator's, by value
    (slot 0), or in a capture on this thread a slot's address the replay fills (``PhiloxSlots``)."""
    slots = getattr(_CAPTURE, "slots", None)
    if slots is not None and slots.runtime is rt:
        return 0, 0, slots.reserve(generator, blocks)
    if slots is not None:
        raise FrozenDrawError(
            f"a kernel on cuda:{rt.index} drew from {generator!r} while cuda:{slots.runtime.index} captures a "
            "CUDA graph, whose draws are made at each replay: they would not follow this one as they do eagerly"
        )
    key, counter = generator.philox_advance(blocks)
    return key, counter, 0


def _random(rt, src, shape, dtype, generator, blocks: int, threads: int, **scalars):
    n = _numel(shape)
    key, counter, slot = _philox(rt, generator, blocks)
    out = rt.empty(tuple(shape), dtype)
    if n:
        launch.launch(rt, src, threads, src.arguments(key, counter, n, out.data.ptr, philox=slot, **scalars))
    return out


def _rendered(label: str, rt, render, dtype):
    try:
        return _cached_random(render, dtype.name)
    except UnrenderableError as error:
        raise _unrenderable(label, rt, error) from None


@functools.lru_cache(maxsize=64)
def _cached_random(render, dtype_name: str):
    return render(dtype_name)


@kernel("uniform")
def uniform(rt, *, shape, dtype, low, high, generator):
    src = _rendered("uniform", rt, R.render_uniform, dtype)
    n = _numel(shape)
    blocks = (n + 3) // 4
    return _random(rt, src, shape, dtype, generator, blocks, blocks, scale=float(high - low), low=float(low))


@kernel("normal")
def normal(rt, *, shape, dtype, mean, std, generator):
    src = _rendered("normal", rt, R.render_normal, dtype)
    n = _numel(shape)
    m = (n + 1) // 2
    return _random(rt, src, shape, dtype, generator, (2 * m + 3) // 4, n, std=float(std), mean=float(mean))


@kernel("randint")
def randint(rt, *, shape, dtype, low, high, generator):
    span = high - low
    if span >= 1 << 64:
        raise DeviceError(f"randint: range [{low}, {high}) is 2**64 or wider; the cuda kernel takes narrower ranges")
    src = _rendered("randint", rt, R.render_randint, dtype)
    blocks = (_numel(shape) + 3) // 4
    return _random(rt, src, shape, dtype, generator, blocks, blocks, span=span, low=low % (1 << 64))


def _draw_into(rt, src, generator, n: int, out, **scalars) -> None:
    """Run ``src`` (a thread per counter block) over the next ``n`` words of ``generator`` into ``out``;
    the generator advances by ``ceil(n / 4)`` blocks, as the cpu kernel's ``random_words(n)``."""
    key, counter, slot = _philox(rt, generator, (n + 3) // 4)
    if n:
        launch.launch(rt, src, src.blocks(n), src.arguments(key, counter, n, out.data.ptr, philox=slot, **scalars))


def _fault_site(rt, message: str):
    """The fault record and the site of a data check raising RuntimeError(message) (device_asserts.py)."""
    return rt.asserts.record(), rt.asserts.site(message, RuntimeError)


@kernel("exponential")
def exponential(rt, *, shape, dtype, lambd, generator):
    src = _rendered("exponential", rt, R.render_exponential, dtype)
    blocks = (_numel(shape) + 3) // 4
    return _random(rt, src, shape, dtype, generator, blocks, blocks, lambd=float(lambd))


_BERNOULLI_RANGE = "bernoulli: expected all probabilities in [0, 1] (got values outside, or NaN)"
_NEGATIVE_STD = "normal: expects all elements of std >= 0.0"


@kernel("bernoulli")
def bernoulli(rt, p, *, generator):
    dtype = copies.dtype_of(p)
    src = _rendered("bernoulli", rt, R.render_bernoulli, dtype)
    out = rt.empty(tuple(p.shape), dtype)
    p = rt.cupy.ascontiguousarray(p)
    record, site = _fault_site(rt, _BERNOULLI_RANGE)
    _draw_into(rt, src, generator, int(p.size), out, p=p.data.ptr, fault=record, site=site)
    rt.asserts.launched()
    return out


@functools.lru_cache(maxsize=256)
def _cached_normal_tensor(dtype_name: str, rank: int, mean_tensor: bool, std_tensor: bool):
    return R.render_normal_tensor(dtype_name, rank, mean_tensor, std_tensor)


@kernel("normal_tensor")
def normal_tensor(rt, mean, std, *, generator):
    cp = rt.cupy
    tensors = [t for t in (mean, std) if isinstance(t, cp.ndarray)]
    if not isinstance(std, cp.ndarray) and not std >= 0:  # a number: checked here, as the cpu does
        raise RuntimeError(_NEGATIVE_STD)
    shape = tuple(np.broadcast_shapes(*(t.shape for t in tensors)))
    dtype = copies.dtype_of(tensors[0])
    try:
        src = _cached_normal_tensor(dtype.name, len(shape), isinstance(mean, cp.ndarray), isinstance(std, cp.ndarray))
    except UnrenderableError as error:
        raise _unrenderable("normal", rt, error) from None
    n = _numel(shape)
    key, counter, slot = _philox(rt, generator, (2 * ((n + 1) // 2) + 3) // 4)
    out = rt.empty(shape, dtype)
    if not n:
        return out
    operands, strides = {}, {}
    for name, value in (("mean", mean), ("std", std)):
        is_tensor = isinstance(value, cp.ndarray)
        operands[name] = value.data.ptr if is_tensor else float(value)
        geometry = _broadcast_strides("normal", value, shape) if is_tensor else (0,) * len(shape)
        strides.update({f"{name[0]}s{d}": s for d, s in enumerate(geometry)})
    record, site = _fault_site(rt, _NEGATIVE_STD) if isinstance(std, cp.ndarray) else (0, 0)
    sizes = {f"size{d}": s for d, s in enumerate(shape)}
    arguments = src.arguments(
        key, counter, n, out.data.ptr, philox=slot, fault=record, site=site, **operands, **sizes, **strides
    )
    launch.launch(rt, src, n, arguments)
    if record:
        rt.asserts.launched()
    return out


_RANDPERM_KEYS = R.render_sort_keys()
_MULTINOMIAL_DRAW = R.render_multinomial_draw()


@kernel("randperm")
def randperm(rt, *, n, dtype, generator):
    keys = rt.empty((n,), D.int64)
    _draw_into(rt, _RANDPERM_KEYS, generator, n, keys)
    if n == 0:
        return rt.empty((0,), dtype)
    _, order = sort(rt, keys, dim=0, descending=False, stable=True)  # ties keep their index order
    return order if dtype is D.int64 else copies.cast(rt.cupy, order, dtype)


_MULTINOMIAL_VALUES = "multinomial: probability tensor contains either `inf`, `nan` or element < 0"
_MULTINOMIAL_SUM = "multinomial: invalid multinomial distribution (sum of probabilities <= 0)"
_MULTINOMIAL_COUNT = (
    "multinomial: invalid multinomial distribution (with replacement=False, not enough non-negative category to "
    "sample {samples} samples)"
)


def _check_rows(rt, src, probs, num_samples: int, cdf) -> None:
    """The cpu's checks of every row of C-contiguous 2-d ``probs`` (as device faults) and, into ``cdf``
    unless it is None, each row's cdf (``render_multinomial_rows``)."""
    rows, k = probs.shape
    record = rt.asserts.record()
    sites = [rt.asserts.site(m, RuntimeError) for m in (_MULTINOMIAL_VALUES, _MULTINOMIAL_SUM)]
    sites.append(rt.asserts.site(_MULTINOMIAL_COUNT.format(samples=num_samples), RuntimeError))
    cdf_ptr = 0 if cdf is None else cdf.data.ptr
    values = [probs.data.ptr, rows, k, 0 if cdf is not None else num_samples, cdf_ptr, record, *sites]
    launch.launch(rt, src, rows, list(zip((t for t, _ in src.params), values)))
    rt.asserts.launched()


@kernel("multinomial")
def multinomial(rt, probs, *, num_samples, replacement, generator):
    dtype = copies.dtype_of(probs)
    shape = (*probs.shape[:-1], num_samples)
    k = int(probs.shape[-1])
    probs = rt.cupy.ascontiguousarray(probs).reshape(-1, k)
    rows = int(probs.shape[0])
    try:
        row_src = _cached_random(R.render_multinomial_rows, dtype.name)
        keys_src = None if replacement else _cached_random(R.render_race_keys, dtype.name)
    except UnrenderableError as error:
        raise _unrenderable("multinomial", rt, error) from None
    if replacement:  # each row's cdf, then a search per sample
        cdf = rt.empty((rows, k), D.float64)
        _check_rows(rt, row_src, probs, num_samples, cdf)
        out = rt.empty(shape, D.int64)
        _draw_into(rt, _MULTINOMIAL_DRAW, generator, rows * num_samples, out, cdf=cdf.data.ptr,
                   num_samples=num_samples, k=k)  # fmt: skip
        return out
    # exponential races: the num_samples smallest keys of each row, in order (ties by index)
    _check_rows(rt, row_src, probs, num_samples, None)
    keys = rt.empty((rows, k), D.float64)
    _draw_into(rt, keys_src, generator, rows * k, keys, probs=probs.data.ptr)
    _, chosen = topk(rt, keys, k=num_samples, dim=1, largest=False)
    return chosen.reshape(shape)

"""The cuda kernel table's entries for the random ops: the Philox kernels of ``kernels_random.py``.

``uniform``, ``normal``, ``randint``, ``exponential``, ``bernoulli``, ``normal_tensor``, ``randperm``
and ``multinomial`` give the CPU's numbers (``kernels_random``'s docstring says which bit for bit;
their data checks record device faults). Each takes the generator's ``(key, counter)`` by value, or,
while a CUDA graph is captured (a user's ``munet.cuda.graph`` or a compiled plan's), from a device
slot that is filled before each launch of the graph (:class:`PhiloxSlots`). Sources are rendered
once per dtype (cached here) and launched by ``launch.launch`` on ``rt.stream``.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.cuda import copies, launch
from munet.backends.cuda import kernels_random as R
from munet.backends.cuda.kernels_rendered import broadcast_strides, numel, unrenderable
from munet.backends.cuda.kernels_sort import sort, topk
from munet.backends.cuda.registry import kernel
from munet.backends.cuda.scalar_cuda import UnrenderableError
from munet.ops.random import draw_watchers


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
    n = numel(shape)
    key, counter, slot = _philox(rt, generator, blocks)
    out = rt.empty(tuple(shape), dtype)
    if n:
        launch.launch(rt, src, threads, src.arguments(key, counter, n, out.data.ptr, philox=slot, **scalars))
    return out


def _rendered(label: str, rt, render, dtype):
    try:
        return _cached_random(render, dtype.name)
    except UnrenderableError as error:
        raise unrenderable(label, rt, error) from None


@functools.lru_cache(maxsize=64)
def _cached_random(render, dtype_name: str):
    return render(dtype_name)


@kernel("uniform")
def uniform(rt, *, shape, dtype, low, high, generator):
    src = _rendered("uniform", rt, R.render_uniform, dtype)
    n = numel(shape)
    blocks = (n + 3) // 4
    return _random(rt, src, shape, dtype, generator, blocks, blocks, scale=float(high - low), low=float(low))


@kernel("normal")
def normal(rt, *, shape, dtype, mean, std, generator):
    src = _rendered("normal", rt, R.render_normal, dtype)
    n = numel(shape)
    m = (n + 1) // 2
    return _random(rt, src, shape, dtype, generator, (2 * m + 3) // 4, n, std=float(std), mean=float(mean))


@kernel("randint")
def randint(rt, *, shape, dtype, low, high, generator):
    span = high - low
    if span >= 1 << 64:
        raise DeviceError(f"randint: range [{low}, {high}) is 2**64 or wider; the cuda kernel takes narrower ranges")
    src = _rendered("randint", rt, R.render_randint, dtype)
    blocks = (numel(shape) + 3) // 4
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
    blocks = (numel(shape) + 3) // 4
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
        raise unrenderable("normal", rt, error) from None
    n = numel(shape)
    key, counter, slot = _philox(rt, generator, (2 * ((n + 1) // 2) + 3) // 4)
    out = rt.empty(shape, dtype)
    if not n:
        return out
    operands, strides = {}, {}
    for name, value in (("mean", mean), ("std", std)):
        is_tensor = isinstance(value, cp.ndarray)
        operands[name] = value.data.ptr if is_tensor else float(value)
        geometry = broadcast_strides("normal", value, shape) if is_tensor else (0,) * len(shape)
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
        raise unrenderable("multinomial", rt, error) from None
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

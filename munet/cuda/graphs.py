"""CUDA graphs as ``torch.cuda`` has them: ``CUDAGraph``, ``graph(...)``, ``graph_pool_handle``,
``is_current_stream_capturing``, ``make_graphed_callables``.

Built on CuPy's stream capture: ``capture_begin`` starts ``cupy.cuda.Stream.begin_capture`` on the
current stream (a non-default one; ``with munet.cuda.graph(g):`` makes a side stream current, as
PyTorch), so every kernel, cuBLAS call and device copy MuNet issues there is recorded, not run;
``capture_end`` ends it (``end_capture``, which also instantiates the graph) and ``replay``
launches it (``cupy.cuda.Graph.launch``) on the current stream. The memory allocated while
capturing comes from the graph's private pool (``memory.PrivatePool``), which nothing outside a
capture into it allocates from, so the addresses the graph reads and writes stay its own for as
long as the graph lives; graphs given the same pool (``pool=other.pool()`` or
``graph_pool_handle()``) share it and must be replayed in the order they were captured.

As in PyTorch, a capture must not synchronise with the host (``.item()``, ``.cpu()``, printing a
tensor, ``synchronize()``): CUDA invalidates the capture and ``capture_end`` raises. Python runs
only during the capture: a replay repeats the recorded device work on the same memory, so new
inputs are copied into the tensors the capture read (``static_x.copy_(x)``).

Random ops are graph-safe, as PyTorch's CUDA generators: a graph would freeze a random kernel's
Philox ``(key, counter)`` launch arguments, so while a graph is captured every random kernel
(dropout, ``rand``, ``randn``, ...) reads them from a slot in device memory instead, and the capture
records the kernel's generator and block count there (``kernels_draws.PhiloxSlots``, the same
slots a ``munet.compile``'d plan's graph uses). Capturing draws nothing; each ``replay()`` first
advances each generator by what the captured region drew, in the order it drew, writes the
``(key, counter)`` each kernel gets into the slots (on the stream the graph is launched on), then
launches. So replay after replay draws the numbers the region run eagerly would, the generator's
next draw after ``N`` replays is the one after ``N`` eager runs, and ``manual_seed`` or
``set_rng_state`` between replays takes effect.
"""

from __future__ import annotations

import gc

from munet._device import device as _device
from munet._device import opened_backend
from munet.backends.cuda import discovery
from munet.backends.cuda.memory import PrivatePool, new_handle, routing
from munet.backends.cuda.streams import Stream, capture_stream, current_stream, synchronize
from munet.backends.cuda.streams import stream as stream_context

_CAPTURE_MODES = ("global", "thread_local", "relaxed")


def _capture_mode(cuda, name: str) -> int:
    if name not in _CAPTURE_MODES:
        raise ValueError(f"CUDAGraph.capture_begin: capture_error_mode must be one of {_CAPTURE_MODES}, got {name!r}")
    runtime = cuda.runtime
    return {
        "global": runtime.streamCaptureModeGlobal,
        "thread_local": runtime.streamCaptureModeThreadLocal,
        "relaxed": runtime.streamCaptureModeRelaxed,
    }[name]


def _runtime(index: int):
    from munet._device import get_backend

    backend = opened_backend(_device("cuda", index)) or get_backend(_device("cuda", index))
    return backend.runtime


def graph_pool_handle() -> tuple[int, int]:
    """A new memory-pool token for ``capture_begin(pool=...)``/``graph(..., pool=...)``: graphs
    captured with the same token share one private pool."""
    discovery.cupy_module()  # raises without CUDA, as PyTorch
    return new_handle()


def is_current_stream_capturing() -> bool:
    """Whether the current device's current stream is capturing a graph (False without CUDA)."""
    if not discovery.device_names():
        return False
    return bool(current_stream()._stream.is_capturing())


class CUDAGraph:
    """One captured CUDA graph.

    >>> g = munet.cuda.CUDAGraph()
    >>> with munet.cuda.graph(g):
    ...     static_y = model(static_x)
    >>> static_x.copy_(new_x); g.replay()      # static_y now holds model(new_x)

    ``keep_graph`` is accepted for PyTorch's signature; CuPy instantiates the graph at
    ``capture_end``, so ``instantiate()`` has nothing left to do.
    """

    def __init__(self, keep_graph: bool = False):
        self.keep_graph = keep_graph
        self._graph = None
        self._pool: PrivatePool | None = None
        self._capture = None  # (cupy stream, routing context) while capturing
        self._philox = None  # the captured random kernels' Philox slots (kernels_draws.PhiloxSlots)
        self._debug = False

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        """Begin capturing the work issued on the current stream (it must not be the default one)."""
        if self._capture is not None or self._graph is not None:
            raise RuntimeError("CUDAGraph.capture_begin: this graph already holds a capture; reset() it first")
        cuda = discovery.cupy_module().cuda
        mode = _capture_mode(cuda, capture_error_mode)
        stream = current_stream()
        if stream.cuda_stream == 0:
            raise RuntimeError(
                "CUDA graphs must be captured on a non-default stream. (However, after capture, it's ok to replay "
                "them on the default stream.)"
            )
        from munet.backends.cuda.kernels_draws import PhiloxSlots

        runtime = _runtime(stream.device.index)
        self._pool = PrivatePool.for_handle(runtime.allocator, pool)
        route = routing(self._pool)
        route.__enter__()
        try:
            stream._stream.begin_capture(mode)
        except BaseException:
            route.__exit__(None, None, None)
            raise
        self._philox = PhiloxSlots(runtime)
        self._philox.begin()
        self._capture = (stream, route)

    def capture_end(self) -> None:
        """End the capture (raises when CUDA invalidated it, e.g. by a host synchronisation)."""
        if self._capture is None:
            raise RuntimeError("CUDAGraph.capture_end: no capture in progress (call capture_begin first)")
        stream, route = self._capture
        self._capture = None
        self._philox.end()
        try:
            self._graph = stream._stream.end_capture()
        finally:
            route.__exit__(None, None, None)
        self._device = stream.device

    def instantiate(self) -> None:
        """Nothing to do: the graph was instantiated at ``capture_end`` (see the class docstring)."""
        self._require_graph("instantiate")

    def replay(self) -> None:
        """Launch the captured work on the current stream of the graph's device (its random kernels
        first get their generators' next counters, as the captured region run eagerly would)."""
        self._require_graph("replay")
        stream = current_stream(self._device)._stream
        if len(self._philox):
            self._philox.advance()
        self._graph.launch(stream)
        backend = opened_backend(self._device)
        if backend is not None:  # the graph may hold checked kernels: the next synchronization reads their faults
            backend.runtime.asserts.replayed(stream)

    def reset(self) -> None:
        """Drop the graph and this graph's hold on its pool."""
        if self._capture is not None:
            raise RuntimeError("CUDAGraph.reset: the graph is being captured; call capture_end first")
        self._graph = None
        self._pool = None
        self._philox = None

    def register_generator_state(self, generator) -> None:
        """PyTorch's: allow ``generator`` (a cuda ``munet.Generator``) to be drawn from in this graph.
        MuNet records every generator a captured random kernel draws from, so each is graph-safe
        without registering; this checks the argument and keeps PyTorch scripts running."""
        from munet.ops.random import Generator

        if not isinstance(generator, Generator) or generator.device.type != "cuda":
            raise TypeError(f"CUDAGraph.register_generator_state: expected a cuda munet.Generator, got {generator!r}")

    def random_draws(self) -> int:
        """MuNet's: how many random kernels the captured graph holds (each replay draws for them)."""
        self._require_graph("random_draws")
        return len(self._philox)

    def pool(self) -> tuple[int, int]:
        """The token of this graph's memory pool (pass it to another capture to share the pool)."""
        if self._pool is None:
            raise RuntimeError("Called CUDAGraph.pool() without a preceding successful capture.")
        return self._pool.handle

    def enable_debug_mode(self) -> None:
        """Keep what ``debug_dump`` needs (CuPy keeps the graph anyway)."""
        self._debug = True

    def debug_dump(self, debug_path: str) -> None:
        """Write the graph in Graphviz's dot language to ``debug_path``."""
        self._require_graph("debug_dump")
        with open(debug_path, "w") as f:
            f.write(self._graph.debug_dot_str())

    def _require_graph(self, what: str) -> None:
        if self._graph is None:
            raise RuntimeError(f"CUDAGraph.{what}: no graph captured (capture_begin/capture_end first)")


class graph:  # noqa: N801 - PyTorch's name
    """``with munet.cuda.graph(g):`` captures the block into ``g`` on a side stream (``stream``, or one
    non-blocking stream per device shared by all captures); it synchronises the device, collects
    garbage and empties the cache first, as PyTorch."""

    default_capture_stream: dict = {}  # device index -> the side stream

    def __init__(self, cuda_graph: CUDAGraph, pool=None, stream: Stream | None = None,
                 capture_error_mode: str = "global"):  # fmt: skip
        if stream is None:
            index = discovery.current_index()
            stream = graph.default_capture_stream.get(index)
            if stream is None:
                stream = graph.default_capture_stream[index] = capture_stream(index)
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.capture_stream = stream
        self.capture_error_mode = capture_error_mode
        self._stream_context = stream_context(stream)

    def __enter__(self) -> None:
        synchronize()
        gc.collect()
        from munet.cuda.memory import empty_cache

        empty_cache()
        self._stream_context.__enter__()
        try:
            self.cuda_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self._stream_context.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.cuda_graph.capture_end()
            else:  # the block's own error is the one to see; the invalidated capture is dropped
                try:
                    self.cuda_graph.capture_end()
                except Exception:  # noqa: S110 - CUDA's "capture invalidated" would hide the cause
                    pass
                self.cuda_graph.reset()
        finally:
            self._stream_context.__exit__(exc_type, exc, tb)


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3, allow_unused_input: bool = False,
                           pool=None):  # fmt: skip
    """Graphed versions of ``callables`` (a callable or ``nn.Module``, or a tuple of them): each call
    copies its tensor arguments into the captured inputs and replays the captured forward; its
    backward replays the captured backward (``autograd.grad`` of the outputs with respect to the
    inputs that require grad and the module's parameters).

    Supported: callables of MuNet ops whose arguments are cuda tensors of ``sample_args``'s shapes
    and dtypes and whose outputs are tensors or tuples of tensors, with no host synchronisation in
    forward or backward. A ``munet.compile``'d callable is refused: on cuda it replays its plan as
    a CUDA graph of its own. Modules are graphed for their ``forward`` and keep graphing only in the
    training mode they were captured in (PyTorch's rule; MuNet does not check it).
    """
    from munet.cuda.graphed import graph_callables

    return graph_callables(callables, sample_args, num_warmup_iters, allow_unused_input, pool)

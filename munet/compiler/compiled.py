"""``munet.compile``: trace on first call, optimize, replay; one specialization per guard key.

A :class:`CompiledFunction` keeps a bounded LRU cache of specializations keyed by each tensor
argument's shape, dtype, device, requires_grad and contiguity, the value of every other
argument, grad mode, ``training`` of the modules involved, and the Python-side state the trace
read (which gradients and optimizer-state tensors exist, and hyperparameters that are not graph
inputs). Each specialization also holds guards checked at every call: the Python values its
trace read (globals, closure cells, module attributes: ``guards.py``) and the outcomes of Python
comparisons on hyperparameters. A call whose key or guards match no cached specialization
traces a new one, and records why (``stats()["last_retrace_reason"]``); the least recently used
one is evicted when the cache is full. ``stats()`` reports what ran. A specialization whose
device was reset since it was lowered is lowered again on the new device before it runs; with
``recover="rebuild"`` a call that meets a lost device is retried once (``recovery.py``).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections import OrderedDict

from munet import metrics
from munet._device import DeviceLostError, as_device, compile_target
from munet._tensor import Tensor
from munet.autograd.function import Function
from munet.autograd.grad_mode import _State
from munet.autograd.node import FreedGraphError
from munet.compiler import passes
from munet.compiler.breaks import SegmentedCall, new_segment_tracer, segment_signature
from munet.compiler.executable import Executable
from munet.compiler.guards import GuardSet, VersionGuard, find_guards
from munet.compiler.ir import CONSTANT, verify
from munet.compiler.joint import partition, trace_gradients
from munet.compiler.options import resolve as resolve_options
from munet.compiler.passes.decompose import decompose_composites
from munet.compiler.passes.fuse import fuse_elementwise
from munet.compiler.passes.remat import rematerialize_pointwise
from munet.compiler.recovery import Snapshot, can_reset, check_recover
from munet.compiler.resize import Program, literals, resized_graph, size_renaming, size_symbols
from munet.compiler.trace import HostReadError, SymScalar, Tracer, is_symbolic, tracing
from munet.ops._registry import Meta, _Tracing

# optimized programs kept per traced structure (resize.py): a second one serves the sizes that do not
# rename from the first (the first was traced at a batch size equal to another dim)
PROGRAMS_PER_STRUCTURE = 2

# One trace (and its lowering) at a time in the process, as torch._dynamo's compile_lock: a trace
# poisons the real tensors it reads until it ends, so two traces over shared tensors must not interleave.
_COMPILE_LOCK = threading.RLock()

_log = logging.getLogger(__name__)
_TRACE_LOG_LEVEL = {"first_call": logging.DEBUG}  # retraces are logged at INFO


def compile(  # noqa: A001
    model=None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str = "inductor",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
    device=None,
    fuse: bool | None = None,
    cache_size: int = 8,
    optimize: bool = True,
    recover=None,
):
    """Compile ``model`` (a function or an ``nn.Module``) into a traced, optimized, replayed step.

    PyTorch's signature: use as ``munet.compile(fn)``, ``@munet.compile`` or
    ``@munet.compile(mode="max-autotune")``. The first call with new guards traces ``model`` with
    symbolic tensors; later calls replay the graph.

    ``fullgraph=False`` (default): a host read of a traced value (``.item()``, ``bool()``,
    ``.tolist()``, ``x[mask]``, a ``munet.compiler.disable``'d call) is a graph break: the graph
    traced so far runs compiled, the Python goes on eagerly and tracing resumes after it; such a
    function then runs segmented at every call (its Python runs, each segment's program is cached
    by its structure; ``breaks.py``). ``fullgraph=True``: a host read raises ``HostReadError``
    naming the line. ``stats()["graph_breaks"]`` and ``munet.compiler.explain`` report breaks.

    ``backend``: ``"inductor"`` (default) is MuNet's compiler (fusion, generated kernels);
    ``"aot_eager"`` traces and replays the graph unfused, each op its eager kernel; ``"eager"``
    captures nothing and runs ``model`` as plain Python. ``mode`` (``"default"``,
    ``"reduce-overhead"``, ``"max-autotune"``, ``"max-autotune-no-cudagraphs"``) is accepted and
    selects the same plan (see ``compiler/options.py``). ``options`` may set ``fuse``,
    ``optimize``, ``cache_size``, ``cuda_graphs`` and ``remat``. ``disable=True`` returns ``model`` itself, uncompiled.

    ``dynamic``: each new shape still traces (the Python is the guard); on cpu a trace whose graph is
    a cached one at other sizes (renamed one to one) reuses that optimized program, re-planning its
    memory, and its size-generic kernels take the size at run time (``compiler/resize.py``,
    ``codegen/c_slabs.py``; ``stats()["reused"]``). ``None`` (default): a dim of a tensor argument
    that changes between calls becomes dynamic (``stats()["dynamic_dims"]``); ``True``: from the
    first call; ``False``: never. On vulkan every specialization has its own pipelines.

    MuNet's own keywords: ``device`` is where the plan runs (default: the device of the first
    tensor argument or state): ``'cpu'`` (generated C) or ``'vulkan'`` (generated WGSL, one
    command buffer per call). ``fuse=False`` keeps every op a separate
    eager kernel (``stats()['fused_groups']`` is then 0). ``recover="rebuild"`` (vulkan) copies the
    state a call touches to the host before it runs, and when the call raises ``DeviceLostError``,
    resets the device, restores that state, rebuilds the plan and retries the call once (see
    ``munet/compiler/recovery.py``); the default ``None`` lets the error through.
    """
    check_recover(recover)
    if not isinstance(fullgraph, bool):
        raise TypeError(f"munet.compile: fullgraph must be a bool, got {type(fullgraph).__name__}")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise TypeError(f"munet.compile: dynamic must be None or a bool, got {type(dynamic).__name__}")
    if not isinstance(disable, bool):
        raise TypeError(f"munet.compile: disable must be a bool, got {type(disable).__name__}")
    settings = resolve_options(backend, mode, options, fuse)
    settings.setdefault("cache_size", cache_size)
    settings.setdefault("optimize", optimize)
    if not isinstance(settings["cache_size"], int) or settings["cache_size"] < 1:
        raise ValueError(f"munet.compile: cache_size must be an int of at least 1, got {settings['cache_size']!r}")
    settings.update(device=device, dynamic=dynamic, recover=recover, fullgraph=fullgraph, mode=mode)
    if model is None:
        return (lambda f: f) if disable else (lambda f: _compiled(f, settings))
    return model if disable else _compiled(model, settings)


def _compiled(model, settings: dict):
    """A module comes back as an ``OptimizedModule`` around its ``CompiledFunction``, a function as the latter."""
    from munet.compiler.optimized_module import OptimizedModule
    from munet.nn.module import Module

    compiled = CompiledFunction(model, **settings)
    return OptimizedModule(model, compiled) if isinstance(model, Module) else compiled


class CompiledFunction:
    """The callable ``munet.compile`` returns; ``stats()``, ``describe()`` and ``graph``."""

    def __init__(
        self,
        fn,
        *,
        device=None,
        dynamic=None,
        fuse=True,
        cache_size=8,
        optimize=True,
        recover=None,
        backend="inductor",
        fullgraph=False,
        mode=None,
        cuda_graphs=True,
        remat=True,
    ):
        from munet.nn.module import Module

        check_recover(recover)
        self.recover = recover
        self.backend = backend
        self.fullgraph = fullgraph
        self.mode = mode

        self.module = fn if isinstance(fn, Module) else None
        self.fn = fn
        self.device = device
        self.fuse = fuse
        self.cuda_graphs = cuda_graphs  # a cuda plan replays as one CUDA graph (lower_cuda_graphs.py)
        self.remat = remat  # fused kernels recompute cheap elementwise values (passes/remat.py)
        self.dynamic = dynamic  # None: automatic (a dim that changes between calls becomes dynamic)
        self._dynamic_dims: dict = {}  # (argument position, dim) -> True: dims seen changing (dynamic=None)
        # {size before: size now} at the dims the latest retrace changed: the sizes its plan's kernels take
        # at run time (codegen/c_symbolic.py)
        self._size_changes: dict = {}
        self.cache_size = cache_size
        self.optimize = optimize
        self._cache: OrderedDict = OrderedDict()  # key -> its specializations, most recently used first
        self._entries = 0
        self._last_key = None
        self._retrace_reasons: list = []  # the latest few, oldest first
        self._last = None
        self._modules = list(fn.modules()) if self.module is not None else _modules_reachable(fn)
        self._module_ids = {id(m) for m in self._modules}
        self._leaves: list = []
        self._leaf_ids: set = set()
        self._optimizers: list = []
        self._counters = dict(
            calls=0, cache_hits=0, traces=0, evictions=0, recoveries=0, graph_breaks=0, segments_compiled=0, reused=0
        )
        # resize.py: traced structure (sizes left out) -> the optimized program new sizes of it reuse
        self._programs: OrderedDict = OrderedDict()
        self._reuse_refusal = None  # why the latest trace of a dynamic structure could not reuse its program
        self._segments: OrderedDict = OrderedDict()  # breaks.segment_signature -> a lowered segment
        # (grad mode, arguments, training) of the calls whose trace broke: they run segmented
        self._segmented_keys: OrderedDict = OrderedDict()
        self._last_call = None  # breaks.CallRecord of the latest call that ran segmented
        self._recording = None  # the CallRecord of the call being traced
        self._times = dict(trace_ms=0.0, compile_ms=0.0, run_ms=0.0, last_run_ms=0.0)
        self._lock = threading.RLock()  # one call at a time: the cache and each plan's arena are shared
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__name__ = getattr(fn, "__name__", None) or type(fn).__name__  # in logs and metrics

    # calling ---------------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        """Calls from several threads run one at a time; a thread that is tracing cannot call it."""
        if self.backend == "eager":  # nothing captured: plain Python, traced inline by an outer trace
            self._counters["calls"] += 1
            return self.fn(*args, **kwargs)
        if _Tracing.tracer is not None:
            raise RuntimeError("munet.compile: a compiled function was called while another one is being traced")
        with self._lock:
            return self._call(*args, **kwargs)

    def _call(self, *args, **kwargs):
        flat, rebuild = _flatten((args, kwargs))
        self._note_modules(flat)
        key = self._key(flat)
        self._counters["calls"] += 1
        metrics.count_compiled_call(self.__name__)
        if key[:3] in self._segmented_keys:  # these arguments' trace broke: the call runs segmented
            self._segmented_keys.move_to_end(key[:3])
            self._last_key = key
            with _COMPILE_LOCK:  # it traces: real tensors are poisoned until each segment ends
                return self._trace_and_lower(flat, rebuild, segmented=True)[1][0]
        entries = self._cache.get(key)
        entry, failed = _first_valid(entries)
        if entry is None:
            if self.dynamic is not False:
                self._mark_dynamic(key)
            reason = failed or self._key_change(key)
            kind = "guard_failed" if failed else "cache_miss" if self._counters["traces"] else "first_call"
            metrics.count_trace(self.__name__, kind)
            _log.log(_TRACE_LOG_LEVEL.get(kind, logging.INFO), "tracing %s (%s)", self.__name__, reason or kind)
            entry, done = self._trace(flat, rebuild)
            if done is not None:  # the trace broke: the call ran segmented while it was traced
                self._last_key = key
                self._segmented_keys[key[:3]] = True
                while len(self._segmented_keys) > self.cache_size:
                    self._segmented_keys.popitem(last=False)
                return done[0]
            # the key again, over the parameters the trace met (their .grad as the call found it): the
            # next call with the same state finds this specialization instead of tracing another one
            key = self._key(flat)
            self._remember(key, entry, reason)
        else:
            self._cache.move_to_end(key)
            if entries[0] is not entry:
                entries.remove(entry)
                entries.insert(0, entry)
            self._counters["cache_hits"] += 1
        self._last_key = key
        start = time.perf_counter()
        self._last = entry
        self._last_call = None
        out = self._run_entry(key, entry, flat, rebuild)
        ms = (time.perf_counter() - start) * 1e3
        self._times["run_ms"] += ms
        self._times["last_run_ms"] = ms
        return out

    def _remember(self, key, entry, reason) -> None:
        """Cache a new specialization under ``key``, evicting the least recently used beyond ``cache_size``."""
        self._cache.setdefault(key, []).insert(0, entry)
        self._cache.move_to_end(key)
        self._entries += 1
        if reason is not None:
            self._retrace_reasons = [*self._retrace_reasons[-7:], reason]
        while self._entries > self.cache_size:
            oldest_key, oldest = next(iter(self._cache.items()))
            oldest.pop()
            if not oldest:
                del self._cache[oldest_key]
            self._entries -= 1
            self._counters["evictions"] += 1

    def _forget(self, key, entry) -> None:
        """Drop specialization ``entry`` from the cache (a first run that failed)."""
        entries = self._cache.get(key, [])
        if any(e is entry for e in entries):
            entries.remove(entry)
            self._entries -= 1
            if not entries:
                del self._cache[key]

    def _mark_dynamic(self, key) -> None:
        """The dims in which ``key``'s tensor arguments differ from a cached specialization that matches
        it otherwise: with ``dynamic=None`` they become dynamic (later plans use size-generic kernels);
        their sizes before and now are ``_size_changes``."""
        self._size_changes = {}
        for other in self._cache:
            if other[0] != key[0] or other[2:] != key[2:] or len(other[1]) != len(key[1]):
                continue
            changed = []
            for k, (a, b) in enumerate(zip(other[1], key[1])):
                if len(a) != 6 or len(b) != 6:
                    if a != b:
                        break
                    continue
                if a[1:] != b[1:] or len(a[0]) != len(b[0]):
                    break
                changed += [(k, d, m, n) for d, (m, n) in enumerate(zip(a[0], b[0])) if m != n]
            else:
                for k, d, m, n in changed:
                    if self.dynamic is None:  # reported by stats()["dynamic_dims"]
                        self._dynamic_dims[k, d] = True
                    if m >= 2 and n >= 2:
                        self._size_changes[m] = n
                if size_renaming(list(self._size_changes), list(self._size_changes.values())) is None:
                    self._size_changes = {}  # not one size per size: no run-time counts from it
                return

    def _key_change(self, key) -> str | None:
        """Why ``key`` (no cached specialization) differs from the previous call's, or None on the first trace."""
        last = self._last_key
        if last is None:
            return None
        if last == key:
            return f"retrace: the specialization for these inputs was evicted (cache_size={self.cache_size})"
        if last[0] != key[0]:
            return f"retrace: grad mode changed to {'on' if key[0] else 'off'}"
        if len(last[1]) != len(key[1]):
            return f"retrace: called with {len(key[1])} arguments, before with {len(last[1])}"
        for k, (before, now) in enumerate(zip(last[1], key[1])):
            if before != now:
                return f"retrace: argument {k} changed: {_show_part(before)} -> {_show_part(now)}"
        if last[2] != key[2]:
            return "retrace: the training/eval mode of a module changed"
        if len(last[3]) != len(key[3]):
            return (
                "retrace: the previous trace met parameters not seen before (whether they have a .grad is now guarded)"
            )
        if last[3] != key[3]:
            return "retrace: which parameters have a .grad changed"
        return "retrace: optimizer state was created, or a hyperparameter that is not a graph input changed"

    def _run_entry(self, key, entry, flat, rebuild):
        """Run ``entry``; under ``recover="rebuild"``, retry once on a fresh device after a loss."""
        entry.relower_if_reset()
        snapshot, entry.first_snapshot = entry.first_snapshot, None
        if self.recover is None or not can_reset(entry.backend):
            return entry.run(flat)
        if snapshot is None:  # a specialization that ran before: its folded constants are saved too
            snapshot = entry.snapshot(flat, entry.backend, entry.constant_copies())
        first = entry.first
        try:
            return entry.run(flat)
        except DeviceLostError as exc:
            _log.warning("%s: %s; resetting the device and retrying the call (recover='rebuild')", self.__name__, exc)
            snapshot.reset_and_restore()
        self._counters["recoveries"] += 1
        if first:  # undo what tracing did to Python state, and trace again on the fresh device
            entry.abandon()
            self._forget(key, entry)
            entry, _ = self._trace(flat, rebuild)
            self._last = entry
            self._remember(key, entry, None)
            entry.first_snapshot = None  # the retry is covered by ``snapshot``; the next call takes its own
        else:
            entry.relower_if_reset()
        try:
            return entry.run(flat)
        except DeviceLostError as exc:
            snapshot.reset_and_restore()
            if first:
                entry.abandon()
                self._forget(key, entry)
            raise DeviceLostError(
                f"munet.compile(recover='rebuild'): the device was lost again while retrying the call; the "
                f"state it touches is back on a fresh device, as it was before the call ({exc})"
            ) from exc

    def _snapshot(self, device, entry, flat):
        """Host copies of what a call of ``entry`` touches, if ``recover`` is set and ``device`` can be reset."""
        from munet._device import get_backend

        backend = get_backend(as_device(device))
        if self.recover is None or not can_reset(backend):
            return None
        return entry.snapshot(flat, backend)

    def _note_modules(self, flat) -> None:
        """Modules passed as arguments: their ``training`` is guarded and ``munet.save`` names their state."""
        from munet.nn.module import Module

        for x in flat:
            if isinstance(x, Module) and id(x) not in self._module_ids:
                for m in x.modules():
                    if id(m) not in self._module_ids:
                        self._module_ids.add(id(m))
                        self._modules.append(m)

    def _key(self, flat) -> tuple:
        """(grad mode, per argument, training of the modules, which .grads exist, optimizer state)."""
        arguments = []
        for x in flat:
            if isinstance(x, Tensor):
                has_grad = _grad_argument(x) and x.grad is not None
                arguments.append((tuple(x.shape), x.dtype, str(x.device), x.requires_grad, x.is_contiguous(), has_grad))
            else:
                arguments.append((type(x), _hashable(x)))
        optimizers = []
        for opt in self._optimizers:
            optimizers.append(tuple(_state_signature(opt.state.get(p)) for g in opt.param_groups for p in g["params"]))
            optimizers.append(_hyper_signature(opt))
        return (
            _State.enabled,
            tuple(arguments),
            tuple(m.training for m in self._modules),
            tuple(0 if p.grad is None else id(p.grad) for p in self._leaves),
            tuple(optimizers),
        )

    def _trace(self, flat, rebuild):
        with _COMPILE_LOCK:
            return self._trace_and_lower(flat, rebuild)

    def _trace_and_lower(self, flat, rebuild, segmented: bool = False):
        """Trace a call: ``(specialization, None)``, or, when the trace broke (or ``segmented``: arguments
        whose trace broke before), ``(None, [result])`` of the call it ran (breaks.py)."""
        from munet._device import get_backend

        start = time.perf_counter()
        tracer = Tracer()
        # Leaves known from earlier traces: their gradient before this call (zero_grad may
        # clear it before the trace meets the leaf).
        tracer.leaves.update({id(p): (p, p.grad) for p in self._leaves})
        graph = tracer.graph
        sym_flat = []
        for k, x in enumerate(flat):
            if isinstance(x, Tensor):
                v = graph.add_input(tuple(x.shape), x.dtype, x.device, source=("arg", k), label=f"argument {k}")
                t = tracer.wrap(v, get_backend(x.device))
                t._requires_grad = x.requires_grad
                tracer.arguments.append((k, t))
                if _grad_argument(x):
                    g0 = None
                    if x.grad is not None:  # backward inside accumulates into it, as eager does
                        g = x.grad
                        gv = graph.add_input(
                            tuple(g.shape), g.dtype, g.device, source=("arg_grad", k), label=f"gradient of argument {k}"
                        )
                        g0 = t.grad = tracer.wrap(gv, get_backend(g.device))
                    tracer.arg_grads.append((k, t, g0))
                sym_flat.append(t)
            else:
                sym_flat.append(x)
        args, kwargs = rebuild(sym_flat)
        # snapshots before the trace: what the graph bakes in is what the Python state held at this call
        python_guards = [] if segmented else find_guards(self.fn, self._modules, self._module_ids)
        breaker = None
        if not self.fullgraph:
            breaker = SegmentedCall(
                tracer,
                lambda *a, **k: self._run_segment(flat, *a, **k),
                lambda: new_segment_tracer(self._leaves),
            )
            breaker.bind(flat)
            self._recording = breaker.record
        try:
            with tracing(tracer):
                result = self.fn(*args, **kwargs)
                out_flat, out_rebuild = _flatten(result)
                current = tracer if breaker is None else breaker.tracer
                current.breaker = None  # a gradient rule's host read keeps the forward alone (_trace_backward)
                joint = _trace_backward(current, out_flat, self.__name__)
            if breaker is not None and (segmented or breaker.record.breaks):
                return self._finish_segmented(breaker, out_flat, out_rebuild, joint, start, not segmented)
            if breaker is not None:
                breaker.uninstall()
            entry = _Specialization(self, tracer, out_flat, out_rebuild, joint)
            entry.python_guards = GuardSet(
                python_guards
                + [
                    VersionGuard(f"tensor read on the host at {where}", storage, version)
                    for storage, version, where in tracer.host_reads.values()
                ]
            )
        except BaseException:
            if breaker is not None:
                breaker.abandon()
            else:
                tracer.restore(failed=True)
            raise
        tracer.restore(failed=False)
        self._watch(tracer)
        traced = time.perf_counter()
        self._times["trace_ms"] += (traced - start) * 1e3
        device = self.device if self.device is not None else _device_of(flat, tracer)
        try:
            entry.first_snapshot = self._snapshot(device, entry, flat)  # before compiling records device work
            with _no_gc_cycles():
                entry.lower(self.optimize, device, self._programs)
        except BaseException:
            entry.abandon()
            raise
        self._counters["reused"] += entry.reused
        self._reuse_refusal = entry.reuse_refusal
        while len(self._programs) > self.cache_size:
            self._programs.popitem(last=False)
        self._times["compile_ms"] += (time.perf_counter() - traced) * 1e3
        self._counters["traces"] += 1
        metrics.observe_compile(self.__name__, time.perf_counter() - start)
        return entry, None

    # graph breaks (breaks.py) -------------------------------------------------------------------------
    def _finish_segmented(self, breaker, out_flat, out_rebuild, joint, start, first: bool):
        """Run the last segment of a call that ran segmented; ``(None, [its result])``
        (``first``: the trace that found the breaks, counted as a trace)."""
        results = breaker.finish(out_flat, joint)
        self._counters["traces"] += first
        self._last_call = breaker.record
        self._counters["graph_breaks"] += len(breaker.record.breaks)
        self._times["trace_ms"] += (time.perf_counter() - start) * 1e3  # the call's Python, its segments' runs
        return None, [out_rebuild(results)]

    def _run_segment(self, flat, tracer, out_flat, joint, *, final: bool):
        """Compile (or find compiled) the segment ``tracer`` traced, with ``out_flat`` its results, and
        run it on this call's values; its results as real tensors, in order."""
        entry = _Specialization(self, tracer, out_flat, list, joint, segment=not final)
        tracer.restore(failed=False)
        self._watch(tracer)
        layout = (entry.n_results, entry.n_forward, tuple(entry.graph.inputs.index(v) for v in entry.state_inputs))
        signature = segment_signature(entry.graph, layout)
        template = self._segments.get(signature)
        if template is None:
            start = time.perf_counter()
            device = self.device if self.device is not None else _device_of(flat, tracer)
            try:
                entry.lower(self.optimize, device)
            except BaseException:
                entry.abandon()
                raise
            self._times["compile_ms"] += (time.perf_counter() - start) * 1e3
            self._counters["segments_compiled"] += 1
            self._segments[signature] = entry
            while len(self._segments) > 4 * self.cache_size:
                self._segments.popitem(last=False)
        else:
            self._segments.move_to_end(signature)
            entry.adopt(template)
        self._last = entry
        self._recording.graphs.append(entry.graph)
        results = entry.run(flat)
        entry.release_call()
        return results

    def _watch(self, tracer) -> None:
        for leaf, _ in tracer.leaves.values():
            if id(leaf) not in self._leaf_ids and id(leaf) not in tracer.local_leaves:
                self._leaf_ids.add(id(leaf))
                self._leaves.append(leaf)
        for opt in tracer.optimizers:
            if all(o is not opt for o in self._optimizers):
                self._optimizers.append(opt)

    # reporting ---------------------------------------------------------------------------------------
    @property
    def graph(self):
        """The optimized graph of the most recently used specialization."""
        if self._last is None:
            raise RuntimeError("munet.compile: nothing traced yet; call the compiled function first")
        return self._last.graph

    def describe(self) -> str:
        """The lowered plan of the most recently used specialization, kernel by kernel, then its guards."""
        if self._last is None:
            raise RuntimeError("munet.compile: nothing traced yet; call the compiled function first")
        lines = [self._last.executable.describe()]
        if self._last.backward_graph is not None:
            lines += ["backward program (run by loss.backward()):", self._last.backward.describe()]
        lines.append("guards (checked at every call; a change retraces):")
        lines += [f"  {text}" for text in self._last.describe_guards(self._last_key, self._modules)]
        if self._last_call is not None:
            record = self._last_call
            lines.append(
                f"the latest call ran segmented ({len(record.ops_per_graph)} graphs, the plan above is the last): "
                f"{len(record.breaks)} graph breaks"
            )
            lines += [f"  {b}" for b in record.breaks]
        if self._retrace_reasons:
            lines.append("latest retraces:")
            lines += [f"  {reason}" for reason in self._retrace_reasons]
        return "\n".join(lines)

    def stats(self) -> dict:
        last = self._last
        return {
            "backend": last.executable.backend.device.type if last else _device_type(self.device),
            "compile_backend": self.backend,
            "mode": self.mode,
            "dynamic": self.dynamic,
            "dynamic_dims": [f"argument {k} dim {d}" for k, d in self._dynamic_dims],
            **(_codegen_stats(last.executable, self.fuse) if last else _codegen_stats(None, self.fuse)),
            "arena_bytes": last.executable.memory_plan.total_bytes if last and last.executable.memory_plan else None,
            "memory": last.executable.memory_plan.summary() if last and last.executable.memory_plan else {},
            "kernels": last.executable.kernels if last else 0,
            **_backward_codegen_stats(last),
            "nodes_traced": last.nodes_traced if last else 0,
            "nodes": len(last.graph.nodes) if last else 0,
            "passes": dict(last.pass_report) if last else {},
            "calls": self._counters["calls"],
            "cache_hits": self._counters["cache_hits"],
            "traces": self._counters["traces"],
            "retraces": max(self._counters["traces"] - 1, 0),
            "last_retrace_reason": self._retrace_reasons[-1] if self._retrace_reasons else None,
            "retrace_reasons": list(self._retrace_reasons),
            "guards": len(last.python_guards) + len(last.guards) if last else 0,
            "cache_entries": self._entries,
            "cache_size": self.cache_size,
            "evictions": self._counters["evictions"],
            "recoveries": self._counters["recoveries"],
            # graph breaks (breaks.py): the latest call's, and how many segment programs were compiled
            "graphs": len(self._last_call.ops_per_graph) if self._last_call else int(last is not None),
            "graph_breaks": len(self._last_call.breaks) if self._last_call else 0,
            "break_reasons": [str(b) for b in self._last_call.breaks] if self._last_call else [],
            "graph_breaks_total": self._counters["graph_breaks"],
            "segments_compiled": self._counters["segments_compiled"],
            # dynamic dims (resize.py): traces that reused a cached program at new sizes, the programs kept
            "reused": self._counters["reused"],
            "programs": sum(len(kept) for kept in self._programs.values()),
            "last_reuse_refusal": self._reuse_refusal,
            "trace_ms": round(self._times["trace_ms"], 3),
            "compile_ms": round(self._times["compile_ms"], 3),
            "run_ms": round(self._times["run_ms"], 3),
            "last_run_ms": round(self._times["last_run_ms"], 3),
        }


class _Specialization:
    """One traced graph with its input fetchers and what to do with its outputs."""

    def __init__(self, owner, tracer: Tracer, out_flat, out_rebuild, joint=None, segment: bool = False):
        """``segment``: a graph that ends at a break; its outputs keep the history the trace gave
        them (their tensors get the results' data, breaks.py), so they are not marked here."""
        graph = tracer.graph
        self.out_rebuild = out_rebuild
        self.out_template = []
        self.differentiable = []  # positions in out_template of outputs eager autograd would differentiate
        outputs = []
        for x in out_flat:
            if isinstance(x, Tensor):
                outputs.append(tracer.value_of(x))
                if x.requires_grad and x.dtype.is_floating_point and not segment:
                    self.differentiable.append(len(self.out_template))
                self.out_template.append(len(outputs) - 1)
            else:
                self.out_template.append(("const", float(x) if isinstance(x, SymScalar) else x))
        self.n_results = len(outputs)
        self.state_writes = []
        self.state_inputs = []  # the input value of each state write (its memory may take the update)
        for buf in tracer.state_buffers:
            if buf.value is not buf.input_value:
                self.state_writes.append(buf.representative)
                self.state_inputs.append(buf.input_value)
                outputs.append(buf.value)
        # (argument position, output index) of tensor arguments written in place: copied back as eager writes them
        self.arg_writes = []
        for k, t in tracer.arguments:
            buf = t._storage.data
            if buf.value is not buf.input_value:
                outputs.append(buf.value)
                self.arg_writes.append((k, len(outputs) - 1))
        self.bindings = []  # (setter target, value index or None)
        self._python_state = []  # what to restore if the first run fails
        for leaf, before in tracer.leaves.values():
            g = leaf.grad
            self._python_state.append((leaf, before))
            if g is before:
                continue
            if g is None:
                self.bindings.append((("grad", leaf), None))
                continue
            if (
                not is_symbolic(g)
                and before is not None
                and g._storage is before._storage
                and tuple(g.shape) == tuple(before.shape)
                and g.stride() == before.stride()
                and g._offset == before._offset
            ):
                leaf.grad = before  # an alias of the same memory (zero_grad(set_to_none=False))
                continue
            outputs.append(tracer.value_of(g))
            self.bindings.append((("grad", leaf), len(outputs) - 1))
            leaf.grad = before  # the first run writes the new gradient into it (or replaces it)
        for k, t, before in tracer.arg_grads:  # leaf arguments that require grad: .grad as eager sets it
            if t.grad is before:
                continue
            if t.grad is None:
                self.bindings.append((("arg_grad", k), None))
                continue
            outputs.append(tracer.value_of(t.grad))
            self.bindings.append((("arg_grad", k), len(outputs) - 1))
        self.skip_undo = []  # (optimizer, [(param, its state dict)], index of found_inf among the outputs)
        for opt, created, found_inf in tracer.undo_on_skip:
            outputs.append(tracer.value_of(found_inf))
            self.skip_undo.append((opt, created, len(outputs) - 1))
        for opt in tracer.optimizers:
            for st in opt.state.values():
                for k, v in st.items():
                    if is_symbolic(v):
                        outputs.append(tracer.value_of(v))
                        self.bindings.append((("item", st, k), len(outputs) - 1))
        # a forward autograd goes through: the gradients follow the forward's outputs until lower() splits them off
        self.joint = joint
        self.n_forward = len(outputs)
        if joint is not None:
            outputs += [g for g in joint.gradients if g is not None]
        self.backward_graph = None
        self._owner_lock = owner._lock
        self._tracer = tracer
        self.fuse = owner.fuse
        self.cuda_graphs = owner.cuda_graphs
        self.remat = owner.remat
        # size-generic kernels (codegen/c_slabs.py): always with dynamic=True, once a dim changed with None
        self.dynamic = owner.dynamic is True or (owner.dynamic is None and bool(owner._dynamic_dims))
        # the sizes that changed since the last specialization, as this trace has them, and how they follow
        # from a few (resize.size_symbols): its fused kernels that hold them take them at run time
        changes = owner._size_changes if self.dynamic else {}
        symbols = size_symbols(changes) if changes else None
        self.size_symbols = None if symbols is None else (tuple(changes[s] for s in symbols[0]), *symbols[1:])
        self.guards = tracer.guards
        self.python_guards = GuardSet([])  # guards.py: the Python values the trace read (set by the caller)
        graph.outputs = outputs
        self.graph = graph
        self.nodes_traced = len(graph.nodes)
        self.first_snapshot = None  # recovery.Snapshot taken before the first run (recover="rebuild")

    def failed_guard(self) -> str | None:
        """None while every guard holds, else why this specialization no longer fits the Python state."""
        guard = self.python_guards.failed()
        if guard is not None:
            return f"retrace: {guard.what} changed"
        for value, fn, other, outcome in self.guards:
            if fn(_evaluate_scalar(value), other) != outcome:
                return (
                    f"retrace: a Python comparison on {_scalar_label(value)} ({fn.__name__} {other!r}) changed outcome"
                )
        return None

    def describe_guards(self, key, modules) -> list[str]:
        lines = [f"grad mode {'on' if key[0] else 'off'}"]
        for k, part in enumerate(key[1]):
            lines.append(f"argument {k}: {_show_part(part)}")
        if modules:
            lines.append(f"training/eval mode of {len(modules)} modules")
        lines += [guard.describe() for guard in self.python_guards.guards]
        for value, fn, other, outcome in self.guards:
            lines.append(f"{fn.__name__}({_scalar_label(value)}, {other!r}) is {outcome}")
        return lines

    def abandon(self) -> None:
        self._tracer.restore(failed=True)

    def lower(self, optimize: bool, device, programs: OrderedDict | None = None) -> None:
        """Optimize, fuse and build the plan on ``device``. ``programs`` (``resize.py``): a size-generic
        specialization whose traced structure is there takes that program at its own sizes instead of
        running the passes, when the sizes rename one-to-one; a new structure is added to it."""
        from munet._device import DeviceError, as_device

        for v in self.graph.inputs:  # explicit devices: no silent transfer of arguments
            if isinstance(v.source, tuple) and v.source[0] == "arg" and as_device(v.device) != as_device(device):
                raise DeviceError(
                    f"munet.compile(device='{as_device(device)}'): {v.label} is on '{v.device}'; "
                    "move the tensors to the compile device first"
                )
        verify(self.graph)
        decomposed = decompose_composites(self.graph, fusing=optimize and self.fuse)
        self.device = device
        self._constant_copies = None
        self.first = True
        self.reused, self.reuse_refusal = False, None
        reusable = (
            programs is not None and optimize and self.fuse and self.dynamic and compile_target(device).reuses_programs
        )
        if reusable:
            sizes: list = []
            layout = (self.n_results, self.n_forward, tuple(self.graph.inputs.index(v) for v in self.state_inputs))
            structure = segment_signature(self.graph, layout, sizes)
            if self._reuse(programs.get(structure, ()), sizes):
                programs.move_to_end(structure)
                return
            traced_inputs, traced_literals = list(self.graph.inputs), literals(self.graph)
        self.pass_report = passes.run_default(self.graph) if optimize else {}
        self.pass_report["decompose"] = decomposed
        graphs = [self.graph]
        if self.joint is not None:
            recompute = optimize and self.remat
            self.backward_graph, self.n_saved, recomputed = partition(
                self.graph, self.n_forward, self.joint.cotangents, recompute
            )
            graphs.append(self.backward_graph)
            self.pass_report["saved_for_backward"] = self.n_saved
            if recompute:
                self.pass_report["recomputed_in_backward"] = recomputed
        if optimize and self.fuse:
            for graph, prefix in zip(graphs, ("", "backward_")):
                self.pass_report[prefix + "fuse"] = fuse_elementwise(graph)
                if self.remat:
                    self.pass_report[prefix + "remat"] = rematerialize_pointwise(graph)
        for graph in graphs:
            verify(graph)
        self._build()
        if reusable:  # a second program of a structure serves sizes that do not rename from the first
            kept = programs.setdefault(structure, [])
            kept[PROGRAMS_PER_STRUCTURE - 1 :] = []
            backward = (self.backward_graph, self.n_saved) if self.joint is not None else (None, 0)
            kept.append(Program(traced_inputs, sizes, traced_literals, self.graph, self.pass_report, *backward))

    def _reuse(self, programs: list, sizes: list) -> bool:
        """Take the first of ``programs`` (the same traced structure) whose sizes rename to this trace's
        ``sizes`` (``resize.py``): its optimized graph with the sizes replaced, planned and built anew (a
        joint graph's: its forward and backward programs, the values the forward saves at the new sizes)."""
        for program in programs:
            renaming = size_renaming(program.sizes, sizes)
            if renaming is None:
                self.reuse_refusal = "the sizes do not rename one to one (a size that changed equals another one)"
                self.size_symbols = None  # a changed size is also another int of the graph: no counts from it
                continue
            self.reuse_refusal = program.refusal(renaming)
            if self.reuse_refusal is None:
                break
        else:
            return False
        inputs = dict(zip(program.traced_inputs, self.graph.inputs))
        self.graph = resized_graph(program.graph, renaming, inputs)
        verify(self.graph)
        if program.backward is not None:
            self.backward_graph = resized_graph(program.backward, renaming, inputs)
            self.n_saved = program.n_saved
            verify(self.backward_graph)
        self.pass_report = dict(program.pass_report)
        self._build()
        self.reused = True
        return True

    def adopt(self, template: _Specialization) -> None:
        """Run ``template``'s lowered program (a segment of the same structure, breaks.py) with this
        trace's inputs and Python-side bookkeeping."""
        cotangents = set(self.joint.cotangents) if self.joint is not None else set()
        inputs = [v for v in self.graph.inputs if v not in cotangents]
        for name in (
            "graph", "pass_report", "backward_graph", "n_saved", "device", "_constant_copies", "executable",
            "backend", "generation", "target", "owned", "output_plans", "backward", "backward_owned",
            "backward_plans",
        ):  # fmt: skip
            if hasattr(template, name):
                setattr(self, name, getattr(template, name))
        self.first = False
        self.fetchers = _fetchers(inputs, self.target)
        self.state_plans = [self.executable.target_on(t.device) for t in self.state_writes]

    def release_call(self) -> None:
        """After a segment's run: drop what ties it to the call that traced it (that call's tensors:
        activations made before a break), since its program serves later calls (``adopt``)."""
        self.fetchers = None
        tracer = self._tracer
        tracer._poisoned, tracer._versions, tracer.grad_inputs, tracer.arguments = [], {}, {}, []
        for v in self.graph.inputs:
            if isinstance(v.source, Tensor):
                v.source = "state"

    def _build(self) -> None:
        """Lower the optimized graph on its device's current runtime."""
        n = self.n_results
        donors = {self.graph.outputs[n + j]: v for j, v in enumerate(self.state_inputs)}
        self.executable = Executable(
            self.graph,
            self.device,
            donors=donors,
            dynamic=self.dynamic,
            capture_graphs=self.cuda_graphs,
            size_symbols=self.size_symbols,
        )
        self.backend = self.executable.backend
        self.generation = getattr(self.backend, "generation", 0)
        self.target = self.executable.target
        self.fetchers = _fetchers(self.graph.inputs, self.target)
        # fixed per plan: which outputs are fresh, and the device target of each written value
        self.owned = _ownership(self.executable)
        self.state_plans = [self.executable.target_on(t.device) for t in self.state_writes]
        self.output_plans = [self.executable.target_on(v.device) for v in self.graph.outputs]
        if self.backward_graph is not None:
            self.backward = Executable(
                self.backward_graph,
                self.device,
                donors={},
                dynamic=self.dynamic,
                capture_graphs=self.cuda_graphs,
                size_symbols=self.size_symbols,
            )
            self.backward_owned = _ownership(self.backward)
            self.backward_plans = [self.backward.target_on(v.device) for v in self.backward_graph.outputs]

    def relower_if_reset(self) -> None:
        """Build the plan again when its device was reset since it was built (the old plan's
        pipelines and buffers went with the old device)."""
        if getattr(self.backend, "generation", 0) != self.generation:
            self._build()

    def snapshot(self, flat, backend, kept=None) -> Snapshot:
        """Host copies of what a call with ``flat`` touches on ``backend`` (recover="rebuild")."""
        args = [x for x in flat if isinstance(x, Tensor)]
        tensors = args + [v.source for v in self.graph.inputs if isinstance(v.source, Tensor)] + self.state_writes
        leaves = [leaf for leaf, _ in self._tracer.leaves.values()]
        return Snapshot(backend, tensors + leaves, args + leaves, self._tracer.optimizers, kept)

    def constant_copies(self) -> list:
        """``(buffer, host copy)`` of the device constants folded into the plan, read once."""
        if self._constant_copies is None:
            buffers = [
                self.target.buffer_of(node.constant)
                for node in self.graph.nodes
                if node.op is CONSTANT and as_device(node.outputs[0].device) == self.backend.device
            ]
            self._constant_copies = [(b, self.backend.read_storage(b)) for b in buffers if b is not None]
        return self._constant_copies

    def run(self, flat):
        with self.executable.scope():  # vulkan: the call and its write-back are one command buffer
            return self._run(flat)

    def _run(self, flat):
        inputs = [f(flat) for f in self.fetchers]
        try:
            outs = self.executable.run(inputs)
        except BaseException:
            if self.first:
                self.abandon()
            raise
        self.first = False
        owned = self.owned
        n = self.n_results
        sources = []
        for j, (t, plan) in enumerate(zip(self.state_writes, self.state_plans)):
            arr = outs[n + j]
            if owned[n + j] is False:
                arr = plan.clone(arr)
            sources.append((t, arr, plan))
        for k, index in self.arg_writes:
            arr, plan = outs[index], self.output_plans[index]
            sources.append((flat[k], arr if owned[index] else plan.clone(arr), plan))
        for t, arr, plan in sources:
            if not plan.same_memory(arr, t._data):  # an in-place update already wrote it
                plan.copy_into(t._data, arr)
            t._storage.version += 1
        for target, index in self.bindings:
            if target[0] == "arg_grad":  # this call's argument tensor
                target = ("grad", flat[target[1]])
            if index is None:
                _bind(target, None, None, None)
            else:
                _bind(target, outs[index], self.graph.outputs[index], self.output_plans[index])
        for opt, created, index in self.skip_undo:  # a skipped first step leaves no optimizer state
            skipped = bool(self.output_plans[index].download(outs[index]))
            for p, st in created:
                if skipped:
                    opt.state.pop(p, None)
                elif opt.state.get(p) is not st:  # a run after a skipped one: the state exists now
                    opt.state[p] = st
        results = []
        for item in self.out_template:
            if isinstance(item, tuple):
                results.append(item[1])
                continue
            v, plan = self.graph.outputs[item], self.output_plans[item]
            arr = outs[item]
            if not owned[item]:
                arr = plan.clone(arr)
            results.append(Tensor._from_kernel(plan.backend, arr, Meta(v.shape, v.dtype)))
        if self.joint is not None and _State.enabled:
            # copies out of the arena (the next call reuses it) and of memory a result shares
            saved = [
                outs[i] if owned[i] else self.output_plans[i].clone(outs[i]) for i in range(self.n_forward, len(outs))
            ]
            inputs = [x if kind == "leaf" else flat[x] for kind, x in self.joint.inputs]
            _attach_backward(results, self.differentiable, self, saved, inputs)
        elif self.differentiable and _State.enabled:
            _mark_not_differentiable(results, self.differentiable, self.grad_leaves(flat))
        return self.out_rebuild(results)

    def run_backward(self, saved: list, grads) -> list:
        """The gradients of the differentiable inputs (None where unused) from the outputs' gradients."""
        inputs = saved + [self.target.argument(g) for g in grads]
        with self._owner_lock, self.backward.scope():  # the backward plan's arena is shared by its calls
            outs = self.backward.run(inputs)
        results, k = [], 0
        for g in self.joint.gradients:
            if g is None:
                results.append(None)
                continue
            arr, plan = outs[k], self.backward_plans[k]
            arr = arr if self.backward_owned[k] else plan.clone(arr)
            v = self.backward_graph.outputs[k]
            results.append(Tensor._from_kernel(plan.backend, arr, Meta(v.shape, v.dtype)))
            k += 1
        return results

    def grad_leaves(self, flat) -> list:
        """The leaves requiring grad this specialization read: parameters met while tracing, leaf arguments."""
        leaves = [leaf for leaf, _ in self._tracer.leaves.values() if leaf.requires_grad]
        return leaves + [x for x in flat if isinstance(x, Tensor) and _grad_argument(x)]


def _fetchers(inputs, target) -> list:
    """Per graph input, a function of the call's flat arguments giving its run-time value."""
    fetchers = []
    for v in inputs:
        src = v.source
        if isinstance(src, Tensor):
            fetchers.append(lambda flat, t=src: t._data)
        elif isinstance(src, tuple) and src[0] == "arg":
            fetchers.append(lambda flat, k=src[1], argument=target.argument: argument(flat[k]))
        elif isinstance(src, tuple) and src[0] == "arg_grad":
            fetchers.append(lambda flat, k=src[1], argument=target.argument: argument(flat[k].grad))
        else:
            fetchers.append(_hyper_fetcher(*src))
    return fetchers


@contextlib.contextmanager
def _no_gc_cycles():
    """Lowering without the cycle collector: it makes tens of thousands of small objects (values,
    nodes, signature tuples), each allocation burst triggering a full collection of the process's
    heap, which took most of a reused program's lowering (GPT step: 0.5-0.9 s of signature building
    with the collector, 0.05-0.2 s without). Garbage with cycles is collected after it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _first_valid(entries) -> tuple:
    """(the first specialization whose guards hold or None, the first failed guard's reason or None)."""
    failed = None
    for entry in entries or ():
        reason = entry.failed_guard()
        if reason is None:
            return entry, None
        failed = failed or reason
    return None, failed


def _show_part(part) -> str:
    """One argument's part of the cache key, readable."""
    if len(part) == 6:
        shape, dtype, device, requires_grad, contiguous, _ = part
        text = f"{dtype.name}{list(shape)} on {device}"
        return text + (", requires grad" if requires_grad else "") + ("" if contiguous else ", non-contiguous")
    kind, value = part
    return f"{kind.__name__} {value!r}" if not isinstance(value, tuple) or value[:1] != ("id",) else kind.__name__


def _scalar_label(value) -> str:
    """The hyperparameter a traced scalar comes from (``AdamW.param_groups[0]['weight_decay']``)."""
    if value.label:
        return value.label
    if value.producer is not None:
        for a in value.producer.args:
            if hasattr(a, "producer"):  # a Value: the scalar's arithmetic on it
                return _scalar_label(a)
    return "a hyperparameter"


def _codegen_stats(executable, fuse: bool) -> dict:
    """Whether fused groups ran generated code or a fallback (the target's ``stats()``)."""
    if executable is None:
        return {"fusion": fuse, **_NOTHING_RUN}
    return {"fusion": fuse, **executable.target.stats()}


def _backward_codegen_stats(specialization) -> dict:
    """The fused groups of a compiled module's backward program (run by ``loss.backward()``), and how
    many of their kernels came from the program it copies at new sizes (``resize.py``)."""
    if specialization is None or specialization.backward_graph is None:
        return {"backward_fused_groups": 0, "backward_kernels_reused": 0}
    stats = specialization.backward.target.stats()
    return {"backward_fused_groups": stats["fused_groups"], "backward_kernels_reused": stats.get("kernels_reused", 0)}


# stats() before the first call: no plan, so no target to ask
_NOTHING_RUN = {
    "generated_code": False,
    "elementwise_kernels": None,
    "fallback": None,
    "fused_groups": 0,
    "generated_kernels": 0,
    "kernel_cache_hits": 0,
    "c_compiler": None,
}


def _device_type(device) -> str | None:
    if device is None:
        return None
    from munet._device import as_device

    return as_device(device).type


def _ownership(executable) -> list:
    """Per graph output: True when its array is a fresh kernel result nobody else holds."""
    inputs = set(executable.input_slots) | executable.constant_slots | executable.arena_slots
    seen: dict = {}
    owned = []
    for i in executable.output_slots:
        owned.append(i not in inputs and i not in seen)
        seen[i] = True
    # A view node's output shares memory with its source.
    views = {executable.slot[n.outputs[0]] for n in executable.graph.nodes if getattr(n.op, "view", None) is not None}
    return [o and i not in views for o, i in zip(owned, executable.output_slots)]


def _trace_backward(tracer, out_flat, name: str):
    """The joint gradients (``joint.trace_gradients``) when autograd will differentiate this call's
    outputs: grad mode is on, some output requires grad, and the trace ran no backward of its own."""
    if not _State.enabled:
        return None
    outputs = [x for x in out_flat if isinstance(x, Tensor) and x.requires_grad and x.dtype.is_floating_point]
    ran_backward = (
        tracer.optimizers
        or any(leaf.grad is not before for leaf, before in tracer.leaves.values())
        or any(t.grad is not before for _, t, before in tracer.arg_grads)
    )
    if not outputs or ran_backward:
        return None
    graph = tracer.graph
    n_nodes, n_inputs = len(graph.nodes), len(graph.inputs)
    try:
        return trace_gradients(tracer, outputs)
    except HostReadError as exc:  # a gradient rule that reads values on the host: forward only, as before
        _log.info("%s: the backward cannot be traced (%s); its outputs will not be differentiable", name, exc)
        del graph.nodes[n_nodes:], graph.inputs[n_inputs:]
        return None
    except FreedGraphError:  # the function ran its own backward through these outputs (an argument's .grad)
        del graph.nodes[n_nodes:], graph.inputs[n_inputs:]
        return None


class _CompiledBackward(Function):
    """The ``grad_fn`` of a compiled forward's outputs: its backward runs the compiled backward program."""

    @staticmethod
    def forward(ctx, specialization, saved, outputs, *inputs):
        ctx.specialization, ctx.saved = specialization, saved
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        if _State.enabled:
            raise RuntimeError(
                "munet.compile: higher-order gradients (backward with create_graph=True, or autograd.grad of a "
                "gradient) cannot go through a compiled forward: its backward is a compiled program with no "
                "autograd graph of its own. Call the module uncompiled for higher-order gradients."
            )
        return (None, None, None, *ctx.specialization.run_backward(ctx.saved, grads))


def _attach_backward(results: list, positions: list, specialization, saved: list, inputs: list) -> None:
    """Give ``results[positions]`` a ``grad_fn`` whose backward runs ``specialization``'s backward program."""
    marked = _CompiledBackward.apply(specialization, saved, tuple(results[k] for k in positions), *inputs)
    for k, t in zip(positions, marked if isinstance(marked, tuple) else (marked,)):
        results[k] = t


class _CompiledOutput(Function):
    """The ``grad_fn`` of compiled outputs with no compiled backward (the step ran its own, or its backward
    could not be traced): backward raises, naming why."""

    @staticmethod
    def forward(ctx, outputs, *leaves):
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            "munet.compile: gradients do not flow back through the outputs of this compiled function: it ran a "
            "backward of its own, or its backward could not be traced (a gradient rule reads values on the host; "
            "the munet.compiler.compiled logger says which). Compile only the forward, do all the differentiation "
            "inside the compiled step, or call the function uncompiled."
        )


def _mark_not_differentiable(results: list, positions: list, leaves: list) -> None:
    """Give ``results[positions]`` a ``grad_fn`` that explains why backward cannot go through them
    (eager's outputs would require grad; without this their backward says they do not)."""
    if not leaves:
        return
    marked = _CompiledOutput.apply(tuple(results[k] for k in positions), *leaves)
    for k, t in zip(positions, marked if isinstance(marked, tuple) else (marked,)):
        results[k] = t


def _grad_argument(x: Tensor) -> bool:
    """Whether ``.grad`` of argument ``x`` is written back after a call (a leaf that requires grad)."""
    return x.requires_grad and x.grad_fn is None


def _bind(target, arr, value, plan) -> None:
    """Hand ``arr``, the data of graph output ``value`` on ``plan``'s device, to Python-side state
    (a ``.grad`` or an optimizer-state entry); ``arr`` None clears it.

    The new value is written into the tensor already there when it fits (identities stay stable),
    else a copy becomes the new tensor.
    """
    kind = target[0]
    new = None
    if arr is not None:
        current = target[1].grad if kind == "grad" else target[1].get(target[2])
        if (
            isinstance(current, Tensor)
            and not is_symbolic(current)
            and tuple(current.shape) == tuple(arr.shape)
            and current.dtype is value.dtype
            and current.device == plan.backend.device
        ):
            plan.copy_into(current._data, arr)
            current._storage.version += 1
            return
        new = Tensor._from_kernel(plan.backend, plan.clone(arr), Meta(value.shape, value.dtype))
    if kind == "grad":
        target[1].grad = new
    else:
        target[1][target[2]] = new


def _evaluate_scalar(value):
    """The current value of a symbolic scalar: read its hyperparameters, redo its arithmetic."""
    if value.source is not None:
        return _hyper_fetcher(*value.source)(None)
    node = value.producer
    args = [_evaluate_scalar(a) if hasattr(a, "producer") else a for a in node.args]
    return node.op.fn(*args)


def _hyper_fetcher(opt, g, key, index):
    if index is None:
        return lambda flat: float(opt.param_groups[g][key])
    return lambda flat: float(opt.param_groups[g][key][index])


def _state_signature(state) -> tuple:
    if not state:
        return ()
    return tuple((k, id(v) if isinstance(v, Tensor) else _hashable(v)) for k, v in state.items())


def _hyper_signature(opt) -> tuple:
    from munet.compiler.trace import SYMBOLIC_HYPERPARAMETERS

    symbolic = SYMBOLIC_HYPERPARAMETERS.get(type(opt).__name__, ())
    parts = []
    for g, group in enumerate(opt.param_groups):
        for k, v in group.items():
            if k == "params":
                continue
            if k in symbolic:
                continue
            parts.append((g, k, _hashable(v)))
    return tuple(parts)


def _hashable(x):
    try:
        hash(x)
        return x
    except TypeError:
        return ("id", id(x))


def _device_of(flat, tracer):
    for x in flat:
        if isinstance(x, Tensor):
            return x.device
    for buf in tracer.state_buffers:
        return buf.representative.device
    return "cpu"


def _flatten(obj):
    """Leaves of nested tuples/lists/dicts, and a function rebuilding the structure from new leaves."""
    leaves = []

    def walk(x):
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            parts = [walk(item) for item in x]
            kind = type(x)
            return lambda it: kind(p(it) for p in parts)
        if isinstance(x, dict):
            parts = [(k, walk(v)) for k, v in x.items()]
            return lambda it: {k: p(it) for k, p in parts}
        leaves.append(x)
        return lambda it: next(it)

    build = walk(obj)
    return leaves, lambda new: build(iter(new))


def _modules_reachable(fn) -> list:
    """Modules a plain function can reach through its closure, globals it names, or ``self``."""
    from munet.nn.module import Module

    found, seen = [], set()

    def add(obj):
        if isinstance(obj, Module) and id(obj) not in seen:
            for m in obj.modules():
                if id(m) not in seen:
                    seen.add(id(m))
                    found.append(m)

    owner = getattr(fn, "__self__", None)
    if owner is not None:
        add(owner)
        for v in getattr(owner, "__dict__", {}).values():
            add(v)
    code = getattr(fn, "__code__", None)
    if code is not None:
        for cell in fn.__closure__ or ():
            try:
                add(cell.cell_contents)
            except ValueError:
                pass
        for name in code.co_names:
            add(fn.__globals__.get(name))
    return found

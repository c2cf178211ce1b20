"""Graph breaks: with ``fullgraph=False`` a host read of a traced value ends the graph instead of raising.

MuNet traces by running the function, so a break happens where the Python is: when the trace
meets ``.item()``, ``bool()``, ``.tolist()``, ``.numpy()``, an op whose output shape depends on
values (``x[mask]``, ``nonzero``, ``masked_select``) or a ``munet.compiler.disable``'d function
called with traced tensors, :class:`SegmentedCall` ends the segment traced so far: its graph gets
as outputs every traced tensor still alive (the ones the Python holds, those saved for autograd),
it is optimized, compiled (or found compiled: segments are cached by the structure of their graph)
and run, and each of those tensors gets its real data in place. The Python reads the value (or the
op runs eagerly), and tracing resumes in a new segment whose inputs are those now-real tensors.

A function whose trace broke runs *segmented* at every later call: its Python runs again each
time, recording each segment (no kernel runs while recording) and replaying the compiled program
of any segment already seen. So every Python path is the one eager takes, with nothing to guard:
a branch on a value read at a break picks its own next segment. The costs are the Python of the
function at each call (as eager, without its kernels), one program boundary per break (the values
crossing it are materialized, not fused across), and the backward of a segment before a break
running as eager autograd (its recorded history), where the segment that calls ``backward()``
compiles the backward it traces.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from munet._tensor import HOST_READS, SYMBOLIC_TENSORS
from munet.compiler.trace import POISON, SymBuffer, Tracer, format_location, user_call

# the munet calls the user makes that read values on the host, as the break reason names them
_HOST_READ_NAMES = {
    "item": "Tensor.item()",
    "__bool__": "bool(tensor) (`if tensor:`)",
    "__float__": "float(tensor)",
    "__int__": "int(tensor)",
    "__index__": "tensor used as an index",
    "tolist": "Tensor.tolist()",
    "numpy": "Tensor.numpy()",
    "__array__": "numpy.asarray(tensor)",
    "__len__": "len(tensor)",
    "__iter__": "iteration over a tensor",
}


@dataclass
class GraphBreak:
    """One break: why the graph ended (``reason``) and where in the user's code (``location``)."""

    reason: str
    location: tuple = ()

    @property
    def where(self) -> str:
        return format_location(self.location)

    def __str__(self) -> str:
        return f"{self.reason} at {self.where}"


@dataclass
class CallRecord:
    """What one segmented call did: its breaks, and the ops of each segment's graph as traced."""

    breaks: list = field(default_factory=list)
    ops_per_graph: list = field(default_factory=list)
    graphs: list = field(default_factory=list)  # each segment's optimized graph, in order


class SegmentedCall:
    """The breaker of one call (``Tracer.breaker``): it ends segments at host reads.

    ``run_segment(tracer, out_flat, joint, final=...)`` is the compiled function's: it turns a
    finished trace into a program (``joint``: the gradients traced for the last segment's outputs,
    or None), runs it on this call's values and returns the results (real tensors, one per element
    of ``out_flat``). ``new_tracer()`` installs the tracer of the next segment.
    """

    def __init__(self, tracer: Tracer, run_segment, new_tracer):
        self.record = CallRecord()
        self._run_segment = run_segment
        self._new_tracer = new_tracer
        self.tracer = tracer
        self._tracked: list = []
        self.materialized: list = []  # (real argument, its symbolic stand-in given data): grads follow it
        self._install(tracer)
        for _, t in tracer.arguments:  # made before this call's breaker existed
            self._track(t)

    # the hooks the tracer calls --------------------------------------------------------------------
    def host_read(self) -> None:
        name, location = user_call()
        self._break(f"{_HOST_READ_NAMES.get(name, name + '()')} read a traced value on the host", location)

    def run_eagerly(self, op, args, attrs):
        """``op`` has a data-dependent output shape: break, then run it eagerly on the real inputs."""
        from munet.ops._registry import apply

        name, location = user_call()
        name = {"_getitem": "tensor[mask]"}.get(name, name)
        self._break(f"{op.name} has an output shape that depends on the values (called as {name})", location)
        with self.eager():
            return apply(op, *args, **attrs)

    def call_eagerly(self, fn, args, kwargs, name: str):
        """A ``munet.compiler.disable``'d ``fn`` called in the trace: break, then call it eagerly."""
        _, location = user_call()
        self._break(f"call to {name}, which munet.compiler.disable keeps out of the graph", location)
        with self.eager():
            return fn(*args, **kwargs)

    # segments --------------------------------------------------------------------------------------
    def finish(self, out_flat: list, joint) -> list:
        """Run the last segment (the one that returns ``out_flat``; ``joint``: the gradients traced
        for its outputs, or None); its real results. Call it after the trace ended."""
        self.uninstall()
        self.record.ops_per_graph.append(len(self.tracer.graph.nodes))
        results = self._run_segment(self.tracer, out_flat, joint, final=True)
        self.sync_grads(self._flat)
        return results

    def abandon(self) -> None:
        self.tracer.restore(failed=True)
        self.uninstall()

    def _break(self, reason: str, location: tuple) -> None:
        self.record.breaks.append(GraphBreak(reason, location))
        tracer = self.tracer
        alive = self._alive(tracer)
        storages = {}
        for t in alive:
            storages.setdefault(id(t._storage), t._storage)
        roots = [tracer.wrap(storage.data.value, storage.backend) for storage in storages.values()]
        self.record.ops_per_graph.append(len(tracer.graph.nodes))
        with self.eager():  # the segment's program runs, and its results are made, outside any trace
            results = self._run_segment(tracer, roots, None, final=False)
            results = [r if r.is_contiguous() and r._offset == 0 else r.clone() for r in results]
        real = {key: result for key, result in zip(storages, results)}
        for t in alive:
            _give_data(t, real[id(t._storage)], storages[id(t._storage)].version)
        self._materialize_argument_grads(tracer)
        self.tracer = self._new_tracer()
        self.tracer.local_leaves = {id(t) for _, t in self.materialized}
        self._install(self.tracer)

    def _alive(self, tracer) -> list:
        """The tensors over this trace's own buffers that something still holds. Views made in the
        trace over real memory (a parameter's ``.t()`` saved for backward) get their data now: the
        Python after the break may run them eagerly."""
        alive = []
        for ref in self._tracked:
            t = ref()
            if t is None:
                continue
            storage = t._storage
            if isinstance(storage.data, SymBuffer):
                alive.append(t)
            elif t._data is POISON:
                t._data = storage.backend.view(storage.data, tuple(t._shape), tuple(t._stride), t._offset)
        self._tracked = []
        return alive

    def _materialize_argument_grads(self, tracer) -> None:
        """A leaf argument's stand-in now holds data and is the leaf of the history traced so far:
        its ``.grad`` is the argument's. A backward traced later in this call accumulates into the
        stand-in (:meth:`sync_grads` copies it back); one run after the call (``loss.backward()``
        outside) goes through hooks that accumulate into the argument's ``.grad`` instead."""
        for k, t, _ in tracer.arg_grads:
            if not isinstance(t._storage.data, SymBuffer) and all(t is not u for _, u in self.materialized):
                self.materialized.append((k, t))
                real = self._flat[k]
                t.grad = real.grad
                t.register_hook(lambda g, t=t, real=real: _take_grad(t, real))
                t.register_post_accumulate_grad_hook(lambda t, real=real: _give_grad(t, real))

    def sync_grads(self, flat) -> None:
        """After the call: each leaf argument's ``.grad`` is its stand-in's, as eager would leave it."""
        for k, t in self.materialized:
            if flat[k].grad is not t.grad:
                flat[k].grad = t.grad

    # tracer installation -----------------------------------------------------------------------------
    def bind(self, flat) -> None:
        self._flat = flat

    def _install(self, tracer) -> None:
        tracer.breaker = self
        SYMBOLIC_TENSORS.poison = POISON
        SYMBOLIC_TENSORS.made = self._track

    def uninstall(self) -> None:
        """Stop tracking symbolic tensors (the trace ended)."""
        SYMBOLIC_TENSORS.poison = SYMBOLIC_TENSORS.idle
        SYMBOLIC_TENSORS.made = None

    def _track(self, t) -> None:
        self._tracked.append(weakref.ref(t))

    def eager(self):
        """Ops run eagerly (and host reads are not watched) for the block: the Python between segments."""
        return _SetAside(self)


class _SetAside:
    def __init__(self, call: SegmentedCall):
        self.call = call

    def __enter__(self):
        from munet.ops._registry import _Tracing

        self.tracer = _Tracing.tracer
        _Tracing.tracer = None
        del HOST_READS.watch
        SYMBOLIC_TENSORS.poison = SYMBOLIC_TENSORS.idle

    def __exit__(self, *exc):
        from munet.ops._registry import _Tracing

        _Tracing.tracer = self.tracer
        HOST_READS.watch = self.tracer.read_on_host
        SYMBOLIC_TENSORS.poison = POISON
        return False


def _take_grad(standin, real) -> None:
    """Before a gradient accumulates into an argument's stand-in outside a trace: start from the argument's."""
    from munet.ops._registry import _Tracing

    if _Tracing.tracer is None:
        standin.grad = real.grad


def _give_grad(standin, real) -> None:
    from munet.ops._registry import _Tracing

    if _Tracing.tracer is None:
        real.grad = standin.grad


def _give_data(t, result, version: int) -> None:
    """Symbolic tensor ``t`` becomes a view of ``result``'s memory (``result``: its buffer's whole value)."""
    storage = result._storage
    storage.version = version  # as the symbolic storage counted: autograd's saved-version checks hold
    t._storage = storage
    t._data = storage.backend.view(storage.data, tuple(t._shape), tuple(t._stride), t._offset)


def new_segment_tracer(leaves) -> Tracer:
    """A tracer for the segment after a break, installed in this thread (``leaves``: the compiled
    function's known parameters, whose ``.grad`` before the segment it records)."""
    from munet.ops._registry import _Tracing

    tracer = Tracer()
    tracer.leaves.update({id(p): (p, p.grad) for p in leaves})
    _Tracing.tracer = tracer
    HOST_READS.watch = tracer.read_on_host
    return tracer


def segment_signature(graph, extra: tuple, sizes: list | None = None) -> tuple:
    """A hashable description of traced ``graph`` that equals another's exactly when one compiled
    program serves both: inputs by kind, shape, dtype and device; nodes by op, wiring and attributes
    (values by position); outputs by position. ``extra``: the caller's own layout (result counts).

    With a list ``sizes``, every int of 2 or more in a shape, an attribute or an argument is left out
    of the description (a placeholder stands there) and appended to ``sizes`` in order: two graphs
    then have the same description when they differ only in such ints (``compiler/resize.py``)."""
    index: dict = {}
    parts: list = []

    def freeze(obj):
        return _freeze(obj, index, sizes)

    for v in graph.inputs:
        index[v] = len(index)
        parts.append(("in", v.kind, freeze(v.shape), str(v.dtype), str(v.device), _source_kind(v.source)))
    for node in graph.nodes:
        parts.append(
            (
                node.op,
                freeze(node.args),
                freeze(node.attrs),
                tuple((freeze(v.shape), str(v.dtype), str(v.device), v.kind) for v in node.outputs),
                freeze(node.constant),
            )
        )
        for v in node.outputs:
            index[v] = len(index)
    parts.append(("out", tuple(index[v] for v in graph.outputs)))
    parts.append(extra)
    return tuple(parts)


def _source_kind(source):
    if isinstance(source, tuple) and source and isinstance(source[0], str):
        return source
    if isinstance(source, tuple):  # an optimizer hyperparameter (optimizer, group, key, index)
        return ("hyperparameter", type(source[0]).__name__, *source[1:])
    return "state"  # a real tensor met while tracing: this call's, fetched at each run


# stands for a size left out of a signature (``segment_signature(..., sizes)``)
SIZE = "#size"


def _freeze(obj, index, sizes=None):
    from munet.compiler.ir import Value

    if isinstance(obj, Value):
        return ("value", index[obj])
    if sizes is not None and type(obj) is int and obj >= 2:
        sizes.append(obj)
        return SIZE
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_freeze(x, index, sizes) for x in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _freeze(v, index, sizes)) for k, v in obj.items()))
    if isinstance(obj, float):  # by repr: a NaN equals itself
        return ("float", repr(obj))
    if isinstance(obj, np.ndarray):
        return ("array", obj.shape, str(obj.dtype), obj.tobytes())
    try:
        hash(obj)
    except TypeError:
        return ("id", id(obj))
    return obj

"""Capture a Python function into a :class:`~munet.compiler.ir.Graph` by tracing.

While a :class:`Tracer` is installed as ``_Tracing.tracer``, every ``apply``,
``apply_inplace`` and ``apply_factory`` records a node instead of running a kernel, so the
graph holds exactly what eager would run, autograd included (``record_history`` runs on the
symbolic outputs, and gradient rules are public ops, so ``loss.backward()`` records the
backward nodes).

Symbolic tensors are ordinary ``Tensor`` objects whose storage holds a :class:`SymBuffer`
(the current SSA value of the whole buffer) and whose ``_data`` is a poison object: reading it
on the host raises :class:`HostReadError` naming the user's line. Real tensors met during the
trace (parameters, buffers, optimizer state, gradients) become *state inputs*; in-place writes
to any tensor are functionalized (the buffer gets a new value); writes to real tensors
become *state outputs* and writes to tensor arguments extra outputs, both copied back into the
tensor after each call, as eager would have written them.

A host read of a traced value raises :class:`HostReadError` unless the tracer has a ``breaker``
(``munet.compile(fullgraph=False)``, the default): then the graph ends there (breaks.py).

Optimizer hyperparameters become graph inputs read from ``param_groups`` at every call
(:class:`SymScalar`), so learning-rate schedules do not retrace. Comparing one in Python
(``if wd == 0``, ``alpha != 1``) guards on the comparison's outcome; converting it to a plain
float guards on its value.
"""

from __future__ import annotations

import contextlib
import linecache
import operator
import os
import sys

import numpy as np

from munet._tensor import HOST_READS, Storage, Tensor, contiguous_strides
from munet.autograd.grad_mode import _State, no_grad
from munet.compiler.ir import SCALAR_OPS, Graph, Value
from munet.ops._registry import Meta, _flat_tensors, _Tracing, record_history

_MUNET_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Hyperparameters an optimizer's traced step reads only through traceable arithmetic, so they
# can be graph inputs. Others are guarded by value (a change retraces).
SYMBOLIC_HYPERPARAMETERS = {
    "Adam": ("lr", "betas", "eps", "weight_decay"),
    "AdamW": ("lr", "betas", "eps", "weight_decay"),
    "SGD": ("lr",),
    "RMSprop": ("lr",),
    "Adamax": ("lr",),
    "Adagrad": ("lr",),
    "NAdam": ("lr",),
    "RAdam": ("lr",),
    "Adadelta": ("lr",),
    "ASGD": ("lr",),
}


class HostReadError(RuntimeError):
    """A traced tensor's value was needed on the host (tensor-dependent Python control flow)."""


def user_location() -> tuple:
    """``(file, line)`` of the innermost frame outside the munet package, or ``()`` (no source is read)."""
    frame = sys._getframe(1)
    while frame is not None:
        if not in_munet(frame.f_code):
            return (frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return ()


def user_call() -> tuple:
    """``(name, location)``: the munet function the user's code called (``item``, ``__bool__``,
    ``nonzero``) on the way to this frame, and that call's :func:`user_location`."""
    frame, name = sys._getframe(1), "?"
    while frame is not None:
        if not in_munet(frame.f_code):
            return name, (frame.f_code.co_filename, frame.f_lineno)
        name = frame.f_code.co_name
        frame = frame.f_back
    return name, ()


def in_munet(code) -> bool:
    """Whether ``code`` is the munet package's own (cached per file name: every traced op asks)."""
    inside = _IN_MUNET.get(code.co_filename)
    if inside is None:
        inside = _IN_MUNET[code.co_filename] = os.path.abspath(code.co_filename).startswith(_MUNET_DIR + os.sep)
    return inside


_IN_MUNET: dict[str, bool] = {}


def format_location(location: tuple) -> str:
    """``File "train.py", line 12: loss = F.cross_entropy(out, y)`` for a :func:`user_location`."""
    if not location:
        return "<unknown location>"
    filename, line = location
    return f'File "{filename}", line {line}: {linecache.getline(filename, line).strip()}'


def _user_line() -> str:
    return format_location(user_location())


def host_read_error(
    what: str = "read a traced tensor's value on the host (.item(), bool(), .numpy(), .tolist() or `if tensor ...:`)",
) -> HostReadError:
    if _Tracing.tracer is None:  # the tracer is per thread: this thread is not the one tracing
        return HostReadError(
            "munet.compile: this tensor's value is unavailable: it is read by a function that munet.compile is "
            "tracing in another thread (until that first call of a new specialization returns), or it is a "
            "traced tensor kept after its trace ended. Run the first call of a compiled function before "
            "sharing its model or tensors with other threads."
        )
    return HostReadError(
        f"munet.compile: {_user_line()}\n"
        f"  tried to {what} while tracing. "
        "Tensor-dependent Python control flow cannot be compiled into one graph: the traced graph must "
        "be the same for every call. Compile with fullgraph=False (the default) to end the graph there "
        "and run that part eagerly, move the host read out of the compiled function, or express the "
        "choice with tensor ops (munet.where, masks)."
    )


def data_dependent_shape_error(op_name: str) -> HostReadError:
    """``x[mask]``, ``nonzero``, ``unique``: an output shape known only from the tensor's values."""
    return host_read_error(
        f"compute {op_name}, whose output shape depends on the values of a traced tensor "
        "(x[mask], nonzero, masked_select, unique),"
    )


def _unknown_shape(meta) -> bool:
    metas = meta if isinstance(meta, tuple) and not isinstance(meta, Meta) else (meta,)
    return any(m.shape is None for m in metas)


class _Poison:
    """The ``_data`` of a symbolic tensor: any use on the host raises :class:`HostReadError`."""

    __slots__ = ()

    def __getattr__(self, name):
        raise host_read_error()

    def __array__(self, *a, **k):
        raise host_read_error()

    def __bool__(self):
        raise host_read_error()

    def __len__(self):
        raise host_read_error()

    def __getitem__(self, item):
        raise host_read_error()

    def __float__(self):
        raise host_read_error()

    def __int__(self):
        raise host_read_error()


POISON = _Poison()


class _FakePointer:
    def __init__(self, obj):
        self.data = id(obj)


class SymBuffer:
    """The traced contents of one storage: its current SSA value in the root geometry.

    ``root`` is ``(shape, stride, offset)`` of the value; a tensor with another geometry over
    the same storage reads ``as_strided(value)`` and writes with ``as_strided_scatter``.
    """

    def __init__(self, value: Value, root, dtype, real_storage=None, representative=None):
        self.value = value
        self.input_value = value
        self.root = root
        self.dtype = dtype
        self.version = 0
        self.views: dict = {}  # geometry -> (version, Value)
        self.real_storage = real_storage
        self.representative = representative  # the real tensor whose memory receives state writes
        self.ctypes = _FakePointer(self)


def is_symbolic(t) -> bool:
    return isinstance(t, Tensor) and isinstance(t._storage.data, SymBuffer)


def _geometry(t) -> tuple:
    return (tuple(t._shape), tuple(t._stride), t._offset)


class SymScalar(float):
    """A Python float whose value is a graph input (or an expression of inputs).

    Arithmetic with numbers records scalar nodes; comparisons and ``float()`` guard the
    sources' values (the trace is then valid only for those values).
    """

    def __new__(cls, number, tracer, value: Value, sources: frozenset):
        obj = float.__new__(cls, number)
        obj._tracer, obj._value, obj._sources = tracer, value, sources
        return obj

    def _binary(self, name, other, reverse=False):
        if isinstance(other, Tensor) or not isinstance(other, (int, float)):
            return NotImplemented
        a, b = (other, self) if reverse else (self, other)
        return self._tracer.scalar_op(name, a, b)

    def __add__(self, o):
        return self._binary("add", o)

    def __radd__(self, o):
        return self._binary("add", o, True)

    def __sub__(self, o):
        return self._binary("sub", o)

    def __rsub__(self, o):
        return self._binary("sub", o, True)

    def __mul__(self, o):
        return self._binary("mul", o)

    def __rmul__(self, o):
        return self._binary("mul", o, True)

    def __truediv__(self, o):
        return self._binary("truediv", o)

    def __rtruediv__(self, o):
        return self._binary("truediv", o, True)

    def __pow__(self, o):
        return self._binary("pow", o)

    def __rpow__(self, o):
        return self._binary("pow", o, True)

    def __neg__(self):
        return self._tracer.scalar_op("neg", self)

    def _compare(self, name, other, fn):
        outcome = fn(float.__float__(self), other)
        self._tracer.guard_compare(self, fn, other, outcome)
        return outcome

    def __float__(self):
        return self._compare("eq", float.__float__(self), operator.eq) and float.__float__(self)

    def __int__(self):
        return int(self.__float__())

    def __bool__(self):
        return self._compare("ne", 0.0, operator.ne)

    def __eq__(self, o):
        return self._compare("eq", o, operator.eq)

    def __ne__(self, o):
        return self._compare("ne", o, operator.ne)

    def __lt__(self, o):
        return self._compare("lt", o, operator.lt)

    def __le__(self, o):
        return self._compare("le", o, operator.le)

    def __gt__(self, o):
        return self._compare("gt", o, operator.gt)

    def __ge__(self, o):
        return self._compare("ge", o, operator.ge)

    __hash__ = float.__hash__


class Tracer:
    """Records ops into ``self.graph`` while installed as ``_Tracing.tracer``."""

    def __init__(self):
        self.graph = Graph()
        self._buffers: dict[int, SymBuffer] = {}  # id(real storage) -> buffer
        self.state_buffers: list[SymBuffer] = []
        self._poisoned: list = []  # (real tensor, its _data)
        self._versions: dict = {}  # real storage -> version before the trace
        self.leaves: dict[int, tuple] = {}  # id(real leaf) -> (leaf, grad before the trace)
        # (argument position, symbolic argument, its symbolic .grad at the start) of leaf arguments
        # that require grad: compiled.py writes their new .grad back after each call
        self.arg_grads: list = []
        # (argument position, symbolic argument) of every tensor argument: one whose buffer was
        # written in place (``w.sub_(g)`` under no_grad) gets the new value copied back after each call
        self.arguments: list = []
        # (optimizer, params, found_inf) of a GradScaler step that created optimizer state: after a
        # run where found_inf holds, compiled.py removes that state (the step was skipped)
        self.undo_on_skip: list = []
        self.optimizers: list = []
        self._opt_snapshots: list = []
        self._hyper: dict = {}  # (id(opt), group, key, index) -> Value
        self.hyper_sources: dict = {}  # Value -> (opt, group, key, index)
        self.guards: list = []  # (scalar Value, comparison, other operand, outcome seen while tracing)
        # real tensors whose value was read on the host: id(storage) -> (storage, version, where)
        self.host_reads: dict = {}
        # real tensors with autograd history met (made before a graph break): id -> tensor; the
        # compiled backward of this trace's outputs flows into their history (compiled.py)
        self.grad_inputs: dict = {}
        # where a host read of a traced value ends the graph instead of raising (breaks.py), or None
        self.breaker = None
        self.local_leaves: set = set()  # ids of leaves that live for one call (breaks.py): not remembered

    # values ------------------------------------------------------------------------------------
    def _buffer(self, t: Tensor) -> SymBuffer:
        data = t._storage.data
        if isinstance(data, SymBuffer):
            return data
        buf = self._buffers.get(id(t._storage))
        if buf is None:
            buf = self._new_state(t)
        if t._data is not POISON:
            self._poisoned.append((t, t._data))
            t._data = POISON
        return buf

    def _new_state(self, t: Tensor) -> SymBuffer:
        storage = t._storage
        if isinstance(storage.data, np.ndarray) and storage.data.dtype != t._dtype.np:
            raise RuntimeError(
                f"munet.compile: a {t._dtype} view(dtype) of {storage.data.dtype} storage cannot be traced; "
                "make it a tensor of its own first (.clone()) or create it inside the compiled function"
            )
        size = int(storage.data.shape[0]) if hasattr(storage.data, "shape") else t.numel()
        if t.is_contiguous() and t._offset == 0 and t.numel() == size:
            root, rep = _geometry(t), t
        else:
            root = ((size,), (1,), 0)
            rep = Tensor._make(
                storage, (size,), (1,), 0, t._dtype, storage.backend.view(storage.data, (size,), (1,), 0)
            )
        label = "state " + ("parameter " if t._requires_grad and t._grad_fn is None else "") + "tensor"
        value = self.graph.add_input(root[0], t._dtype, t.device, source=rep, label=label)
        buf = SymBuffer(value, root, t._dtype, storage, rep)
        self._buffers[id(storage)] = buf
        self.state_buffers.append(buf)
        self._versions[storage] = storage.version
        if t._requires_grad and t._grad_fn is None and id(t) not in self.leaves:
            self.leaves[id(t)] = (t, t.grad)
        return buf

    def met(self, t: Tensor) -> bool:
        """Whether real tensor ``t``'s storage is one of this trace's state inputs."""
        return id(t._storage) in self._buffers

    def initial_value(self, t: Tensor):
        """A symbolic tensor of what real tensor ``t`` held when the call started (its state input),
        or None when ``t`` is symbolic (made while tracing) or a view of part of its storage."""
        buf = self._buffers.get(id(t._storage))
        if buf is None or buf.real_storage is None or _geometry(t) != buf.root:
            return None
        return self.wrap(buf.input_value, t._storage.backend)

    def value_of(self, t: Tensor) -> Value:
        if t._grad_fn is not None and t._data is not POISON and t._requires_grad:  # history from outside
            self.grad_inputs[id(t)] = t
        buf = self._buffer(t)
        if t._requires_grad and t._grad_fn is None and id(t) not in self.leaves and buf.real_storage is not None:
            self.leaves[id(t)] = (t, t.grad)
        geom = _geometry(t)
        if geom == buf.root:
            return buf.value
        hit = buf.views.get(geom)
        if hit is not None and hit[0] == buf.version:
            return hit[1]
        from munet.ops.view import as_strided_op

        shape, stride, offset = geom
        attrs = dict(size=shape, stride_out=stride, storage_offset=offset - buf.root[2], input_offset=0)
        v = self._emit(as_strided_op, (buf.value,), attrs, Meta(shape, t._dtype), t.device)[0]
        buf.views[geom] = (buf.version, v)
        return v

    def _arg(self, a):
        if isinstance(a, Tensor):
            return self.value_of(a)
        if isinstance(a, SymScalar):
            if a._tracer is not self:
                raise HostReadError(
                    f"munet.compile: {_user_line()}\n  a graph break inside optimizer.step() (its traced "
                    "hyperparameters belong to the graph that ended): move the host read out of the step, "
                    "or compile with fullgraph=True to see where it happens"
                )
            return a._value
        if isinstance(a, (list, tuple)) and any(isinstance(x, (Tensor, SymScalar)) for x in a):
            return type(a)(self._arg(x) for x in a)
        return a

    def _emit(self, op, args, attrs, meta, device) -> list[Value]:
        metas = meta if isinstance(meta, tuple) and not isinstance(meta, Meta) else (meta,)
        if any(m.shape is None for m in metas):
            raise data_dependent_shape_error(op.name)
        out_types = [(m.shape, m.dtype, device, "tensor") for m in metas]
        node = self.graph.add_node(
            op, [self._arg(a) for a in args], {k: self._arg(v) for k, v in attrs.items()}, out_types
        )
        node.origin = user_location()
        return node.outputs

    def _symbolic(self, value: Value, backend) -> Tensor:
        shape = tuple(value.shape)
        stride = contiguous_strides(shape)
        storage = Storage(SymBuffer(value, (shape, stride, 0), value.dtype), backend)
        return Tensor._make(storage, shape, stride, 0, value.dtype, POISON)

    def wrap(self, value: Value, backend) -> Tensor:
        """A symbolic tensor for ``value`` (graph inputs and constants)."""
        return self._symbolic(value, backend)

    # the hooks ``apply`` calls ------------------------------------------------------------------------
    def record(self, op, args, attrs, meta):
        if self.breaker is not None and _unknown_shape(meta):  # a data-dependent shape ends the graph
            return self.breaker.run_eagerly(op, args, attrs)
        flat = _flat_tensors(op, args)
        first = next(a for a in flat if isinstance(a, Tensor))
        backend = first._storage.backend
        if op.view is not None:
            base = args[0]
            in_value = self.value_of(base)
            shape, stride, offset = op.view(base, **attrs)
            value = self._emit(op, (in_value,), attrs, meta, base.device)[0]
            root = base._base if base._base is not None else base
            out = Tensor._make(base._storage, shape, tuple(stride), offset, base._dtype, POISON, root)
            buf = self._buffer(base)
            buf.views[_geometry(out)] = (buf.version, value)
            outputs = (out,)
        else:
            values = self._emit(op, args, attrs, meta, first.device)
            outputs = tuple(self._symbolic(v, backend) for v in values)
        if _State.enabled and op.backward is not None:
            record_history(op, args, attrs, flat, outputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def record_inplace(self, op, self_t, args, attrs, meta):
        """``apply_inplace``'s write without autograd history (its checks ran there)."""
        value = self._emit(op, (self_t, *args), attrs, meta, self_t.device)[0]
        if value.dtype is not self_t.dtype:
            from munet.ops.convert import cast

            with no_grad():
                value = self.value_of(cast(self._symbolic(value, self_t._storage.backend), self_t.dtype))
        self.write(self_t, value)
        return self_t

    def write_tensor(self, t: Tensor, source: Tensor) -> None:
        """``t``'s memory now holds ``source`` (same shape and dtype): ``apply_inplace``'s copy."""
        self.write(t, self.value_of(source))

    def record_transfer(self, op, x, attrs, meta, target):
        """``apply_transfer``'s node: ``x`` copied to backend ``target``, without history."""
        value = self._emit(op, (x,), attrs, meta, target.device)[0]
        return self._symbolic(value, target)

    def record_factory(self, op, device, attrs, meta):
        from munet._device import get_backend

        value = self._emit(op, (), attrs, meta, device)[0]
        return self._symbolic(value, get_backend(device))

    def write(self, t: Tensor, value: Value) -> None:
        """Functionalize an in-place write of ``value`` into ``t``'s memory."""
        buf = self._buffer(t)
        geom = _geometry(t)
        if geom == buf.root:
            buf.value = value
            buf.views = {}
        else:
            from munet.ops.view import as_strided_scatter_op

            shape, stride, offset = geom
            attrs = dict(size=shape, stride=stride, storage_offset=offset - buf.root[2])
            meta = Meta(buf.root[0], buf.dtype)
            buf.value = self._emit(as_strided_scatter_op, (buf.value, value), attrs, meta, t.device)[0]
            buf.views = {}
        buf.version += 1
        if geom != buf.root:
            buf.views[geom] = (buf.version, value)
        t._storage.version += 1

    def read_on_host(self, storage: Storage) -> None:
        """A real tensor's ``numpy()`` (``.item()``, ``bool()``) while tracing (the thread's
        ``HOST_READS.watch``): the trace holds the value of ``storage``, guarded by its version."""
        if isinstance(storage.data, SymBuffer):
            if self.breaker is not None:  # the graph ends here: the tensor gets its value
                self.breaker.host_read()
            return
        if id(storage) in self.host_reads:
            return
        where = _user_line()
        self.host_reads[id(storage)] = (storage, self._versions.get(storage, storage.version), where)

    # scalars -------------------------------------------------------------------------------------------
    def scalar_op(self, name, a, b=None):
        operands = (a,) if b is None else (a, b)
        number = SCALAR_OPS[name].fn(*(float.__float__(x) if isinstance(x, SymScalar) else x for x in operands))
        sources = frozenset().union(*(x._sources for x in operands if isinstance(x, SymScalar)))
        node = self.graph.add_node(
            SCALAR_OPS[name], [self._arg(x) for x in operands], {}, [(None, None, None, "scalar")]
        )
        return SymScalar(number, self, node.outputs[0], sources)

    def guard_compare(self, scalar: SymScalar, fn, other, outcome) -> None:
        """The trace took a Python branch on ``fn(scalar, other)``; it stays valid while the outcome does."""
        self.guards.append((scalar._value, fn, other, outcome))

    def _hyper_scalar(self, opt, g: int, key: str, index, number):
        k = (id(opt), g, key, index)
        value = self._hyper.get(k)
        source = (opt, g, key, index)
        if value is None:
            label = f"{type(opt).__name__}.param_groups[{g}][{key!r}]" + ("" if index is None else f"[{index}]")
            value = self.graph.add_input(kind="scalar", source=source, label=label)
            self._hyper[k] = value
            self.hyper_sources[value] = source
        return SymScalar(number, self, value, frozenset([source]))

    @contextlib.contextmanager
    def optimizer_step(self, opt):
        """Around ``opt.step()``: its float hyperparameters become graph inputs."""
        if all(o is not opt for o in self.optimizers):
            self.optimizers.append(opt)
            self._opt_snapshots.append((opt, {p: dict(s) for p, s in opt.state.items()}))
        names = SYMBOLIC_HYPERPARAMETERS.get(type(opt).__name__, ())
        saved = []
        for g, group in enumerate(opt.param_groups):
            for key in names:
                v = group.get(key)
                if type(v) is float:
                    saved.append((group, key, v))
                    group[key] = self._hyper_scalar(opt, g, key, None, v)
                elif isinstance(v, tuple) and all(type(x) is float for x in v):
                    saved.append((group, key, v))
                    group[key] = tuple(self._hyper_scalar(opt, g, key, i, x) for i, x in enumerate(v))
        try:
            yield
        finally:
            for group, key, v in saved:
                group[key] = v

    def step_unless(self, found_inf: Tensor, optimizer, step):
        """``step_unless`` under munet.compile: record ``step()``, then put parameters and optimizer
        state back where ``found_inf`` holds (no host read, so the skip is decided on every replay).
        State the step creates goes to ``undo_on_skip``: the compiled call drops it after a skipped run."""
        from munet.ops.elementwise import where

        with no_grad():
            params = [p for group in optimizer.param_groups for p in group["params"]]
            old_params = [p.detach().clone() for p in params]
            old_state = {
                id(p): {k: v.detach().clone() for k, v in optimizer.state[p].items() if isinstance(v, Tensor)}
                for p in params
                if p in optimizer.state
            }
            result = step()
            for p, old in zip(params, old_params):
                p.detach().copy_(where(found_inf.to(p.device), old, p.detach()))
            created = []
            for p in params:
                if p not in optimizer.state:
                    continue
                before = old_state.get(id(p))
                if before is None:
                    created.append((p, optimizer.state[p]))
                for key, value in optimizer.state[p].items():
                    if not isinstance(value, Tensor):
                        continue
                    # state the step created: a real tensor (a step count) goes back to what it held
                    # before the step; a traced one only exists in this step's dict, dropped when skipped
                    old = before.get(key) if before is not None else self.initial_value(value)
                    if old is not None:
                        value.copy_(where(found_inf.to(value.device), old, value))
        if created:
            self.undo_on_skip.append((optimizer, created, found_inf))
        return result

    # ending ----------------------------------------------------------------------------------------------
    def restore(self, *, failed: bool) -> None:
        """Undo what tracing did to real objects (poisoned data, versions; on failure, grads and state)."""
        for t, data in self._poisoned:
            t._data = data
        for storage, version in self._versions.items():
            storage.version = version
        if failed:
            for leaf, grad in self.leaves.values():
                leaf.grad = grad
            for opt, snapshot in self._opt_snapshots:
                opt.state.clear()
                for p, s in snapshot.items():
                    opt.state[p] = s


@contextlib.contextmanager
def tracing(tracer: Tracer):
    """Install ``tracer`` for the current thread; ops in other threads stay eager."""
    if _Tracing.tracer is not None:
        raise RuntimeError("munet.compile: a compiled function was called while another one is being traced")
    _Tracing.tracer = tracer
    HOST_READS.watch = tracer.read_on_host
    try:
        yield tracer
    finally:
        _Tracing.tracer = None
        del HOST_READS.watch  # back to the class's no-op


@contextlib.contextmanager
def suspended():
    """Run ops eagerly inside a trace, on real tensors made in the block: host arithmetic whose result
    the trace bakes in as a constant (an imported ONNX graph's shape computations, munet/onnx)."""
    tracer = _Tracing.tracer
    _Tracing.tracer = None
    try:
        yield
    finally:
        _Tracing.tracer = tracer

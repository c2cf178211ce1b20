"""The op registry and the one dispatch path, ``apply``.

An :class:`Op` is defined once, in ``munet/ops/<family>.py``: its input roles, its
shape/dtype rule (``meta``), its gradient rule (``backward``, written with public ops) and
which tensors that rule reads (``saves``). View ops give a ``view`` rule (new shape, strides
and offset over the same storage) instead of a kernel. Backends register kernels by op name.

A *composite* gives a ``decomposition``: a function written in public ops that computes the
op (``softmax`` is max, subtract, exp, sum and divide). It is the op's meaning. A backend may
register a faster kernel under the composite's name; where it has none (or, for a composite
without a gradient rule of its own, where an input needs a gradient), eager mode runs the
decomposition, and the compiler replaces composite nodes by their decomposition before fusion
(``compiler/passes/decompose.py``). A composite with its own ``backward`` keeps it (the
decomposition then runs without recording history); one without differentiates through the
primitives of its decomposition, in every mode.

``apply(op, *args, **attrs)`` validates through ``meta``, runs the kernel of the inputs'
device (or records a node when a tracer is active) and attaches autograd history.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from munet._device import DeviceError, factory_device, get_backend
from munet._dtype import can_cast
from munet._memory_format import LayoutError
from munet._tensor import Storage as _Storage
from munet._tensor import Tensor as _Tensor
from munet._tensor import contiguous_strides
from munet.autograd.grad_mode import _State
from munet.autograd.grad_mode import no_grad as _no_grad
from munet.autograd.node import Node, SavedTensor
from munet.ops._utils import BroadcastError

OPS: dict[str, Op] = {}


class Meta:
    """Shape and dtype of an op output. ``shape`` is None when it depends on the data.

    Not a tuple (a tuple of Metas describes several outputs), and a plain class rather than a
    NamedTuple: every eager op makes one, and this costs half as much to build."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple | None, dtype):
        self.shape = shape
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Meta(shape={self.shape!r}, dtype={self.dtype!r})"


class Op:
    """One op: roles of its inputs, shape/dtype rule, gradient rule and saved tensors.

    An elementwise primitive gives its ``formula`` (``munet/ops/_scalar.py``); every kernel of
    the op is rendered from it. A composite gives its ``decomposition(*args, **attrs)`` in
    public ops (see the module docstring); ``primitive`` is False for views and composites. ``saves`` lists the roles the gradient rule reads: an input role (``"self"``), an output
    role (``"result"``), or ``(role, i)`` meaning "save only if input ``i`` needs a gradient".
    """

    __slots__ = (
        "name",
        "inputs",
        "outputs",
        "meta",
        "backward",
        "saves",
        "view",
        "variadic",
        "nondiff_outputs",
        "backward_name",
        "primitive",
        "formula",
        "effectful",
        "decomposition",
        "save_plan",
        "complex_rule",
        "saves_input_strides",
        "direct",
        "geometry",
        "__dict__",
    )

    def __init__(
        self,
        name: str,
        *,
        meta: Callable,
        inputs: tuple[str, ...] = ("self",),
        outputs: tuple[str, ...] = ("result",),
        backward: Callable | None = None,
        saves: tuple = (),
        view: Callable | None = None,
        variadic: bool = False,
        nondiff_outputs: tuple[int, ...] = (),
        backward_name: str | None = None,
        formula: Callable | None = None,
        effectful: bool = False,
        decomposition: Callable | None = None,
        saves_input_strides: bool = False,
    ):
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.meta = meta
        self.backward = backward
        self.saves = tuple((s, None) if isinstance(s, str) else s for s in saves)
        # per saved role: (role, condition, its output number or None, its input position or None)
        self.save_plan = tuple(
            (
                role,
                cond,
                outputs.index(role) if role in outputs else None,
                inputs.index(role) if role in inputs else None,
            )
            for role, cond in self.saves
        )
        self.view = view
        # a view's geometry(shape, stride, offset, **attrs), where its rule is one (view._view_rule)
        self.geometry = getattr(view, "geometry", None)
        self.variadic = variadic
        self.nondiff_outputs = nondiff_outputs
        self.backward_name = backward_name
        self.primitive = view is None and decomposition is None
        # a primitive kernel or a view of fixed arity: ``apply``'s fast path may run it
        self.direct = decomposition is None and not variadic
        if view is not None and (len(inputs) != 1 or backward is None):
            raise RuntimeError(f"op '{name}': a view op takes one tensor input and has a gradient rule")
        self.formula = formula  # elementwise primitives: the scalar formula (munet/ops/_scalar.py)
        # more than a function of its inputs (a device-side check): the compiler keeps and never merges it
        self.effectful = effectful
        self.decomposition = decomposition  # composites: the op in public ops, its meaning
        # complex inputs: None refuses them; "analytic" (a rule written for real numbers whose
        # ops extend analytically: the engine conjugates around it; every view) or "wirtinger" (a
        # rule in PyTorch's conjugate convention already). munet/ops/complex.py sets the others.
        self.complex_rule = "analytic" if view is not None else None
        # the gradient rule reads its inputs' strides (ctx.input_strides), to give each input's
        # gradient that input's layout, as PyTorch's mm backward does
        self.saves_input_strides = saves_input_strides

    def __repr__(self) -> str:
        return f"<munet op {self.name}>"


# Called with every op defined from now on: how a backend renders the kernel of an elementwise op
# (from its formula) defined after the backend loaded, so a new op needs only its definition.
DEFINE_HOOKS: list = []


def define(name: str, **kwargs) -> Op:
    """Create and register an op; each name is defined exactly once."""
    if name in OPS:
        raise RuntimeError(f"op '{name}' is defined twice")
    op = Op(name, **kwargs)
    OPS[name] = op
    for hook in DEFINE_HOOKS:
        hook(op)
    return op


class _Hooked(threading.local):
    """Whether any of ``apply``'s per-thread hooks below is set in this thread: one read tells the
    fast path of ``apply`` that none is (kept by the hooks' ``__setattr__``)."""

    any = False


_HOOKED = _Hooked()


class _Hook(threading.local):
    """A per-thread hook of ``apply``'s; setting it updates ``_HOOKED`` for this thread."""

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        _HOOKED.any = (
            _Tracing.tracer is not None or _Autocast.cast_inputs is not None or OP_OBSERVER.observe is not None
        )


class _TracingState(_Hook):
    """The tracer of the function the compiler is capturing in this thread; ``None`` in eager
    mode. Per thread: a trace in one thread leaves other threads' ops eager."""

    tracer = None


class _AutocastHook(_Hook):
    """Set by ``munet.amp.autocast`` for this thread: ``cast_inputs(op, args) -> args``;
    ``None`` outside autocast."""

    cast_inputs = None


class OpObserver(_Hook):
    """Set by ``munet.profiler.profile`` for this thread: ``observe(op, args)`` returns a context
    manager around each ``apply``; ``None`` when nothing profiles."""

    observe = None


_Tracing = _TracingState()
_Autocast = _AutocastHook()
OP_OBSERVER = OpObserver()


def _flat_tensors(op: Op, args):
    """The inputs of ``op`` one by one: ``args`` itself, or for a variadic op its lists spread out."""
    if not op.variadic:
        return args
    flat = []
    for a in args:
        if isinstance(a, (list, tuple)):
            flat.extend(a)
        else:
            flat.append(a)
    return flat


def _backend_of(op: Op, flat) -> object:
    backend = None
    try:  # a sparse tensor's storage refuses to give a backend: the error then names the op
        for a in flat:
            if isinstance(a, _Tensor):
                if a._dtype.is_complex:
                    check_complex(op.name, a, op.complex_rule is not None)
                b = a._storage.backend
                if backend is None:
                    backend = b
                elif b is not backend:
                    raise _device_mismatch(op, backend, b)
    except LayoutError as e:
        raise e.naming(op.name) from None
    if backend is None:
        raise _no_tensor(op)
    return backend


def _device_mismatch(op: Op, backend, other) -> DeviceError:
    return DeviceError(f"{op.name}: expected all tensors on the same device, got {backend.device} and {other.device}")


def _no_tensor(op: Op) -> TypeError:
    return TypeError(f"{op.name}: expected at least one tensor argument")


def _kernel_args(op: Op, args) -> list:
    """What a kernel takes for ``args``: each tensor's backend data (lists of them, variadic ops)."""
    if not op.variadic:
        return [a._data if isinstance(a, _Tensor) else a for a in args]
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.append([x._data if isinstance(x, _Tensor) else x for x in a])
        else:
            out.append(a._data if isinstance(a, _Tensor) else a)
    return out


def decompose(op: Op, args, attrs: dict):
    """Run composite ``op``'s decomposition on ``args`` as its public ops (eager kernels or traced
    nodes), without autocast (the composite's own inputs were cast already) and, when the op has
    its own gradient rule, without history (``apply`` attaches the composite's)."""
    hook, _Autocast.cast_inputs = _Autocast.cast_inputs, None
    try:
        if op.backward is None:
            return op.decomposition(*args, **attrs)
        with _no_grad():
            return op.decomposition(*args, **attrs)
    finally:
        _Autocast.cast_inputs = hook


def holds_complex(backend) -> bool:
    """Whether ``backend`` stores complex tensors: the cpu, and a backend declaring ``complex_dtypes``."""
    return backend.device.type == "cpu" or getattr(backend, "complex_dtypes", False)


def check_complex(op_name: str, x, supported: bool = True) -> None:
    """Complex tensors run eagerly, on a backend that holds them (``holds_complex``), in the ops that
    define a complex rule: else a clear error."""
    name = x.dtype.name
    if not supported:
        raise TypeError(f"{op_name}: not supported for {name} tensors")
    if not holds_complex(x._storage.backend):
        raise DeviceError(f"{op_name}: {name} tensors are not supported on {x.device} (cpu and cuda hold them)")
    if _Tracing.tracer is not None:
        raise RuntimeError(f"{op_name}: munet.compile does not support {name} tensors; run this part eagerly")


def _kernel(op: Op, backend, suffix: str = ""):
    kernel = backend.kernels.get(op.name + suffix)
    if kernel is None and not suffix:
        raise DeviceError(f"{op.name}: no kernel for device '{backend.device}'")
    return kernel


def apply(op: Op, *args, **attrs):
    """Run ``op`` on ``args`` (tensors, numbers, lists of tensors for variadic ops)."""
    if not op.direct or _HOOKED.any:  # a variadic op or composite, or a tracer, autocast or profiler
        return _apply_general(op, args, attrs)
    view = op.view
    if view is not None:  # a view of its one input; its shape rule is its geometry rule (both validate)
        (base,) = args
        if not isinstance(base, _Tensor):
            raise _no_tensor(op)
        if base._dtype.is_complex:
            check_complex(op.name, base, True)  # (every view has a complex rule)
        try:  # a sparse tensor's storage refuses to give a backend: the error then names the op
            geometry = op.geometry
            if geometry is not None:
                shape, stride, offset = geometry(tuple(base._shape), base._stride, base._offset, **attrs)
            else:
                shape, stride, offset = view(base, **attrs)
            out = base._view(shape, stride, offset)
        except LayoutError as e:
            raise e.naming(op.name) from None
        if (base._requires_grad or base._base is not None) and _State.enabled:
            record_history(op, args, attrs, args, (out,))
        return out
    # The common case: an eager primitive kernel. One pass over the inputs finds the device (checking
    # complex support and that all share it), the kernel's arguments and whether any input may need
    # history (it requires grad, or is a view whose history may be stale).
    backend = None
    data = []
    history = False
    try:  # a sparse tensor's storage refuses to give a backend: the error then names the op
        for a in args:
            if isinstance(a, _Tensor):
                if a._dtype.is_complex:
                    check_complex(op.name, a, op.complex_rule is not None)
                b = a._storage.backend
                if backend is None:
                    backend = b
                elif b is not backend:
                    raise _device_mismatch(op, backend, b)
                data.append(a._data)
                if a._requires_grad or a._base is not None:
                    history = True
            else:
                data.append(a)
    except LayoutError as e:
        raise e.naming(op.name) from None
    if backend is None:
        raise _no_tensor(op)
    try:
        meta = op.meta(*args, **attrs)
    except BroadcastError as e:  # a shape rule shared by many ops: name this one
        raise e.naming(op.name) from None
    kernel = backend.kernels.get(op.name)
    if kernel is None:
        _kernel(op, backend)  # raises naming the op and device
    raw = kernel(*data, **attrs)
    if type(meta) is not Meta:  # several outputs
        outputs = _kernel_outputs(backend, raw, meta)
        if history and _State.enabled and op.backward is not None:
            record_history(op, args, attrs, args, outputs)
        return outputs[0] if len(outputs) == 1 else outputs
    out = _Tensor._from_kernel(backend, raw, meta)
    if history and _State.enabled and op.backward is not None:
        record_history(op, args, attrs, args, (out,))
    return out


def _apply_general(op: Op, args, attrs):
    """``apply`` for variadic ops, composites, under a tracer, autocast or profiler (any op)."""
    observe = OP_OBSERVER.observe
    try:
        if observe is None:
            return _run(op, args, attrs)
        with observe(op, args):
            return _run(op, args, attrs)
    except BroadcastError as e:  # a shape rule shared by many ops: name this one
        raise e.naming(op.name) from None


def _run(op: Op, args, attrs):
    cast_inputs = _Autocast.cast_inputs
    if cast_inputs is not None:
        args = cast_inputs(op, args)
    flat = args if not op.variadic else _flat_tensors(op, args)
    backend = _backend_of(op, flat)
    tracer = _Tracing.tracer
    if op.primitive and tracer is None:  # an eager kernel
        meta = op.meta(*args, **attrs)
        raw = _kernel(op, backend)(*_kernel_args(op, args), **attrs)
        outputs = _kernel_outputs(backend, raw, meta)
    elif op.decomposition is not None and _runs_decomposition(op, backend, tracer, flat):
        op.meta(*args, **attrs)  # the composite's own argument checks and error messages
        outputs = decompose(op, args, attrs)
        if op.backward is None:
            return outputs
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    elif op.view is not None and tracer is None:
        # A view op's shape rule is its geometry rule (both validate), so run it once.
        base = args[0]
        shape, stride, offset = op.view(base, **attrs)
        outputs = (base._view(shape, stride, offset),)
    else:
        meta = op.meta(*args, **attrs)
        if tracer is not None:
            if getattr(meta, "dtype", None) is not None and meta.dtype.is_complex:
                raise RuntimeError(f"{op.name}: munet.compile does not support {meta.dtype.name} tensors")
            return tracer.record(op, args, attrs, meta)
        raw = _kernel(op, backend)(*_kernel_args(op, args), **attrs)
        outputs = _kernel_outputs(backend, raw, meta)
    if _State.enabled and op.backward is not None:
        for a in flat:  # record_history's own first test, inline: most ops record nothing
            if isinstance(a, _Tensor) and (a._requires_grad or a._base is not None):
                record_history(op, args, attrs, flat, outputs)
                break
    return outputs[0] if len(outputs) == 1 else outputs


def _kernel_outputs(backend, raw, meta) -> tuple:
    """The output tensors of a kernel result ``raw`` for ``meta`` (one Meta, or a tuple of them)."""
    if type(meta) is Meta or not isinstance(meta, tuple):
        return (_Tensor._from_kernel(backend, raw, meta),)
    if len(meta) == 1:
        return (_Tensor._from_kernel(backend, raw, meta[0]),)
    return tuple(_Tensor._from_kernel(backend, r, m) for r, m in zip(raw, meta))


def _runs_decomposition(op: Op, backend, tracer, flat) -> bool:
    """Whether composite ``op`` runs as its decomposition now rather than as the device's fast
    kernel: always under a tracer when it has no gradient rule of its own (its ops then carry the
    gradient; one with a rule is recorded as one node), and in eager mode where the device has no
    fast kernel for it, or where it has no gradient rule and some input needs a gradient."""
    if tracer is not None:
        return op.backward is None
    if op.name not in backend.kernels:
        return True
    return op.backward is None and _State.enabled and any(isinstance(a, _Tensor) and a._requires_grad for a in flat)


_NO_GRADIENT = (False, None, None, None)  # record_history's entry for an input that needs no gradient


def record_history(op: Op, args, attrs, flat, outputs) -> Node | None:
    """Attach a backward node for ``op`` to ``outputs`` if any input requires grad."""
    inputs = []  # per input: (needs a gradient, its edge, shape, dtype)
    any_needs = False
    for a in flat:
        if isinstance(a, _Tensor):
            if a._base is not None and "_rebased" in a._base.__dict__:
                _refresh_stale_view(a)
            if a._requires_grad:
                any_needs = True
                edge = (a._grad_fn, a._output_nr) if a._grad_fn is not None else (a, -1)
                inputs.append((True, edge, a._shape, a._dtype))
                continue
        inputs.append(_NO_GRADIENT)
    if not any_needs:
        return None
    needs, edges, shapes, dtypes = zip(*inputs)
    node = Node(op, attrs, needs, edges, shapes, dtypes)
    if op.saves_input_strides:
        node.input_strides = tuple([a._stride if isinstance(a, _Tensor) else None for a in flat])
    if len(outputs) == 1:
        node.output_shapes, node.output_dtypes = (outputs[0]._shape,), (outputs[0]._dtype,)
    else:
        node.output_shapes = tuple([o._shape for o in outputs])
        node.output_dtypes = tuple([o._dtype for o in outputs])
    for role, cond, output_nr, input_nr in op.save_plan:
        if cond is not None and not needs[cond]:
            continue
        if output_nr is not None:
            node.saved[role] = SavedTensor(outputs[output_nr], is_output=True, output_nr=output_nr)
        else:
            value = args[op.inputs.index(role) if input_nr is None else input_nr]  # (a missing role raises)
            if isinstance(value, _Tensor):
                node.saved[role] = SavedTensor(value)
            elif isinstance(value, (list, tuple)):
                for j, v in enumerate(value):
                    node.saved[f"{role}[{j}]"] = SavedTensor(v)
            elif value is not None:
                node.scalars[role] = value
    if op.view is not None and outputs[0]._base is not None and "_rebased" in outputs[0]._base.__dict__:
        outputs[0]._rebased_seen = outputs[0]._base._rebased
    for nr, o in enumerate(outputs):
        if nr in op.nondiff_outputs or not (o._dtype.is_floating_point or o._dtype.is_complex):
            continue
        o._grad_fn = node
        o._output_nr = nr
        o._requires_grad = True
    return node


def _inplace_meta_check(op: Op, self, meta) -> None:
    if meta.shape is not None and meta.shape != self._shape and tuple(meta.shape) != tuple(self._shape):
        raise RuntimeError(
            f"{op.name}_: output with shape {list(self.shape)} doesn't match the broadcast shape {list(meta.shape)}"
        )
    if not can_cast(meta.dtype, self.dtype):
        raise RuntimeError(
            f"{op.name}_: result type {meta.dtype.name} can't be cast to the desired output type {self.dtype.name}"
        )


def refuse_under_trace(op: str, reason: str) -> None:
    """Raise ``RuntimeError(f"{op}: {reason}")`` when this thread is tracing: for the few
    operations (PyTorch's in-place view ops) that have no traced mode."""
    if _Tracing.tracer is not None:
        raise RuntimeError(f"{op}: {reason}")


def apply_inplace(op: Op, self, *args, **attrs):
    """Run ``op(self, *args)`` and write the result into ``self`` (and every view of it).

    One path in both modes: the checks and the autograd rebase run here; only the write itself
    is the mode's (a kernel in eager mode, the tracer's ``record_inplace``/``write`` under
    ``munet.compile``).
    """
    flat = (self, *(args if not op.variadic else _flat_tensors(op, args)))
    backend = _backend_of(op, flat)
    try:
        meta = op.meta(self, *args, **attrs)
    except BroadcastError as e:  # a shape rule shared by many ops: name this one
        raise e.naming(op.name) from None
    _inplace_meta_check(op, self, meta)
    if _State.enabled:
        if self._base is not None and "_rebased" in self._base.__dict__:
            _refresh_stale_view(self)
        if op.backward is not None:
            for a in flat:
                if isinstance(a, _Tensor) and a._requires_grad:
                    return _inplace_with_history(op, self, args, attrs)
    tracer = _Tracing.tracer
    if tracer is not None:
        return tracer.record_inplace(op, self, args, attrs, meta)
    kernel = backend.kernels.get(op.name + "_")
    kargs = _kernel_args(op, args)
    if kernel is not None:
        kernel(self._data, *kargs, **attrs)
    elif op.decomposition is not None and op.name not in backend.kernels:
        result = decompose(op, (self, *args), attrs)
        backend.copy_(self._data, result.to(self.dtype)._data)
    else:
        raw = _kernel(op, backend)(self._data, *kargs, **attrs)
        backend.copy_(self._data, raw)
    self._storage.version += 1
    return self


def apply_writes(op: Op, args, written, run_eager: Callable, **attrs) -> None:
    """An effectful ``op`` that writes the tensors ``written`` (among ``args``) in place.

    In eager mode ``run_eager()`` does the writes and each written storage's version goes up (so
    autograd's saved-tensor check sees them). Under ``munet.compile`` the node is recorded with one
    output per written tensor (its new value; ``op.meta`` gives their shapes) and each tensor's
    memory becomes that value, as ``apply_inplace`` functionalizes a write. ``munet.rtc`` launches
    user kernels this way.
    """
    tracer = _Tracing.tracer
    if tracer is None:
        run_eager()
        for storage in {id(t._storage): t._storage for t in written}.values():
            storage.version += 1
        return
    outputs = apply(op, *args, **attrs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for t, value in zip(written, outputs):
        tracer.write_tensor(t, value)


def _inplace_with_history(op: Op, self, args, attrs):
    from munet.ops import view as views

    if self._grad_fn is None and self._requires_grad:
        raise RuntimeError(f"{op.name}_: a leaf Variable that requires grad is being used in an in-place operation.")
    base = self._base
    if base is not None and base._grad_fn is None and base._requires_grad:
        raise RuntimeError(
            f"{op.name}_: a view of a leaf Variable that requires grad is being used in an in-place operation."
        )
    reads_self = any(role == "self" for role, _ in op.saves)
    source = views.clone(self) if reads_self else self
    result = apply(op, source, *args, **attrs)
    if result.dtype is not self.dtype:
        result = result.to(self.dtype)
    tracer = _Tracing.tracer
    if tracer is not None:
        tracer.write_tensor(self, result)
    else:
        self._storage.backend.copy_(self._data, result._data)
        self._storage.version += 1
    rebase_history(self, result)
    return self


def rebase_history(self, result) -> None:
    """After ``self``'s memory was overwritten by ``result``, make its history ``result``'s.

    When ``self`` is a view, the history of its base becomes "the old base with this
    region replaced by ``result``" (``as_strided_scatter``), and ``self`` a view of that.
    """
    from munet.ops import view as views

    base = self._base
    if base is None:
        self._grad_fn, self._output_nr = result._grad_fn, result._output_nr
        self._requires_grad = result._requires_grad
        return
    if base.dtype is not self.dtype:
        raise RuntimeError(
            f"an in-place write into a {self.dtype.name} view of a {base.dtype.name} tensor (view(dtype), view_as_real, "
            ".real, .imag) is not supported while recording gradients; write into a clone"
        )
    if not base.is_contiguous():
        raise RuntimeError(
            "in-place operation on a view of a non-contiguous tensor while recording gradients is not "
            "supported; call .contiguous() on the base tensor first"
        )
    geometry = dict(size=tuple(self.shape), stride=tuple(self.stride()), storage_offset=self._offset - base._offset)
    record_history(views.as_strided_scatter_op, (base, result), geometry, [base, result], (base,))
    # Other views of ``base`` now have stale histories; ``_refresh_stale_view`` renews them on use.
    base._rebased = base.__dict__.get("_rebased", 0) + 1
    view = views.as_strided(base, self.shape, self.stride(), self._offset)
    self._grad_fn, self._output_nr, self._requires_grad = view._grad_fn, view._output_nr, view._requires_grad
    self._rebased_seen = base._rebased


def _refresh_stale_view(view) -> None:
    """Give a view created before an in-place write through another view of its base the
    base's new history (PyTorch regenerates such a view's ``grad_fn`` lazily, too)."""
    base = view._base
    if view.__dict__.get("_rebased_seen") == base._rebased:
        return
    from munet.ops import view as views

    view._rebased_seen = base._rebased
    fresh = views.as_strided(base, view.shape, view.stride(), view._offset)
    view._grad_fn, view._output_nr, view._requires_grad = fresh._grad_fn, fresh._output_nr, fresh._requires_grad


def apply_transfer(op: Op, x, target, non_blocking: bool = False, **attrs):
    """Run transfer ``op`` copying ``x`` to backend ``target``; differentiable.

    Eager mode copies through host memory (``non_blocking``: see ``_copy_between_backends``);
    under ``munet.compile`` the transfer is a graph node (the tracer's ``record_transfer``) that
    the executable runs.
    """
    meta = op.meta(x, **attrs)
    tracer = _Tracing.tracer
    if tracer is not None:
        out = tracer.record_transfer(op, x, attrs, meta, target)
    else:
        out = _copy_between_backends(x, target, non_blocking)
    record_history(op, (x,), attrs, [x], (out,))
    return out


def _copy_between_backends(x, target, non_blocking: bool = False):
    """``x``'s values on backend ``target``: directly when ``target.receive`` can take them from
    ``x``'s backend (a copy between two CUDA devices), else through host memory.

    ``non_blocking`` reaches a backend that declares ``non_blocking_copies`` (cuda): an upload
    from pinned memory is queued on its stream, a download lands in new pinned memory."""
    if x.dtype.is_complex and not holds_complex(target):
        raise DeviceError(f"to: {x.dtype.name} tensors are not supported on {target.device} (cpu and cuda hold them)")
    receive = getattr(target, "receive", None)
    buffer = None if receive is None else receive(x._storage.backend, x._data)
    if buffer is None:
        source = x._storage.backend
        if target.device.type != "cpu":  # the target copies from host memory: no host copy first
            host = source.to_numpy(x.contiguous()._data)
            if non_blocking and getattr(target, "non_blocking_copies", False):
                return _tensor_on(target, target.from_numpy(host.reshape(-1), non_blocking=True), x)
            return _Tensor._from_numpy(host, target.device)
        if non_blocking and getattr(source, "non_blocking_copies", False):
            return _Tensor._from_numpy(source.to_numpy(x.contiguous()._data, non_blocking=True), target.device)
        return _Tensor._from_numpy(source.to_numpy(x.contiguous()._data).copy(), target.device)
    return _tensor_on(target, buffer, x)


def _tensor_on(target, buffer, like):
    """A contiguous tensor of ``like``'s shape and dtype over flat ``buffer`` of backend ``target``."""
    shape = tuple(like.shape)
    stride = contiguous_strides(shape)
    return _Tensor._make(
        _Storage(buffer, target), shape, stride, 0, like.dtype, target.view(buffer, shape, stride, 0, like.dtype)
    )


def optimizer_step_scope(optimizer):
    """Around ``optimizer.step()``: nothing in eager mode; under ``munet.compile`` its float
    hyperparameters become graph inputs (the tracer's ``optimizer_step``), read at each call."""
    tracer = _Tracing.tracer
    return contextlib.nullcontext() if tracer is None else tracer.optimizer_step(optimizer)


def step_unless(found_inf, optimizer, step: Callable):
    """``step()`` unless bool tensor ``found_inf`` holds (GradScaler's skipped step).

    Eager mode reads ``found_inf`` and skips; under ``munet.compile`` the step is recorded and
    undone where ``found_inf`` holds (the tracer's ``step_unless``), decided on every replay.
    """
    tracer = _Tracing.tracer
    if tracer is None:
        return None if bool(found_inf) else step()
    return tracer.step_unless(found_inf, optimizer, step)


def apply_factory(op: Op, device, **attrs):
    """Run a creation op (no tensor inputs) on ``device`` (``None``: the default device): ``full``, ``arange``, random bits.

    A composite creation op (``eye``, ``linspace``) runs its decomposition, called with
    ``device=`` besides its attributes, where the device has no kernel for it, in both modes; where
    it has one, the kernel runs (or is recorded) and the compiler keeps that node (a constant
    with nothing to fuse into).
    """
    backend = get_backend(factory_device(device))
    meta = op.meta(**attrs)
    if getattr(meta, "dtype", None) is not None and meta.dtype.is_complex and not holds_complex(backend):
        raise DeviceError(
            f"{op.name}: {meta.dtype.name} tensors are not supported on {backend.device} (cpu and cuda hold them)"
        )
    if op.decomposition is not None and op.name not in backend.kernels:
        return decompose(op, (), dict(attrs, device=backend.device))
    tracer = _Tracing.tracer
    if tracer is not None:
        return tracer.record_factory(op, backend.device, attrs, meta)
    raw = _kernel(op, backend)(**attrs)
    return _Tensor._from_kernel(backend, raw, meta)

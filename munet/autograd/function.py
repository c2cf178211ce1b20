"""``munet.autograd.Function``: user-defined ops with a hand-written backward."""

from __future__ import annotations

import functools
import inspect

from munet.autograd.grad_mode import _State, no_grad
from munet.autograd.node import Node, SavedTensor


class FunctionCtx:
    """The ``ctx`` passed to a Function's ``forward`` and ``backward``."""

    def __init__(self):
        self._to_save = ()
        self._dirty = ()
        self._non_differentiable = ()
        self.needs_input_grad = ()
        self._node: Node | None = None
        self.materialize_grads = True

    def save_for_backward(self, *tensors) -> None:
        self._to_save = tensors

    def mark_dirty(self, *tensors) -> None:
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value

    @property
    def saved_tensors(self) -> tuple:
        node = self._node
        if node is None:
            return tuple(self._to_save)
        out = []
        for i, t in enumerate(self._to_save):
            if t is None:
                out.append(None)
            else:
                out.append(node.saved_tensor(f"saved[{i}]"))
        return tuple(out)


class _FunctionOp:
    """Quacks like ``ops._registry.Op`` for the engine: name and backward."""

    variadic = False
    nondiff_outputs = ()

    def __init__(self, cls):
        self.name = cls.__name__
        self.backward_name = f"{cls.__name__}Backward"
        self.fn_cls = cls

    def backward(self, node: Node, *grads):
        ctx = node.attrs["ctx"]
        if ctx.materialize_grads:
            from munet.ops.creation import zeros

            grads = tuple(
                zeros(shape, dtype=dtype, device=device) if g is None else g
                for g, shape, dtype, device in zip(
                    grads, node.output_shapes, node.output_dtypes, node.attrs["output_devices"]
                )
            )
        out = self.fn_cls.backward(ctx, *grads)
        if not isinstance(out, tuple):
            out = (out,)
        flat = node.attrs["tensor_positions"]
        if len(out) < len(flat):
            raise RuntimeError(
                f"function {self.backward_name} returned an incorrect number of gradients "
                f"(expected {len(flat)}, got {len(out)})"
            )
        return tuple(out[i] for i in flat)


class Function:
    """A user-defined op: subclass with static ``forward`` and ``backward``.

    Two styles, as in PyTorch: ``forward(ctx, *args)`` stores what ``backward`` needs on ``ctx``
    itself; or ``forward(*args)`` without ``ctx`` plus
    ``setup_context(ctx, inputs, output)``, called after ``forward`` with the positional
    inputs (keywords and defaults bound to their positions) and ``forward``'s return value.
    """

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("autograd.Function subclasses must implement forward")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not overridden: forward takes ctx as its first argument")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("autograd.Function subclasses must implement backward to be differentiated")

    @classmethod
    def apply(cls, *args, **kwargs):
        from munet._tensor import Tensor
        from munet.ops._registry import rebase_history

        ctx = FunctionCtx()
        separate_setup = cls.setup_context is not Function.setup_context
        if separate_setup:
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            if bound.kwargs:
                raise TypeError(
                    f"{cls.__name__}.apply: a forward with a separate setup_context takes its inputs by "
                    f"position (keyword-only {sorted(bound.kwargs)} given)"
                )
            args, kwargs = bound.args, {}
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        with no_grad():
            if separate_setup:
                outputs = cls.forward(*args)
                cls.setup_context(ctx, args, outputs)
            else:
                outputs = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in positions]
        if not (_State.enabled and any(t._requires_grad for t in tensors)):
            return outputs
        op = cls.__dict__.get("_munet_op") or _FunctionOp(cls)
        cls._munet_op = op
        edges = [
            ((t._grad_fn, t._output_nr) if t._grad_fn is not None else (t, -1)) if t._requires_grad else None
            for t in tensors
        ]
        node = Node(
            op,
            {"ctx": ctx, "tensor_positions": positions},
            tuple(t._requires_grad for t in tensors),
            edges,
            [t.shape for t in tensors],
            [t.dtype for t in tensors],
        )
        ctx._node = node
        out_tensors = [o for o in outs if isinstance(o, Tensor)]
        node.output_shapes = tuple(o.shape for o in out_tensors)
        node.output_dtypes = tuple(o.dtype for o in out_tensors)
        node.attrs["output_devices"] = tuple(o.device for o in out_tensors)
        for i, t in enumerate(ctx._to_save):
            if t is None:
                continue
            is_out = any(t is o for o in out_tensors)
            nr = next((k for k, o in enumerate(out_tensors) if o is t), 0)
            node.saved[f"saved[{i}]"] = SavedTensor(t, is_output=is_out, output_nr=nr)
        dirty = {id(t) for t in ctx._dirty}
        nondiff = {id(t) for t in ctx._non_differentiable}
        for nr, o in enumerate(out_tensors):
            if id(o) in nondiff or not o.dtype.is_floating_point:
                continue
            if id(o) in dirty:
                if o._grad_fn is None and o._requires_grad:
                    raise RuntimeError(f"{cls.__name__}: a leaf Variable that requires grad was modified in-place")
            o._grad_fn, o._output_nr, o._requires_grad = node, nr, True
            if id(o) in dirty and o._base is not None:
                alias = o._alias()
                alias._grad_fn, alias._output_nr, alias._requires_grad = node, nr, True
                rebase_history(o, alias)
        return outputs


class _DelayedError(Function):
    """Identity whose backward raises: marks gradients of a ``once_differentiable`` backward."""

    @staticmethod
    def forward(ctx, name, *tensors):
        ctx.name = name
        outs = tuple(t.view_as(t) for t in tensors)
        return outs if len(outs) > 1 else outs[0]

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            f"trying to differentiate twice a function that was marked with @once_differentiable ({ctx.name})"
        )


def once_differentiable(backward):
    """Decorate a Function's ``backward`` that is not itself differentiable.

    It runs under ``no_grad``; with ``create_graph=True`` its gradients get a history whose
    backward raises, so a second differentiation fails loudly instead of giving zeros.
    """

    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        from munet._tensor import Tensor

        with no_grad():
            outputs = backward(ctx, *grads)
        if not _State.enabled or not any(isinstance(g, Tensor) and g.requires_grad for g in grads):
            return outputs
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        positions = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.dtype.is_floating_point]
        if not positions:
            return outputs
        # Detached leaves that require grad give the error node inputs, so its outputs get a history.
        wrapped = _DelayedError.apply(backward.__qualname__, *(outs[i].detach().requires_grad_() for i in positions))
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        result = list(outs)
        for i, w in zip(positions, wrapped):
            result[i] = w
        return result[0] if single else tuple(result)

    return wrapper

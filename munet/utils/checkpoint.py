"""Activation checkpointing: trade compute for memory by recomputing a segment in backward.

``checkpoint(fn, *args)`` runs ``fn`` without recording its graph (so its intermediate
activations are freed), then, when gradients are needed, runs it again with the RNG state
it first saw and backpropagates through the recomputation.
"""

from __future__ import annotations

from munet._tensor import Tensor
from munet.autograd import backward as autograd_backward
from munet.autograd.function import Function
from munet.autograd.grad_mode import enable_grad, no_grad

__all__ = ["checkpoint", "checkpoint_sequential"]


def _rng_states():
    from munet.ops import random

    return random.get_rng_state()


def _set_rng_states(state) -> None:
    from munet.ops import random

    random.set_rng_state(state)


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, fn, preserve_rng_state, *args):
        ctx.fn = fn
        ctx.rng_state = _rng_states() if preserve_rng_state else None
        ctx.inputs = args
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        with no_grad():
            return fn(*args)

    @staticmethod
    def backward(ctx, *grads):
        saved = iter(ctx.saved_tensors)
        inputs = []
        for a in ctx.inputs:
            if isinstance(a, Tensor):
                t = next(saved).detach()
                t.requires_grad_(a.requires_grad)
                inputs.append(t)
            else:
                inputs.append(a)
        current = _rng_states() if ctx.rng_state is not None else None
        if ctx.rng_state is not None:
            _set_rng_states(ctx.rng_state)
        try:
            with enable_grad():
                outputs = ctx.fn(*inputs)
        finally:
            if current is not None:
                _set_rng_states(current)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if pairs:
            autograd_backward([o for o, _ in pairs], [g for _, g in pairs])
        grads_in = [t.grad if isinstance(t, Tensor) and t.requires_grad else None for t in inputs]
        return (None, None, *grads_in)


def checkpoint(function, *args, use_reentrant: bool | None = None, preserve_rng_state: bool = True, **kwargs):
    """Run ``function(*args)`` without keeping its activations; recompute them in backward.

    Parameters used inside ``function`` get their gradients from the recomputation, even when
    no input requires grad.
    """
    if kwargs:
        raise ValueError(f"checkpoint: unexpected keyword arguments {sorted(kwargs)}")
    return _Checkpoint.apply(lambda _anchor, *a: function(*a), preserve_rng_state, _anchor(), *args)


def checkpoint_sequential(
    functions, segments: int, input, use_reentrant: bool | None = None, preserve_rng_state: bool = True
):
    """Split a Sequential (or list of modules) into ``segments`` chunks; all but the last are checkpointed."""
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)

    def run(start: int, stop: int):
        def forward(_anchor, x):
            for f in functions[start:stop]:
                x = f(x)
            return x

        return forward

    size = len(functions) // segments
    stop = 0
    for start in range(0, size * (segments - 1), size):
        stop = start + size
        input = _Checkpoint.apply(run(start, stop), preserve_rng_state, _anchor(), input)
    return run(stop, len(functions))(None, input)


def _anchor():
    """An empty leaf that requires grad, so the checkpoint's backward node is always recorded."""
    from munet.ops.creation import empty

    return empty(0, requires_grad=True)

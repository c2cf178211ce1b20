"""Module backward hooks (``register_full_backward_hook`` / ``register_full_backward_pre_hook``).

As in PyTorch, a module call with such hooks passes its tensor inputs and its tensor outputs
through identity autograd Functions. In backward, the one on the outputs sees ``grad_output``
first (pre-hooks may replace it), the one on the inputs then sees ``grad_input`` and calls the
full hooks with both (they may replace ``grad_input``).
"""

from __future__ import annotations

from munet._tensor import Tensor
from munet.autograd.function import Function


class _HookedIdentity(Function):
    """Passes tensors through; in backward hands their gradients to ``on_grads`` (which may replace them)."""

    @staticmethod
    def forward(ctx, on_grads, *tensors):
        ctx.on_grads = on_grads
        ctx.set_materialize_grads(False)
        outs = tuple(t.view_as(t) for t in tensors)
        ctx.mark_non_differentiable(*(o for o, t in zip(outs, tensors) if not t.requires_grad))
        return outs

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.on_grads(grads))


def _replacement(result, expected: int, what: str) -> tuple:
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != expected:
        raise RuntimeError(
            f"Backward hook returned an invalid number of {what}, got {len(result)}, but expected {expected}"
        )
    return result


class BackwardHook:
    """The state of one module call with backward hooks: wraps its inputs and outputs."""

    def __init__(self, module, hooks: list, pre_hooks: list):
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.n_inputs = 0
        self.input_positions: list[int] = []
        self.inputs_wrapped = False
        self.grad_outputs = None

    def setup_input_hook(self, args: tuple) -> tuple:
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.n_inputs, self.input_positions = len(args), positions
        if not self.hooks or not any(args[i].requires_grad for i in positions):
            return args
        self.inputs_wrapped = True
        wrapped = _HookedIdentity.apply(self._on_input_grads, *(args[i] for i in positions))
        args = list(args)
        for i, w in zip(positions, wrapped):
            args[i] = w
        return tuple(args)

    def setup_output_hook(self, output):
        single = isinstance(output, Tensor)
        outs = (output,) if single else output
        if not isinstance(outs, (tuple, list)):
            return output
        positions = [i for i, o in enumerate(outs) if isinstance(o, Tensor)]
        if not any(outs[i].requires_grad for i in positions):
            return output
        wrapped = _HookedIdentity.apply(self._on_output_grads, *(outs[i] for i in positions))
        result = list(outs)
        for i, w in zip(positions, wrapped):
            result[i] = w
        return result[0] if single else type(outs)(result)

    def _on_output_grads(self, grads: tuple) -> tuple:
        for hook in self.pre_hooks:
            replaced = hook(self.module, grads)
            if replaced is not None:
                grads = _replacement(replaced, len(grads), "grad_output")
        self.grad_outputs = grads
        if self.hooks and not self.inputs_wrapped:
            none = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, none, grads)
                if res is not None and not (isinstance(res, tuple) and all(el is None for el in res)):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should always return None or "
                        "None for all gradients."
                    )
        return grads

    def _on_input_grads(self, grads: tuple) -> tuple:
        # grad_input has one entry per positional argument, None for the non-tensor ones.
        grad_input = [None] * self.n_inputs
        for i, g in zip(self.input_positions, grads):
            grad_input[i] = g
        grad_input = tuple(grad_input)
        for hook in self.hooks:
            replaced = hook(self.module, grad_input, self.grad_outputs)
            if replaced is not None:
                grad_input = _replacement(replaced, self.n_inputs, "grad_input")
        return tuple(grad_input[i] for i in self.input_positions)

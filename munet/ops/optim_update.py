"""The Adam family's per-element updates as formula ops: one pass each instead of one per operation.

``optim/adam.py`` (and the optimizers sharing its moments) run these in place. Each formula is the
arithmetic the optimizer wrote as separate tensor ops, in the same order and dtype, so the numbers
are unchanged for float32 and float64 parameters (16-bit parameters compute in float32 and round
once). Hyperparameters are arguments, not attributes: the compiler reads them at every call, as it
reads the numbers the separate ops took. Neither op is differentiable (optimizers update under
``no_grad``).

- ``adam_second_moment_(v, grad, beta2, one_minus_beta2)``: ``v * beta2 + grad * grad * (1 - beta2)``;
- ``adam_param_update_(p, exp_avg, exp_avg_sq, bias_correction2_sqrt, eps, step_size)``:
  ``p - exp_avg / (sqrt(exp_avg_sq) / bias_correction2_sqrt + eps) * step_size``.
"""

from __future__ import annotations

from munet.ops._registry import Meta, apply_inplace, define
from munet.ops._scalar import scalar
from munet.ops._utils import is_tensor

__all__: list[str] = []
__functional__: list[str] = []
__tensor_methods__: list[str] = []


def _state_meta(name: str):
    """The meta of an update of ``target`` from tensors of its shape and dtype and 0-d tensors or numbers."""

    def meta(target, *operands):
        for x in operands:
            if not is_tensor(x) or x.ndim == 0:
                continue
            if tuple(x.shape) != tuple(target.shape) or x.dtype is not target.dtype:
                raise RuntimeError(
                    f"{name}: expected state tensors of the parameter's shape {list(target.shape)} and dtype "
                    f"{target.dtype.name}, got shape {list(x.shape)} and dtype {x.dtype.name}"
                )
        if not target.dtype.is_floating_point:
            raise RuntimeError(f"{name}: expected a floating point tensor, got {target.dtype.name}")
        return Meta(tuple(target.shape), target.dtype)

    return meta


def _second_moment(args, t):
    v, grad, beta2, one_minus_beta2 = args
    return scalar.add(scalar.mul(v, beta2), scalar.mul(scalar.mul(grad, grad), one_minus_beta2))


def _param_update(args, t):
    p, exp_avg, exp_avg_sq, bias_correction2_sqrt, eps, step_size = args
    denom = scalar.add(scalar.div(scalar.sqrt(exp_avg_sq), bias_correction2_sqrt), eps)
    return scalar.sub(p, scalar.mul(scalar.div(exp_avg, denom), step_size))


adam_second_moment_op = define(
    "adam_second_moment",
    inputs=("self", "grad", "beta2", "one_minus_beta2"),
    meta=_state_meta("adam_second_moment"),
    formula=_second_moment,
)
adam_param_update_op = define(
    "adam_param_update",
    inputs=("self", "exp_avg", "exp_avg_sq", "bias_correction2_sqrt", "eps", "step_size"),
    meta=_state_meta("adam_param_update"),
    formula=_param_update,
)


def adam_second_moment_(exp_avg_sq, grad, beta2: float):
    """``exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)`` in one pass."""
    return apply_inplace(adam_second_moment_op, exp_avg_sq, grad, beta2, 1 - beta2)


def adam_param_update_(p, exp_avg, exp_avg_sq, bias_correction2_sqrt, eps: float, step_size):
    """``p.sub_(exp_avg / (exp_avg_sq.sqrt() / bias_correction2_sqrt + eps) * step_size)`` in one pass;
    ``bias_correction2_sqrt`` and ``step_size`` are 0-d tensors of ``p``'s dtype."""
    return apply_inplace(adam_param_update_op, p, exp_avg, exp_avg_sq, bias_correction2_sqrt, eps, step_size)

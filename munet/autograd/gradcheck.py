"""``gradcheck`` and ``gradgradcheck``: autograd's gradients against central finite differences.

For every differentiable input ``x_i`` and output ``y_k`` the numerical Jacobian column for element
``e`` is ``(f(x + eps e) - f(x - eps e)) / (2 eps)`` and the analytical Jacobian row for output
element ``j`` is the vector-Jacobian product with the one-hot ``j``; they must agree within
``atol + rtol * |numerical|``, as PyTorch's slow mode. Use float64 inputs (a lower precision warns,
as in PyTorch). ``fast_mode=True`` runs the same full check (its verdict is the slow mode's).
Batched-gradient and forward-mode checks are not available in MuNet and are refused when asked for.
"""

from __future__ import annotations

import warnings

import numpy as np

import munet
from munet._tensor import Tensor

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` / ``gradgradcheck`` when ``raise_exception`` is true and a check fails."""


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _differentiable(values) -> list[int]:
    return [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]


def _outputs(func, inputs) -> list:
    return [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor) and o.dtype.is_floating_point]


def _perturbed(x: Tensor, index: int, delta: float) -> Tensor:
    """A fresh leaf equal to ``x`` with element ``index`` moved by ``delta`` (requiring grad as ``x`` does:
    gradgradcheck's function differentiates its inputs)."""
    values = x.detach().cpu().numpy().copy()
    values.reshape(-1)[index] += delta
    return munet.tensor(values, dtype=x.dtype, device=x.device, requires_grad=x.requires_grad)


def _values(func, inputs) -> list[np.ndarray]:
    return [o.detach().cpu().numpy().astype(np.float64).reshape(-1) for o in _outputs(func, inputs)]


def _numerical_jacobians(func, inputs: tuple, which: list[int], eps: float) -> list[list[np.ndarray]]:
    """``[input][output]`` Jacobians of shape ``(input.numel(), output.numel())``."""
    sizes = [len(v) for v in _values(func, inputs)]
    result = []
    for i in which:
        x = inputs[i]
        columns = [np.zeros((x.numel(), size)) for size in sizes]
        for e in range(x.numel()):
            shifted = [list(inputs), list(inputs)]
            shifted[0][i], shifted[1][i] = _perturbed(x, e, eps), _perturbed(x, e, -eps)
            plus, minus = _values(func, shifted[0]), _values(func, shifted[1])
            for k in range(len(sizes)):
                columns[k][e] = (plus[k] - minus[k]) / (2 * eps)
        result.append(columns)
    return result


def _analytical_jacobians(func, inputs: tuple, which: list[int]) -> list[list[np.ndarray]]:
    outputs = _outputs(func, inputs)
    leaves = [inputs[i] for i in which]
    result = [[np.zeros((inputs[i].numel(), o.numel())) for o in outputs] for i in which]
    for k, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        flat_size = out.numel()
        for j in range(flat_size):
            onehot = np.zeros(flat_size)
            onehot[j] = 1.0
            grad_out = munet.tensor(onehot.reshape(tuple(out.shape)), dtype=out.dtype, device=out.device)
            grads = munet.autograd.grad(out, leaves, grad_outputs=grad_out, retain_graph=True, allow_unused=True)
            for n, g in enumerate(grads):
                if g is not None:
                    result[n][k][:, j] = g.detach().cpu().numpy().astype(np.float64).reshape(-1)
    return result


def _refuse(name: str, options: dict) -> None:
    asked = [k for k, v in options.items() if v]
    if asked:
        raise ValueError(f"{name}: {', '.join(asked)} is not available in MuNet (no vmap or forward-mode AD)")


def _check(func, inputs: tuple, eps: float, atol: float, rtol: float, raise_exception: bool, name: str) -> bool:
    which = _differentiable(inputs)
    if not which:
        raise ValueError(f"{name}: at least one input tensor must require gradient")
    for i in which:
        if inputs[i].dtype != munet.float64:
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point. This check will "
                "likely fail if all the inputs are not of double precision floating point.",
                stacklevel=3,
            )
    numerical = _numerical_jacobians(func, inputs, which, eps)
    analytical = _analytical_jacobians(func, inputs, which)
    for n, i in enumerate(which):
        for k, (num, ana) in enumerate(zip(numerical[n], analytical[n])):
            if np.allclose(ana, num, rtol=rtol, atol=atol):
                continue
            if not raise_exception:
                return False
            raise GradcheckError(
                f"Jacobian mismatch for output {k} with respect to input {i},\nnumerical:{num}\nanalytical:{ana}\n"
            )
    return True


def gradcheck(
    func,
    inputs,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
) -> bool:
    """Whether ``func``'s gradients with respect to the inputs that require grad match finite differences.

    >>> x = munet.randn(3, dtype=munet.float64, requires_grad=True)
    >>> munet.autograd.gradcheck(lambda t: (t * t).sin(), (x,))
    True
    """
    _refuse("gradcheck", {"check_batched_grad": check_batched_grad, "check_batched_forward_grad":
                          check_batched_forward_grad, "check_forward_ad": check_forward_ad})  # fmt: skip
    if not check_backward_ad:
        return True
    return _check(func, _as_tuple(inputs), eps, atol, rtol, raise_exception, "gradcheck")


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
) -> bool:
    """``gradcheck`` of the first derivatives: the map ``(inputs, grad_outputs) -> vjp`` is checked
    against finite differences. Without ``grad_outputs`` random ones (requiring grad) are drawn."""
    _refuse("gradgradcheck", {"check_batched_grad": check_batched_grad, "check_fwd_over_rev": check_fwd_over_rev})
    if not check_rev_over_rev:
        return True
    inputs = _as_tuple(inputs)
    which = _differentiable(inputs)
    if grad_outputs is None:
        outputs = _outputs(func, inputs)
        grad_outputs = tuple(
            munet.randn(tuple(o.shape), dtype=o.dtype, device=o.device).requires_grad_() for o in outputs
        )
        if gen_non_contig_grad_outputs:
            grad_outputs = tuple(
                g.detach().t().contiguous().t().requires_grad_() if g.ndim == 2 else g for g in grad_outputs
            )
    grad_outputs = _as_tuple(grad_outputs)
    num_inputs = len(inputs)

    def first_derivatives(*values):
        xs, gs = values[:num_inputs], values[num_inputs:]
        outputs = _outputs(func, xs)
        leaves = [xs[i] for i in which]
        grads = munet.autograd.grad(outputs, leaves, grad_outputs=list(gs), create_graph=True, allow_unused=True)
        return tuple(g if g is not None else munet.zeros_like(x) for g, x in zip(grads, leaves))

    return _check(first_derivatives, inputs + grad_outputs, eps, atol, rtol, raise_exception, "gradgradcheck")

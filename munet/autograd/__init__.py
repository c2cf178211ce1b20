"""Autograd: the backward engine, grad modes and custom Functions."""

from __future__ import annotations

from munet.autograd import functional, graph  # submodules, as torch.autograd.functional and .graph
from munet.autograd.anomaly_mode import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from munet.autograd.engine import run_backward
from munet.autograd.function import Function, FunctionCtx, once_differentiable
from munet.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    is_multithreading_enabled,
    no_grad,
    set_grad_enabled,
    set_multithreading_enabled,
)
from munet.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck
from munet.autograd.variable import Variable, variable

__all__ = [
    "Function",
    "FunctionCtx",
    "GradcheckError",
    "Variable",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "inference_mode",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "is_multithreading_enabled",
    "no_grad",
    "once_differentiable",
    "set_detect_anomaly",
    "set_grad_enabled",
    "set_multithreading_enabled",
    "variable",
]


def _as_list(x):
    if x is None:
        return None
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _make_grads(outputs, grad_outputs):
    from munet.ops._registry import apply_factory
    from munet.ops.creation import full_op

    grads = []
    for i, out in enumerate(outputs):
        g = grad_outputs[i] if grad_outputs is not None and i < len(grad_outputs) else None
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if out.dtype.is_complex:
                raise RuntimeError("grad can be implicitly created only for real scalar outputs")
            # ones_like(out), by its op: the output's dtype and device are valid factory arguments already
            g = apply_factory(full_op, out.device, shape=tuple(out._shape), value=1, dtype=out._dtype)
        elif tuple(g.shape) != tuple(out.shape):
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {list(g.shape)} and output[{i}] has a shape of {list(out.shape)}."
            )
        grads.append(g)
    return grads


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves they depend on."""
    tensors = _as_list(tensors)
    grads = _make_grads(tensors, _as_list(grad_tensors))
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is not None:
        inputs = _as_list(inputs)
        captured = run_backward(
            tensors, grads, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs, allow_unused=True
        )
        for t, g in zip(inputs, captured):
            if g is not None:
                g = g if create_graph else g.detach()
                t.grad = g.clone() if t.grad is None else t.grad + g
        return
    run_backward(tensors, grads, retain_graph=retain_graph, create_graph=create_graph)


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
):
    """Gradients of ``outputs`` with respect to ``inputs``, without touching any ``.grad``."""
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors (input {i}) does not require grad")
    grads = _make_grads(outputs, _as_list(grad_outputs))
    if retain_graph is None:
        retain_graph = create_graph
    result = run_backward(
        outputs,
        grads,
        retain_graph=retain_graph,
        create_graph=create_graph,
        inputs=inputs,
        allow_unused=bool(allow_unused) or materialize_grads,
    )
    if materialize_grads:
        from munet.ops.creation import zeros_like

        result = tuple(zeros_like(t) if g is None else g for t, g in zip(inputs, result))
    if not create_graph:
        result = tuple(None if g is None else g.detach() for g in result)
    return tuple(result)

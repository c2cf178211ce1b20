"""Activation kernels and their gradient kernels (elementwise, float32)."""

from __future__ import annotations

from munet.backends.vulkan.kernels_elementwise import run
from munet.backends.vulkan.registry import kernel


@kernel("relu")
def relu(rt, x):
    return run(rt, "relu", {"f32": "select(a, 0.0, a < 0.0)", "i32": "max(a, 0)"}, [x])


@kernel("threshold")
def threshold(rt, x, *, threshold, value):
    return run(rt, "threshold", {"f32": "select(c, a, a > b)", "i32": "select(c, a, a > b)"}, [x, threshold, value])


@kernel("threshold_backward")
def threshold_backward(rt, grad, x, *, threshold):
    return run(
        rt, "threshold_backward", {"f32": "select(0.0, a, b > c)", "i32": "select(0, a, b > c)"}, [grad, x, threshold]
    )


@kernel("leaky_relu")
def leaky_relu(rt, x, *, negative_slope):
    return run(rt, "leaky_relu", {"f32": "select(a * b, a, a > 0.0)"}, [x, negative_slope])


@kernel("leaky_relu_backward")
def leaky_relu_backward(rt, grad, x, *, negative_slope):
    return run(rt, "leaky_relu_backward", {"f32": "select(a * c, a, b > 0.0)"}, [grad, x, negative_slope])


@kernel("hardtanh")
def hardtanh(rt, x, *, min_val, max_val):
    expr = "select(select(a, b, a < b), c, a > c)"
    return run(rt, "hardtanh", {"f32": expr, "i32": expr}, [x, min_val, max_val])


@kernel("hardtanh_backward")
def hardtanh_backward(rt, grad, x, *, min_val, max_val):
    return run(rt, "hardtanh_backward", {"f32": "select(0.0, a, b > c && b < d)"}, [grad, x, min_val, max_val])

"""Kernel IR kernels of primitive nodes (not fused groups) that the cpu plan runs as generated C.

Each builder returns a :class:`~munet.compiler.codegen.kernel.Kernel` computing exactly what
the eager kernel computes, or None when the node is outside the form it handles (then the
NumPy kernel runs):

- ``kernel_from_max_pool``: an unpadded ``max_pool``'s values and indices (a window kernel:
  ``Reduce("max")`` and ``Reduce("argmax")`` over the window);
- ``kernel_from_max_pool_backward``: a max-pool gradient (the composite ``max_pool_backward``,
  recognised by name and attributes), as a gather over the input;
- ``shifted_sum_kernel``: the col2im step of a stride-1 transposed convolution
  (``kernels_conv.shifted_sum``), called by the NumPy convolution between its GEMMs.

``lower_cpu.py`` compiles and calls them; ``docs/compiler.md`` ("Generated kernels for
primitive nodes") has the measurements.
"""

from __future__ import annotations

import hashlib

from munet.compiler.codegen.kernel import (
    Apply,
    Const,
    Index,
    Kernel,
    Load,
    Reduce,
    Store,
    contiguous_strides,
    short_dtype,
)


def kernel_from_max_pool(node):
    """``(kernel, input values)``: the window-reduction kernel of a ``max_pool`` node (values and
    int64 indices), or None (see :func:`max_pool_kernel`)."""
    x = node.args[0]
    if x.shape is None:
        return None
    kernel = max_pool_kernel(tuple(x.shape), short_dtype(x.dtype), **node.attrs)
    return None if kernel is None else (kernel, [x])


def max_pool_kernel(shape, dtype: str, *, kernel_size, stride, padding, dilation, output_size):
    """The window-reduction kernel of a max pooling of a C-contiguous input of ``shape`` (N, C,
    *spatial) and ``dtype`` ("f32", "f64"), or None: its values and int64 indices, as the eager NumPy
    kernel computes them (the compiled plan and the eager ``max_pool`` run it).

    Index space (N, C, *out), reduction space the window (*kernel_size); the input is read at
    ``out * stride + k * dilation`` per spatial dim, and the index reported is that cell's flat
    position in the input plane, as the eager kernel reports it. Windows reaching into padding
    (or past the input with ``ceil_mode``) need bounds checks the kernel IR has no form for: None.
    """
    if dtype not in ("f32", "f64") or len(shape) < 3 or 0 in shape:
        return None
    spatial = tuple(shape[2:])
    out = output_size
    if any(padding) or any(
        (o - 1) * s + d * (k - 1) >= n for o, s, d, k, n in zip(out, stride, dilation, kernel_size, spatial)
    ):
        return None
    xs = contiguous_strides(shape)
    pitch = contiguous_strides(spatial)
    nd = len(spatial)
    cells = Load(
        0,
        xs[:2] + tuple(xs[2 + i] * stride[i] for i in range(nd)) + tuple(xs[2 + i] * dilation[i] for i in range(nd)),
        0,
        dtype,
    )
    key = Index(
        (0, 0) + tuple(pitch[i] * stride[i] for i in range(nd)) + tuple(pitch[i] * dilation[i] for i in range(nd))
    )
    stores = [Store(0, Reduce("max", cells, dtype)), Store(1, Reduce("argmax", cells, "i64", key))]
    space = tuple(shape[:2]) + tuple(out)
    digest = hashlib.sha1(repr((space, tuple(kernel_size), stores)).encode()).hexdigest()[:16]
    return Kernel(f"max_pool_{digest}", space, tuple(kernel_size), [dtype], [], [dtype, "i64"], stores)


def kernel_from_max_pool_backward(node):
    """``(kernel, input values)``: the gather form of a ``max_pool_backward`` node, or None (see
    :func:`max_pool_backward_kernel`)."""
    grad, index = node.args
    if not all(hasattr(v, "shape") for v in (grad, index)) or grad.shape is None or index.shape is None:
        return None
    kernel = max_pool_backward_kernel(tuple(grad.shape), tuple(index.shape), short_dtype(grad.dtype), **node.attrs)
    return None if kernel is None else (kernel, [index, grad])


def max_pool_backward_kernel(grad_shape, index_shape, dtype: str, *, input_shape, kernel_size, stride, padding,
                             dilation):  # fmt: skip
    """The gather form of a max-pool gradient (the composite ``max_pool_backward``) of C-contiguous
    ``grad`` and int64 ``indices`` (inputs in that order: indices, grad), or None when its windows do
    not tile the input exactly (the compiled plan and the eager kernel run it).

    Where kernel == stride, with no padding or dilation and no cells left over (the window
    attributes say so), every input cell lies in exactly one window, so the decomposition's
    scatter into zeros is elementwise over the input: ``where(indices[window] == cell,
    grad[window] + 0, 0)`` (the ``+ 0`` turns ``-0.0`` into ``0.0`` as adding into the zeros
    does). Index space (N, C, O0, K0, O1, K1, ...): the input's own layout, each window's index and
    gradient read with stride 0 over its cells.
    """
    if kernel_size is None:
        return None  # adaptive pooling's windows
    shape_in = tuple(input_shape)
    spatial, kernel_size, out_sizes = shape_in[2:], tuple(kernel_size), tuple(index_shape[2:])
    if (
        dtype not in ("f32", "f64")
        or any(padding)
        or any(d != 1 for d in dilation)
        or tuple(stride) != kernel_size
        or spatial != tuple(o * k for o, k in zip(out_sizes, kernel_size))
        or tuple(grad_shape) != tuple(index_shape)
        or tuple(index_shape[:2]) != shape_in[:2]
    ):
        return None
    shape = shape_in[:2] + tuple(v for o, k in zip(out_sizes, kernel_size) for v in (o, k))
    window = contiguous_strides(shape_in[:2] + out_sizes)
    per_window = window[:2] + tuple(v for st in window[2:] for v in (st, 0))
    pitch = contiguous_strides(spatial)
    cell = Index((0, 0) + tuple(v for p, k in zip(pitch, kernel_size) for v in (p * k, p)))
    chosen = Apply("eq", (Load(0, per_window, 0, "i64"), cell), "bool")
    value = Apply("add", (Load(1, per_window, 0, dtype), Const(0.0, dtype)), dtype)
    stores = [Store(0, Apply("where", (chosen, value, Const(0.0, dtype)), dtype))]
    digest = hashlib.sha1(repr((shape, stores)).encode()).hexdigest()[:16]
    return Kernel(f"pool_scatter_{digest}", shape, (), ["i64", dtype], [], [dtype], stores)


def shifted_sum_kernel(shape: tuple, positions: int, offsets: tuple, dtype: str) -> Kernel:
    """The kernel of ``kernels_conv.shifted_sum`` for a (B, G, L) target and (B, G, K, L) columns of
    a stride-1 transposed convolution: ``target[b, g, q] = sum_k columns[b, g, k, q - off_k]``, added
    in order of k from zero as the NumPy version adds (the same bits). Where ``q < off_k`` it reads
    the end of position k - 1's run, which holds zeros (there the columns come from spread-plane
    cells past the input: ``off_k`` is below the zero tail's length), and adding a zero to a sum
    that started at +0 changes nothing, so no mask is needed and the loop vectorizes. k = 0 has
    offset 0, so no read falls before the buffer."""
    b, g, run = shape
    strides = (g * positions * run, positions * run, 1)
    total = Const(0.0, dtype)
    for k, off in enumerate(offsets):
        total = Apply("add", (total, Load(0, strides, k * run - off, dtype)), dtype)
    stores = [Store(0, total)]
    digest = hashlib.sha1(repr((shape, stores)).encode()).hexdigest()[:16]
    return Kernel(f"shifted_sum_{digest}", shape, (), [dtype], [], [dtype], stores)

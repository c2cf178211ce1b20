"""Convolution: the ``convolution`` primitive (N-d, grouped, dilated, strided, transposed) and
the public ``conv1d/2d/3d``, ``conv_transpose1d/2d/3d`` built on it.

One primitive covers both directions. Its gradients are convolutions again:

- ``grad_input`` of a convolution is a transposed convolution of the gradient with the same
  weight (and ``grad_input`` of a transposed convolution is a plain convolution);
- ``grad_weight`` is a convolution of the input (batch and channels swapped) by the output
  gradient, with stride and dilation swapped, cropped to the kernel size.

Padding is stored per side, ``((lo, hi), ...)``, so ``padding='same'`` with an even effective
kernel pads asymmetrically exactly like PyTorch, without a separate pad.
"""

from __future__ import annotations

from munet.ops._autocast import lower_precision_under_autocast
from munet.ops._registry import Meta, apply, define

__all__ = [
    "convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "conv_tbc",
]  # fmt: skip
__functional__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "conv_tbc"]
__tensor_methods__: list[str] = []


# shapes --------------------------------------------------------------------------------------------


def conv_output_size(size: int, kernel: int, stride: int, pad: tuple, dilation: int) -> int:
    """Output length of a convolution along one dim (``pad`` is ``(lo, hi)``)."""
    return (size + pad[0] + pad[1] - dilation * (kernel - 1) - 1) // stride + 1


def conv_transpose_output_size(size: int, kernel: int, stride: int, pad: tuple, dilation: int, out_pad: int) -> int:
    return (size - 1) * stride - pad[0] - pad[1] + dilation * (kernel - 1) + 1 + out_pad


def conv_output_spatial(spatial_in, kernel, stride, padding, dilation, transposed, output_padding) -> tuple:
    """The output's spatial sizes of a convolution (or a transposed one): the one formula every
    backend's convolution kernel sizes its result by."""
    if transposed:
        return tuple(
            conv_transpose_output_size(n, k, s, p, d, op)
            for n, k, s, p, d, op in zip(spatial_in, kernel, stride, padding, dilation, output_padding)
        )
    return tuple(
        conv_output_size(n, k, s, p, d) for n, k, s, p, d in zip(spatial_in, kernel, stride, padding, dilation)
    )


def _conv_meta(x, w, *, stride, padding, dilation, groups, transposed, output_padding):
    spatial_in = tuple(x.shape[2:])
    kernel = tuple(w.shape[2:])
    channels = w.shape[1] * groups if transposed else w.shape[0]
    spatial = conv_output_spatial(spatial_in, kernel, stride, padding, dilation, transposed, output_padding)
    if any(n <= 0 for n in spatial):
        padded = tuple(n + p[0] + p[1] for n, p in zip(spatial_in, padding))
        raise RuntimeError(
            f"convolution: calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
            f"Kernel size: ({' x '.join(map(str, kernel))}). Kernel size can't be greater than actual input size"
        )
    return Meta((x.shape[0], channels) + spatial, x.dtype)


def _narrow_to(t, sizes):
    """Crop the spatial dims of ``t`` (dims 2..) to ``sizes`` from the start."""
    for i, n in enumerate(sizes):
        if t.shape[2 + i] != n:
            t = t.narrow(2 + i, 0, n)
    return t


def _weight_grad(x, g, weight_shape, *, stride, padding, dilation, groups):
    """d(loss)/d(weight) of ``conv(x, w)`` given the output gradient ``g``, as a convolution.

    grad_w[o, c, k] = sum_{n, p} g[n, o, p] * x_pad[n, c, p * stride + k * dilation]: a
    convolution of x (channels as batch, batch as channels) by g, stride and dilation swapped.
    """
    n, cin = x.shape[:2]
    spatial_x, spatial_g = tuple(x.shape[2:]), tuple(g.shape[2:])
    cg = cin // groups
    og = g.shape[1] // groups
    xs = x.reshape((n, groups, cg) + spatial_x).permute(2, 1, 0, *range(3, 3 + len(spatial_x)))
    xs = xs.reshape((cg, groups * n) + spatial_x)
    gs = g.reshape((n, groups, og) + spatial_g).permute(1, 2, 0, *range(3, 3 + len(spatial_g)))
    gs = gs.reshape((groups * og, n) + spatial_g)
    out = apply(
        convolution_op,
        xs,
        gs,
        stride=dilation,
        padding=padding,
        dilation=stride,
        groups=groups,
        transposed=False,
        output_padding=(0,) * len(stride),
    )
    out = _narrow_to(out, tuple(weight_shape[2:]))
    return out.transpose(0, 1)


def _convolution_backward(ctx, g):
    a = ctx.attrs
    need = ctx.needs_input_grad
    stride, padding, dilation, groups = a["stride"], a["padding"], a["dilation"], a["groups"]
    x_shape, w_shape = tuple(ctx.input_shapes[0] or ()), tuple(ctx.input_shapes[1] or ())
    grad_x = grad_w = None
    w = ctx.saved_tensor("weight") if need[0] else None
    x = ctx.saved_tensor("input") if need[1] else None
    x_shape = tuple(x.shape) if x is not None else x_shape
    w_shape = tuple(w.shape) if w is not None else w_shape
    if not a["transposed"]:
        if need[0]:
            out_pad = tuple(
                n - conv_transpose_output_size(p, k, s, pd, d, 0)
                for n, p, k, s, pd, d in zip(x_shape[2:], g.shape[2:], w_shape[2:], stride, padding, dilation)
            )
            grad_x = apply(
                convolution_op,
                g,
                w,
                stride=stride,
                padding=padding,
                dilation=dilation,
                groups=groups,
                transposed=True,
                output_padding=out_pad,
            )
        if need[1]:
            grad_w = _weight_grad(x, g, w_shape, stride=stride, padding=padding, dilation=dilation, groups=groups)
        return grad_x, grad_w
    if need[0]:
        grad_x = apply(
            convolution_op,
            g,
            w,
            stride=stride,
            padding=padding,
            dilation=dilation,
            groups=groups,
            transposed=False,
            output_padding=(0,) * len(stride),
        )
        grad_x = _narrow_to(grad_x, x_shape[2:])
    if need[1]:
        grad_w = _weight_grad(g, x, w_shape, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return grad_x, grad_w


convolution_op = define(
    "convolution",
    inputs=("input", "weight"),
    meta=_conv_meta,
    backward=_convolution_backward,
    saves=(("weight", 0), ("input", 1)),
    backward_name="ConvolutionBackward0",
)


# argument normalization ---------------------------------------------------------------------------


def _tuple(value, n: int, what: str, op: str) -> tuple:
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            value = tuple(value) * n
        if len(value) != n:
            raise RuntimeError(
                f"{op}: expected {what} to be a single integer value or a list of {n} values, got {list(value)}"
            )
        return tuple(int(v) for v in value)
    return (int(value),) * n


_LAYOUT = {1: "(N, C, L)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}


def _check_input(op: str, input, weight, bias, n: int):
    from munet.ops._utils import is_tensor

    if not is_tensor(input) or not is_tensor(weight):
        raise TypeError(
            f"{op}: expected input and weight to be tensors, got {type(input).__name__} and {type(weight).__name__}"
        )
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"{op}: expected input of rank {n + 1} or {n + 2} {_LAYOUT[n]}, got shape {tuple(input.shape)}"
        )
    if weight.ndim != n + 2:
        raise RuntimeError(f"{op}: expected weight of rank {n + 2}, got shape {tuple(weight.shape)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point input, got {input.dtype.name}")
    if weight.dtype is not input.dtype:
        raise RuntimeError(
            f"{op}: expected input and weight to have the same dtype, got {input.dtype.name} and {weight.dtype.name}"
        )
    if bias is not None and bias.dtype is not input.dtype:
        raise RuntimeError(
            f"{op}: expected input and bias to have the same dtype, got {input.dtype.name} and {bias.dtype.name}"
        )


def _batched(input, n: int):
    return (input, False) if input.ndim == n + 2 else (input.unsqueeze(0), True)


def _add_bias(out, bias, op: str):
    if bias is None:
        return out
    if bias.ndim != 1 or bias.shape[0] != out.shape[1]:
        raise RuntimeError(f"{op}: expected bias of shape ({out.shape[1]},), got shape {tuple(bias.shape)}")
    return out + bias.reshape((1, -1) + (1,) * (out.ndim - 2))


def _same_padding(kernel, dilation) -> tuple:
    pads = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        pads.append((total // 2, total - total // 2))
    return tuple(pads)


@lower_precision_under_autocast
def _conv_nd(n: int, op: str, input, weight, bias, stride, padding, dilation, groups):
    _check_input(op, input, weight, bias, n)
    stride = _tuple(stride, n, "stride", op)
    dilation = _tuple(dilation, n, "dilation", op)
    if any(s <= 0 for s in stride):
        raise RuntimeError(f"{op}: non-positive stride is not supported, got {list(stride)}")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"{op}: dilation should be greater than zero, got {list(dilation)}")
    kernel = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * n
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError(f"{op}: padding='same' is not supported for strided convolutions")
            pads = _same_padding(kernel, dilation)
        else:
            raise ValueError(f"{op}: invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
    else:
        p = _tuple(padding, n, "padding", op)
        if any(v < 0 for v in p):
            raise RuntimeError(f"{op}: negative padding is not supported, got {list(p)}")
        pads = tuple((v, v) for v in p)
    if groups <= 0:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got {groups}")
    x, unbatched = _batched(input, n)
    out_ch = weight.shape[0]
    if out_ch % groups:
        raise RuntimeError(
            f"{op}: expected weight of size {list(weight.shape)} to have out_channels divisible by groups={groups}"
        )
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(
            f"{op}: given groups={groups}, weight of size {list(weight.shape)}, expected input{list(x.shape)} to have "
            f"{weight.shape[1] * groups} channels, but got {x.shape[1]} channels instead"
        )
    out = apply(
        convolution_op,
        x,
        weight,
        stride=stride,
        padding=pads,
        dilation=dilation,
        groups=int(groups),
        transposed=False,
        output_padding=(0,) * n,
    )
    out = _add_bias(out, bias, op)
    return out.squeeze(0) if unbatched else out


@lower_precision_under_autocast
def _conv_transpose_nd(n: int, op: str, input, weight, bias, stride, padding, output_padding, groups, dilation):
    _check_input(op, input, weight, bias, n)
    if isinstance(padding, str):
        raise RuntimeError(f"{op}: padding='{padding}' is not supported for transposed convolutions")
    stride = _tuple(stride, n, "stride", op)
    dilation = _tuple(dilation, n, "dilation", op)
    pad = _tuple(padding, n, "padding", op)
    out_pad = _tuple(output_padding, n, "output_padding", op)
    if any(s <= 0 for s in stride) or any(d <= 0 for d in dilation) or any(p < 0 for p in pad):
        raise RuntimeError(f"{op}: expected positive stride and dilation and non-negative padding")
    for op_, s, d in zip(out_pad, stride, dilation):
        if op_ < 0 or (op_ >= s and op_ >= d):
            raise RuntimeError(
                f"{op}: output padding must be smaller than either stride or dilation, but got output_padding={list(out_pad)}, "
                f"stride={list(stride)}, dilation={list(dilation)}"
            )
    if groups <= 0:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got {groups}")
    x, unbatched = _batched(input, n)
    if weight.shape[0] % groups:
        raise RuntimeError(
            f"{op}: expected weight of size {list(weight.shape)} to have in_channels divisible by groups={groups}"
        )
    if x.shape[1] != weight.shape[0]:
        raise RuntimeError(
            f"{op}: given transposed=1, weight of size {list(weight.shape)}, expected input{list(x.shape)} to have "
            f"{weight.shape[0]} channels, but got {x.shape[1]} channels instead"
        )
    out = apply(
        convolution_op,
        x,
        weight,
        stride=stride,
        padding=tuple((p, p) for p in pad),
        dilation=dilation,
        groups=int(groups),
        transposed=True,
        output_padding=out_pad,
    )
    out = _add_bias(out, bias, op)
    return out.squeeze(0) if unbatched else out


# public ---------------------------------------------------------------------------------------------


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd(1, "conv1d", input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution of ``input`` (N, C, H, W) or (C, H, W) by ``weight`` (O, C/groups, kH, kW).

    ``padding`` is an int, a pair, ``'valid'`` or ``'same'`` (stride 1; padded on the right
    when the effective kernel is even, like PyTorch).
    """
    return _conv_nd(2, "conv2d", input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd(3, "conv3d", input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose_nd(
        1, "conv_transpose1d", input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 2-D convolution; ``weight`` is (C_in, C_out/groups, kH, kW)."""
    return _conv_transpose_nd(
        2, "conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose_nd(
        3, "conv_transpose3d", input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """``torch.convolution``: the general form behind every ``conv*`` function."""
    n = weight.ndim - 2
    if n not in _LAYOUT:
        raise RuntimeError(f"convolution: expected a weight of rank 3, 4 or 5, got shape {tuple(weight.shape)}")
    if transposed:
        return _conv_transpose_nd(
            n, "convolution", input, weight, bias, stride, padding, output_padding, groups, dilation
        )
    return _conv_nd(n, "convolution", input, weight, bias, stride, padding, dilation, groups)


def conv_tbc(input, weight, bias, pad: int = 0):
    """Convolution over time of ``input`` (T, B, C_in) with ``weight`` (K, C_in, C_out): (T + 2 pad - K + 1, B, C_out)."""
    if input.ndim != 3 or weight.ndim != 3 or bias.ndim != 1:
        raise RuntimeError(
            "conv_tbc: expected input (T, B, C_in), weight (K, C_in, C_out) and bias (C_out,), got shapes "
            f"{list(input.shape)}, {list(weight.shape)} and {list(bias.shape)}"
        )
    if input.shape[2] != weight.shape[1] or weight.shape[2] != bias.shape[0]:
        raise RuntimeError(
            f"conv_tbc: input channels {input.shape[2]} and weight {list(weight.shape)} and bias "
            f"{list(bias.shape)} do not match"
        )
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)

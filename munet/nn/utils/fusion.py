"""Folding an eval-mode batch norm into the convolution or linear layer before it, as ``torch.nn.utils.fusion``.

With running statistics ``mean``, ``var`` and affine ``w``, ``b``, batch norm is the affine map
``(x - mean) * w / sqrt(var + eps) + b``; composed with ``W x + c`` it is ``W' x + c'`` with
``W' = W * s`` (``s = w / sqrt(var + eps)`` along the output channels) and ``c' = (c - mean) * s + b``.
"""

from __future__ import annotations

import copy

import munet
from munet.nn.parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _check_eval(layer, bn) -> None:
    if layer.training or bn.training:
        raise RuntimeError("Fusion only for eval! Call .eval() on the layer and the batch norm first")
    if bn.running_mean is None or bn.running_var is None:
        raise RuntimeError("Fusion needs the batch norm's running statistics (track_running_stats=True)")


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of ``conv`` whose weight and bias also apply the eval-mode ``bn`` after it."""
    _check_eval(conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias, transpose
    )
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps: float, bn_w, bn_b, transpose: bool = False):
    """The ``(weight, bias)`` parameters of a convolution followed by batch norm with these statistics."""
    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    conv_b = munet.zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = munet.ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = munet.zeros_like(bn_rm) if bn_b is None else bn_b
    bn_var_rsqrt = munet.rsqrt(bn_rv + bn_eps)
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
    fused_w = (conv_w * (bn_w * bn_var_rsqrt).reshape(shape)).to(weight_dtype)
    fused_b = ((conv_b - bn_rm) * bn_var_rsqrt * bn_w + bn_b).to(bias_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` whose weight and bias also apply the eval-mode ``bn`` after it."""
    _check_eval(linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise RuntimeError(
            "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
            f"linear.out_features={linear.out_features} and bn.num_features={bn.num_features}"
        )
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps: float, bn_w, bn_b):
    """The ``(weight, bias)`` parameters of a linear layer followed by batch norm with these statistics."""
    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    linear_b = munet.zeros_like(bn_rm) if linear_b is None else linear_b
    bn_scale = bn_w * munet.rsqrt(bn_rv + bn_eps)
    fused_w = linear_w * bn_scale.unsqueeze(-1).to(weight_dtype)
    fused_b = ((linear_b - bn_rm) * bn_scale + bn_b).to(bias_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)

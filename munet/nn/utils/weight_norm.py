"""The hook-based ``weight_norm`` / ``remove_weight_norm`` (PyTorch's deprecated API).

``weight`` is replaced by the parameters ``weight_g`` (the norm over every dim but ``dim``) and
``weight_v`` (the direction); a forward pre-hook recomputes the plain attribute
``weight = g * v / ||v||`` before every call. The parametrization-based
``munet.nn.utils.parametrizations.weight_norm`` is the recommended form.
"""

from __future__ import annotations

import warnings

import munet
from munet.nn.module import Module
from munet.nn.parameter import Parameter

__all__ = ["WeightNorm", "remove_weight_norm", "weight_norm"]


def norm_except_dim(v, pow: float = 2, dim: int = 0):  # noqa: A002 - PyTorch's parameter name
    """The ``pow``-norm of ``v`` over every dim but ``dim``, kept as size-1 dims (over all dims when ``dim == -1``)."""
    if dim == -1:
        return munet.linalg.vector_norm(v, pow)
    others = tuple(d for d in range(v.ndim) if d != dim)
    return munet.linalg.vector_norm(v, pow, dim=others, keepdim=True)


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and ``<name>_v``."""

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / norm_except_dim(v, 2, self.dim))

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        warnings.warn(
            "`torch.nn.utils.weight_norm` is deprecated in favor of `torch.nn.utils.parametrizations.weight_norm`.",
            FutureWarning,
            stacklevel=3,
        )
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name, None)
        if name not in module._parameters or weight is None:
            raise ValueError(f"weight_norm: module {type(module).__name__} has no parameter named '{name}'")
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparameterize ``module.<name>`` as ``g * v / ||v||`` (warns ``FutureWarning``, as PyTorch)."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo ``weight_norm``: ``<name>`` becomes a plain parameter holding the current weight again."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")

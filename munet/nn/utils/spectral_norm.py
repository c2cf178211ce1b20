"""The hook-based ``spectral_norm`` / ``remove_spectral_norm`` (PyTorch's older API).

``weight`` becomes the parameter ``weight_orig`` plus the buffers ``weight_u`` and ``weight_v``
(the power-iteration vectors); a forward pre-hook sets the plain attribute
``weight = weight_orig / sigma`` with ``sigma = u . (W v)``. In training mode every call first runs
``n_power_iterations`` steps ``v = normalize(W^T u)``, ``u = normalize(W v)`` in place, as PyTorch;
in eval mode the stored vectors are used as they are. The starting vectors are random: load a
state dict to reproduce PyTorch's numbers exactly.
"""

from __future__ import annotations

import munet
import munet.nn.functional as F
from munet.autograd.grad_mode import no_grad
from munet.nn.module import Module
from munet.nn.parameter import Parameter

__all__ = ["SpectralNorm", "remove_spectral_norm", "spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that recomputes ``module.<name>`` as the spectrally normalized weight."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                detached = weight_mat.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(munet.mv(detached.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(munet.mv(detached, v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()  # the backward must not see the next call's in-place update
        sigma = munet.dot(u, munet.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> SpectralNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"spectral_norm: module {type(module).__name__} has no parameter named '{name}'")
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = F.normalize(munet.randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=fn.eps)
            v = F.normalize(munet.randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        setattr(module, fn.name, weight.detach())
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(
    module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> Module:
    """Normalize ``module.<name>`` by its largest singular value (power iteration); ``dim`` defaults
    to 1 for ConvTranspose layers, else 0."""
    if dim is None:
        transposed = (munet.nn.ConvTranspose1d, munet.nn.ConvTranspose2d, munet.nn.ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo ``spectral_norm``: ``<name>`` becomes a plain parameter holding the normalized weight."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")

"""``munet.nn.utils.parametrize``: a module's tensor computed from other tensors, as PyTorch's.

``register_parametrization(module, "weight", p)`` moves the ``weight`` parameter to
``module.parametrizations.weight.original`` (or ``original0``, ``original1``, ... when
``p.right_inverse`` returns a tuple) and makes ``module.weight`` a property that returns
``p(original)``, recomputed at each access (once per :func:`cached` block). State dict keys are
PyTorch's (``parametrizations.weight.original``), so checkpoints move between the two. As in
PyTorch the module's class is swapped for a subclass ``Parametrized<Class>`` that holds the
property; :func:`remove_parametrizations` puts it back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from munet._tensor import Tensor
from munet.autograd.grad_mode import no_grad
from munet.nn.containers import ModuleDict, ModuleList
from munet.nn.module import Module
from munet.nn.parameter import Parameter

__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "type_before_parametrizations",
]

_cache_depth = 0
_cache: dict = {}


@contextlib.contextmanager
def cached():
    """Inside the block each parametrized tensor is computed once, at its first access."""
    global _cache_depth
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache.clear()


def _register_tensor(module: Module, name: str, value: Tensor) -> None:
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _assign(original: Tensor, value: Tensor, what: str) -> None:
    """Write ``value`` into ``original`` in place (PyTorch's ``set_``; here shapes must agree)."""
    if value.dtype != original.dtype:
        raise ValueError(
            f"When `right_inverse` outputs one tensor, it may not change the dtype.\n"
            f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {value.dtype}"
        )
    if tuple(value.shape) != tuple(original.shape):
        raise ValueError(
            f"parametrize: right_inverse gave {what} of shape {tuple(value.shape)}, expected "
            f"{tuple(original.shape)} (MuNet writes it in place, so the shape may not change)"
        )
    with no_grad():
        original.copy_(value)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the ``original`` tensor(s) they read."""

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if not modules:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = tuple(original.shape), original.dtype
        with no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    new = module.right_inverse(new)
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors. Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new is not original:
                _assign(original, new, "a tensor")
            _register_tensor(self, "original", original)
        else:
            for i, value in enumerate(new):
                if not isinstance(value, Tensor):
                    raise ValueError(
                        f"'right_inverse' must return a sequence of tensors. Got element {i} of type {type(value).__name__}"
                    )
                value = value.detach()
                if isinstance(original, Parameter):
                    value = Parameter(value, original.requires_grad)
                value.requires_grad_(original.requires_grad)
                _register_tensor(self, f"original{i}", value)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if z.dtype != original_dtype or tuple(z.shape) != original_shape:
                raise ValueError(
                    "Registering a parametrization may not change the shape or the dtype of the tensor, unless "
                    f"`unsafe` flag is enabled.\nunparametrized dtype: {original_dtype}\nunparametrized shape: "
                    f"{original_shape}\nparametrized dtype: {z.dtype}\nparametrized shape: {tuple(z.shape)}"
                )

    def right_inverse(self, value: Tensor) -> None:
        """Set the originals so that the parametrized tensor becomes ``value``."""
        with no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                _assign(self.original, value, "a tensor")
                return
            if not isinstance(value, Sequence) or len(value) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of {self.ntensors} tensors")
            for i, tensor in enumerate(value):
                _assign(getattr(self, f"original{i}"), tensor, f"original{i}")

    def forward(self) -> Tensor:
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _parametrized_class(module: Module) -> None:
    """Swap ``module``'s class for a fresh subclass that can hold this module's properties."""
    cls = module.__class__
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {})


def _add_property(module: Module, tensor_name: str) -> None:
    def get_parametrized(self) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_depth:
            return parametrization()
        key = (id(self), tensor_name)
        if key not in _cache:
            _cache[key] = parametrization()
        return _cache[key]

    def set_original(self, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False):
    """Make ``module.<tensor_name>`` equal ``parametrization(original)``; registering again on the
    same name chains the new parametrization after the others. Returns ``module``."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        chain = module.parametrizations[tensor_name]
        if not unsafe:
            current = getattr(module, tensor_name)
            z = parametrization(current)
            if not isinstance(z, Tensor) or z.dtype != current.dtype or tuple(z.shape) != tuple(current.shape):
                raise ValueError(
                    "Registering a parametrization may not change the shape or the dtype of the tensor, unless "
                    "`unsafe` flag is enabled."
                )
            if hasattr(parametrization, "right_inverse"):
                inverted = parametrization.right_inverse(z)
                if not isinstance(inverted, Tensor):
                    raise ValueError(
                        f"parametrization.right_inverse must return a tensor. Got: {type(inverted).__name__}"
                    )
        chain.append(parametrization)
        chain.unsafe |= unsafe
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with name "
            f"'{tensor_name}'"
        )
    original = getattr(module, tensor_name)
    chain = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        _parametrized_class(module)
        module.parametrizations = ModuleDict()
    _add_property(module, tensor_name)
    module.parametrizations[tensor_name] = chain
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has any parametrization (on ``tensor_name``, when given)."""
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo the parametrizations of ``tensor_name``: it becomes a plain parameter again, holding the
    parametrized value (``leave_parametrized=True``) or the original one."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
            _assign(original, value, tensor_name)
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        with no_grad():
            original = Parameter(value.detach().clone(), value.requires_grad)
    else:
        raise ValueError(
            "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in terms of a "
            "sequence of tensors."
        )
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_tensor(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The class ``module`` had before its first parametrization."""
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)

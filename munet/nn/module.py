"""``nn.Module``: the base class of layers and models.

A module owns parameters, buffers (persistent or not) and child modules, registered by
attribute assignment. Traversal (``named_parameters`` ...) de-duplicates shared objects,
``state_dict``/``load_state_dict`` use PyTorch's key layout, and ``load_state_dict``
validates every key, shape and dtype before it assigns anything. It also accepts a state dict
of PyTorch tensors (``torch_module.state_dict()``), converted through NumPy without importing torch.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from munet._tensor import Tensor
from munet.autograd.grad_mode import is_grad_enabled, no_grad
from munet.nn.backward_hooks import BackwardHook
from munet.nn.parameter import Buffer, Parameter
from munet.utils.hooks import RemovableHandle


class _IncompatibleKeys(NamedTuple):
    missing_keys: list
    unexpected_keys: list

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


def _zero_grads(params: Iterable[Tensor], set_to_none: bool) -> None:
    """Drop (``set_to_none``) or zero in place the ``.grad`` of each tensor that has one.

    Shared by ``Module.zero_grad``, ``Optimizer.zero_grad`` and ``MasterWeightOptimizer``.
    """
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad = p.grad.detach()
            p.grad.zero_()


def _as_munet_state(state_dict):
    """``state_dict`` with PyTorch tensors (recognised by type, torch is never imported) converted to
    MuNet tensors through NumPy; the same object when it holds none."""
    if not hasattr(state_dict, "items") or not any(_is_torch_tensor(v) for v in state_dict.values()):
        return state_dict
    converted = OrderedDict((k, _from_torch_tensor(v) if _is_torch_tensor(v) else v) for k, v in state_dict.items())
    if hasattr(state_dict, "_metadata"):
        converted._metadata = state_dict._metadata
    return converted


def _is_torch_tensor(value) -> bool:
    return any(c.__module__.startswith("torch") and c.__name__ == "Tensor" for c in type(value).__mro__)


def _from_torch_tensor(value) -> Tensor:
    import munet

    value = value.detach().cpu()
    if str(value.dtype) == "torch.bfloat16":  # NumPy has no bfloat16: widen exactly, then narrow back
        return munet.from_numpy(value.float().numpy().copy()).to(munet.bfloat16)
    return munet.from_numpy(value.resolve_conj().resolve_neg().numpy().copy())


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module:
    """Base class for all neural-network modules (PyTorch's ``torch.nn.Module``)."""

    training: bool
    _version = 1
    # Buffers that state dicts written before they existed lack; a strict load accepts their
    # absence and keeps the current value (PyTorch does the same for unversioned state dicts).
    _optional_state_keys: tuple = ()

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["_backward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_load_state_dict_pre_hooks"] = OrderedDict()

    forward: Callable[..., Any]

    def forward(self, *args, **kwargs):  # noqa: F811 - documented default
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # registration ------------------------------------------------------------------------------
    def _check_init(self) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign to a Module before Module.__init__() call")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._check_init()
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' (nn.Parameter or None required)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created explicitly."
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        self._check_init()
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_module(self, name: str, module: Module | None) -> None:
        self.add_module(name, module)

    def add_module(self, name: str, module: Module | None) -> None:
        self._check_init()
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        self._modules[name] = module

    def _check_name(self, name: str, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f'{kind} name can\'t contain "." or be empty, got "{name}"')
        if (
            hasattr(self, name)
            and name not in self._parameters
            and name not in self._buffers
            and name not in self._modules
        ):
            raise KeyError(f"attribute '{name}' already exists")

    def __setattr__(self, name: str, value) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, keep="_parameters")
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' (nn.Parameter or None expected)"
                )
            self.register_parameter(name, None)
            return
        if isinstance(value, Module):
            if "_modules" not in self.__dict__:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, keep="_modules")
            self._modules[name] = value
            return
        modules = self.__dict__.get("_modules")
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' (nn.Module or None expected)"
                )
            modules[name] = None
            return
        if isinstance(value, Buffer):
            self._remove_from(name, keep="_buffers")
            self.register_buffer(name, value, value.persistent)
            return
        buffers = self.__dict__.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _remove_from(self, name: str, keep: str) -> None:
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                self.__dict__[store].pop(name, None)
        if keep != "_buffers":
            self._non_persistent_buffers_set.discard(name)
        self.__dict__.pop(name, None)

    def __getattr__(self, name: str):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            values = d.get(store)
            if values is not None and name in values:
                return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in ("_parameters", "_buffers", "_modules"):
            values = self.__dict__.get(store)
            if values is not None and name in values:
                del values[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # traversal ------------------------------------------------------------------------------------
    def _named_members(self, get_members, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True) -> Iterator:
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True) -> Iterator:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self) -> Iterator:
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True) -> Iterator:
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target: str) -> Module:
        module = self
        if target == "":
            return module
        for item in target.split("."):
            if item not in module._modules:
                raise AttributeError(f"{type(module).__name__} has no attribute `{item}`")
            module = module._modules[item]
        return module

    def get_parameter(self, target: str) -> Parameter:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if name not in module._parameters:
            raise AttributeError(f"{type(module).__name__} has no parameter `{name}`")
        return module._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if name not in module._buffers:
            raise AttributeError(f"{type(module).__name__} has no buffer `{name}`")
        return module._buffers[name]

    # modes and gradients ---------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        _zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # conversion --------------------------------------------------------------------------------------
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Apply ``fn`` to every parameter, gradient and buffer, in place of their data.

        Parameters keep their identity (``p.data`` is replaced), so tied weights stay tied and
        optimizers holding them keep working.
        """
        done = set()
        for module in self.modules():
            for param in module._parameters.values():
                if param is None or id(param) in done:
                    continue
                done.add(id(param))
                with no_grad():
                    new = fn(param)
                param.data = new
                if param.grad is not None:
                    with no_grad():
                        param.grad = fn(param.grad)
            for key, buf in module._buffers.items():
                if buf is not None:
                    module._buffers[key] = fn(buf)
        return self

    def to(self, *args, **kwargs) -> Module:
        """``to(device)``, ``to(dtype)`` (floating tensors only), ``to(device, dtype)``, ``to(tensor)``,
        ``to(memory_format=munet.channels_last)`` (the 4-D parameters and buffers)."""
        from munet.ops.convert import _parse_to_args

        device, dtype, _, _, memory_format = _parse_to_args(args, dict(kwargs))
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def convert(t: Tensor) -> Tensor:
            # as in PyTorch, a memory format applies to the 4-D and 5-D tensors only
            fmt = memory_format if t.ndim in (4, 5) else None
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None, memory_format=fmt)

        return self._apply(convert)

    def _cast_floating(self, dtype) -> Module:
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self) -> Module:  # noqa: A003
        from munet import _dtype as D

        return self._cast_floating(D.float32)

    def double(self) -> Module:
        from munet import _dtype as D

        return self._cast_floating(D.float64)

    def half(self) -> Module:
        from munet import _dtype as D

        return self._cast_floating(D.float16)

    def bfloat16(self) -> Module:
        from munet import _dtype as D

        return self._cast_floating(D.bfloat16)

    def cpu(self) -> Module:
        return self._apply(lambda t: t.cpu())

    def share_memory(self) -> Module:
        """Move every parameter, gradient and buffer into shared memory (``Tensor.share_memory_``), in
        place: forked workers and processes the module is sent to through ``multiprocessing`` train
        the same weights (Hogwild)."""
        for t in [*self.parameters(), *(p.grad for p in self.parameters() if p.grad is not None), *self.buffers()]:
            t.share_memory_()
        return self

    def cuda(self, device=None) -> Module:
        """Move every parameter and buffer to ``device`` (default: the current CUDA device)."""
        return self._apply(lambda t: t.cuda(device))

    def type(self, dst_type) -> Module:
        return self._cast_floating(dst_type)

    # state dict ---------------------------------------------------------------------------------------
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
        """Parameters and persistent buffers by dotted name (tied weights appear under each name)."""
        if args:
            raise TypeError("state_dict() takes keyword arguments only (destination=, prefix=, keep_vars=)")
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, {})
            if result is not None:
                destination = result
        return destination

    def _state_entries(self, prefix: str = "") -> dict:
        """Every (key -> (module, kind, name)) that ``state_dict`` would produce."""
        entries = {}
        for module_prefix, module in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            pre = module_prefix + "." if module_prefix else ""
            for name, p in module._parameters.items():
                if p is not None:
                    entries[pre + name] = (module, "param", name)
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent_buffers_set:
                    entries[pre + name] = (module, "buffer", name)
        return entries

    def check_state_dict(self, state_dict, strict: bool = True):
        """Validate ``state_dict`` against this module without changing anything.

        Returns ``(entries, missing_keys, unexpected_keys)``; raises ``RuntimeError`` listing every
        problem (missing/unexpected keys when ``strict``, shape or dtype mismatches).
        """
        if not hasattr(state_dict, "items"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        state_dict = _as_munet_state(state_dict)
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, "", {}, strict, [], [], [])
        entries = self._state_entries()
        missing = [
            k
            for k, (module, _, name) in entries.items()
            if k not in state_dict and name not in module._optional_state_keys
        ]
        unexpected = [k for k in state_dict if k not in entries]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        for key, (module, kind, name) in entries.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            current = module._parameters[name] if kind == "param" else module._buffers[name]
            if not isinstance(value, Tensor):
                errors.append(
                    f'While copying the parameter named "{key}", expected a Tensor, got {type(value).__name__}.'
                )
                continue
            if tuple(value.shape) != tuple(current.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} from checkpoint, "
                    f"the shape in current model is {tuple(current.shape)}."
                )
            elif value.is_floating_point() != current.is_floating_point() or (value.dtype.name == "bool") != (
                current.dtype.name == "bool"
            ):
                errors.append(
                    f"dtype mismatch for {key}: copying a {value.dtype.name} tensor from checkpoint into a "
                    f"{current.dtype.name} tensor of the current model."
                )
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        return entries, missing, unexpected

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy ``state_dict`` into parameters and buffers after validating all of it.

        Missing or unexpected keys (when ``strict``), a shape mismatch, or a dtype that cannot
        be converted raise ``RuntimeError`` listing every problem; nothing is assigned then.
        PyTorch tensors are accepted (converted through NumPy).
        """
        state_dict = _as_munet_state(state_dict)
        entries, missing, unexpected = self.check_state_dict(state_dict, strict)
        with no_grad():
            for key, (module, kind, name) in entries.items():
                if key not in state_dict:
                    continue
                value = state_dict[key]
                if assign:
                    if kind == "param":
                        module._parameters[name] = Parameter(
                            value, requires_grad=module._parameters[name].requires_grad
                        )
                    else:
                        module._buffers[name] = value
                    continue
                target = module._parameters[name] if kind == "param" else module._buffers[name]
                target.copy_(value)
        return _IncompatibleKeys(missing, unexpected)

    # hooks and call ----------------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False):
        handle = RemovableHandle.add(self._forward_pre_hooks, hook, prepend=prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(
        self, hook, *, prepend: bool = False, with_kwargs: bool = False, always_call: bool = False
    ):
        handle = RemovableHandle.add(self._forward_hooks, hook, prepend=prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        return handle

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """``hook(module, grad_input, grad_output) -> tuple | None`` after the gradients of the
        module's tensor inputs are computed; a returned tuple replaces ``grad_input``."""
        return RemovableHandle.add(self._backward_hooks, hook, prepend=prepend)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """``hook(module, grad_output) -> tuple | None`` before the module's gradients are computed;
        a returned tuple replaces ``grad_output``."""
        return RemovableHandle.add(self._backward_pre_hooks, hook, prepend=prepend)

    def register_state_dict_hook(self, hook):
        return RemovableHandle.add(self._state_dict_hooks, hook)

    def register_load_state_dict_pre_hook(self, hook):
        return RemovableHandle.add(self._load_state_dict_pre_hooks, lambda sd, *a: hook(self, sd, *a))

    def compile(self, *args, **kwargs) -> None:
        """Compile this module's calls in place with ``munet.compile(*args, **kwargs)``, as PyTorch.

        Later calls run the compiled forward (hooks included); the module itself, its parameters
        and its ``state_dict`` keys stay as they are. Called inside another traced function the
        module runs inline, as part of that trace.
        """
        from munet.compiler import compile

        object.__setattr__(self, "_compiled_call", compile(self._call_impl, *args, **kwargs))

    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call")
        if compiled is not None:
            from munet.compiler import is_compiling

            if not is_compiling():
                return compiled(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        backward_hook = None
        if (self._backward_hooks or self._backward_pre_hooks) and is_grad_enabled():
            backward_hook = BackwardHook(
                self, list(self._backward_hooks.values()), list(self._backward_pre_hooks.values())
            )
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        if backward_hook is not None:
            args = backward_hook.setup_input_hook(args)
        output = self.forward(*args, **kwargs)
        for hook_id, hook in list(self._forward_hooks.items()):
            if hook_id in self._forward_hooks_with_kwargs:
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        if backward_hook is not None:
            output = backward_hook.setup_output_hook(output)
        return output

    # printing -------------------------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for key, module in self._modules.items():
            lines.append(f"({key}): " + _addindent(repr(module), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict (and the deprecated Container)."""

from __future__ import annotations

import operator
import warnings
from collections import OrderedDict
from itertools import islice

from munet.nn.module import Module, _addindent
from munet.nn.parameter import Parameter


def _index(idx: int, size: int, what: str) -> int:
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range for {what} of length {size}")
    return idx % size


class Container(Module):
    """Deprecated (PyTorch warns ``FutureWarning``): a Module whose keyword arguments become its children."""

    def __init__(self, **kwargs) -> None:
        warnings.warn(
            "`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. "
            "Subclass that instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)


class Sequential(Module):
    """Modules called in order; indexable, sliceable and appendable like a list."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        i = _index(idx, len(self), "Sequential")
        return next(islice(self._modules.values(), i, None))

    def __setitem__(self, idx, module: Module) -> None:
        key = list(self._modules)[_index(idx, len(self), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        targets = keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self), "Sequential")]]
        for key in targets:
            delattr(self, key)
        items = list(self._modules.items())
        self._modules.clear()
        for i, (_, m) in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        return Sequential(*self, *other)

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> Sequential:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        items = list(self._modules.values())
        items.insert(index if index >= 0 else index + len(items) + 1, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m
        return self

    def pop(self, idx: int = -1) -> Module:
        module = self[idx]
        del self[idx]
        return module

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as children."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __repr__(self) -> str:
        """Like PyTorch: runs of identical children collapse to ``(0-3): 4 x Layer(...)``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = []
        for start, end, r in runs:
            head = f"({start}): " if start == end else f"({start}-{end}): {end - start + 1} x "
            lines.append(_addindent(head + r, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module: Module) -> None:
        setattr(self, str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx) -> None:
        items = list(self._modules.values())
        del items[idx if isinstance(idx, slice) else _index(idx, len(self), "ModuleList")]
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList([*self, *other])

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def pop(self, idx: int = -1) -> Module:
        module = self[idx]
        del self[idx]
        return module

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList is a container; call its modules, not the list")


class ModuleDict(Module):
    """An ordered dict of modules, registered as children."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict is a container; call its modules, not the dict")


class ParameterList(Module):
    """A list of parameters, registered on the module (plain tensors become Parameters)."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self)[idx])
        return getattr(self, str(_index(idx, self._size, "ParameterList")))

    def __setitem__(self, idx, param) -> None:
        idx = _index(idx, self._size, "ParameterList")
        setattr(self, str(idx), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return (self[i] for i in range(self._size))

    def __iadd__(self, params):
        return self.extend(params)

    def append(self, value) -> ParameterList:
        self._size += 1
        setattr(self, str(self._size - 1), _as_parameter(value))
        return self

    def extend(self, values) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(
            f"({i}): Parameter containing: [{p.dtype.name} of size {'x'.join(map(str, p.shape))}]"
            for i, p in enumerate(self)
        )

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList is a container, not a layer")


class ParameterDict(Module):
    """An ordered dict of parameters, registered on the module."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys: dict = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def pop(self, key: str):
        value = self[key]
        del self[key]
        return value

    def update(self, parameters) -> None:
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for key, value in items:
            self[key] = value

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict is a container, not a layer")


def _as_parameter(value):
    from munet._tensor import Tensor

    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value

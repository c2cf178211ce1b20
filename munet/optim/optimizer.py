"""The ``Optimizer`` base class: parameter groups, per-parameter state, state dicts.

Subclasses implement ``step`` over ``self.param_groups``; each group is a dict holding
``"params"`` and the group's hyperparameters, read at every step (so schedulers work by
writing ``group["lr"]``). ``state_dict`` uses PyTorch's layout: ``{"state": {index: {...}},
"param_groups": [{..., "params": [index, ...]}]}`` with parameters numbered in group order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any

from munet._tensor import Tensor
from munet.autograd.grad_mode import no_grad
from munet.optim._state_kinds import check_like


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class of all optimizers (PyTorch's ``torch.optim.Optimizer``)."""

    def __init__(self, params: Iterable, defaults: dict[str, Any]):
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        self._step_pre_hooks: dict = {}
        self._step_post_hooks: dict = {}
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, but got a Tensor"
            )
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _with_step_hooks(cls.__dict__["step"])

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group; options it does not set take the optimizer's defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but got a set")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group)
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in existing for p in params) or len({id(p) for p in params}) != len(params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        from munet.nn.module import _zero_grads

        _zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable | None = None):
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    def _run_closure(self, closure):
        if closure is None:
            return None
        from munet.autograd.grad_mode import enable_grad

        with enable_grad():
            return closure()

    # state dict ------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        index_of: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            indices = []
            for p in group["params"]:
                if id(p) not in index_of:
                    index_of[id(p)] = len(index_of)
                indices.append(index_of[id(p)])
            packed["params"] = indices
            groups.append(packed)
        state = {index_of[id(p)]: dict(s) for p, s in self._param_state_items() if id(p) in index_of}
        return {"state": state, "param_groups": groups}

    def _param_state_items(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    yield p, self.state[p]

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore state and hyperparameters, after checking the groups match this optimizer's."""
        groups, new_state = self._prepare_state(state_dict)
        self.state = new_state
        for saved, mine in zip(groups, self.param_groups):
            for k, v in saved.items():
                if k != "params":
                    mine[k] = v

    def check_state_dict(self, state_dict: dict) -> None:
        """Raise ``ValueError`` if ``state_dict`` does not fit this optimizer; changes nothing."""
        self._prepare_state(state_dict)

    def _prepare_state(self, state_dict: dict):
        """Validate ``state_dict`` and build the new per-parameter state, without assigning it."""
        state_dict = deepcopy(state_dict) if not _has_tensors(state_dict) else _shallow_copy(state_dict)
        groups = state_dict.get("param_groups")
        if groups is None or "state" not in state_dict:
            raise ValueError("optimizer state_dict must have 'state' and 'param_groups' entries")
        if len(groups) != len(self.param_groups):
            raise ValueError(
                f"loaded state dict has {len(groups)} parameter groups, this optimizer has {len(self.param_groups)}"
            )
        for i, (saved, mine) in enumerate(zip(groups, self.param_groups)):
            if len(saved["params"]) != len(mine["params"]):
                raise ValueError(
                    f"loaded state dict contains a parameter group {i} of size {len(saved['params'])} that doesn't "
                    f"match the size of optimizer's group ({len(mine['params'])})"
                )
            for key in sorted(saved.keys() & mine.keys() - {"params"}):  # hyperparameters: of the live kind
                check_like(saved[key], mine[key], f"loaded state dict's parameter group {i} '{key}'")
        id_map = {}
        for saved, mine in zip(groups, self.param_groups):
            for index, p in zip(saved["params"], mine["params"]):
                id_map[index] = p
        new_state: defaultdict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            key = int(key)
            if key not in id_map:
                raise ValueError(f"optimizer state_dict has state for parameter {key}, which no group contains")
            p = id_map[key]
            for name, v in value.items():
                if isinstance(v, Tensor) and v.ndim > 0 and tuple(v.shape) != tuple(p.shape):
                    raise ValueError(
                        f"optimizer state '{name}' of parameter {key} has shape {tuple(v.shape)}, "
                        f"the parameter has shape {tuple(p.shape)}"
                    )
            new_state[p] = {name: _cast_state(p, name, v) for name, v in value.items()}
        return groups, new_state

    # hooks -------------------------------------------------------------------------------------------
    def register_step_pre_hook(self, hook):
        from munet.utils.hooks import RemovableHandle

        return RemovableHandle.add(self._step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        from munet.utils.hooks import RemovableHandle

        return RemovableHandle.add(self._step_post_hooks, hook)


def _with_step_hooks(step):
    """Wrap a subclass's ``step`` so registered pre/post hooks run around it."""
    import functools

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        from munet.ops._registry import optimizer_step_scope

        with optimizer_step_scope(self):
            return _run_with_hooks(self, step, args, kwargs)

    return wrapper


def _run_with_hooks(self, step, args, kwargs):
    for hook in list(self._step_pre_hooks.values()):
        result = hook(self, args, kwargs)
        if result is not None:
            args, kwargs = result
    out = step(self, *args, **kwargs)
    for hook in list(self._step_post_hooks.values()):
        hook(self, args, kwargs)
    return out


def _has_tensors(obj) -> bool:
    if isinstance(obj, Tensor):
        return True
    if isinstance(obj, dict):
        return any(_has_tensors(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_has_tensors(v) for v in obj)
    return False


def _shallow_copy(obj):
    if isinstance(obj, dict):
        return {k: _shallow_copy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_shallow_copy(v) for v in obj]
    return obj


@no_grad()
def _cast_state(param: Tensor, name: str, value):
    """State tensors follow the parameter's device, and its dtype when floating (not ``step``)."""
    if not isinstance(value, Tensor):
        return value
    if name == "step":
        return value.clone()
    if value.is_floating_point() and param.is_floating_point():
        return value.to(device=param.device, dtype=param.dtype).clone()
    return value.to(param.device).clone()

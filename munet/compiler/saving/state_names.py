"""State naming: the name a saved program gives each real tensor the trace met.

Module parameters and buffers are named as in the model's ``state_dict``, optimizer state as
``optimizer.state.<param>.<key>``, gradients ``<param>.grad``, anything else ``tensor.<k>``.
"""

from __future__ import annotations

from munet._tensor import Tensor


class StateNames:
    """Names for the real tensors a trace met: model ``state_dict`` names, optimizer paths, or ``tensor.<k>``."""

    def __init__(self, compiled):
        self.by_storage: dict = {}
        self.by_param: dict = {}
        self.kinds: dict = {}
        self._opt_prefix: dict = {}
        self._fallback = 0
        modules = list(compiled._modules)
        children = {id(c) for m in modules for c in m.children()}
        roots = [m for m in modules if id(m) not in children]
        for j, root in enumerate(roots):
            prefix = "" if len(roots) == 1 else f"module{j}."
            for name, p in root.named_parameters(prefix=prefix.rstrip(".")):
                self._add(p, name, "parameter")
                self.by_param.setdefault(id(p), name)
                if p.grad is not None:
                    self._add(p.grad, name + ".grad", "grad")
            for name, b in root.named_buffers(prefix=prefix.rstrip(".")):
                self._add(b, name, "buffer")
        optimizers = list(compiled._optimizers)
        for i, opt in enumerate(optimizers):
            prefix = "optimizer" if len(optimizers) == 1 else f"optimizer{i}"
            self._opt_prefix[id(opt)] = prefix
            for g, group in enumerate(opt.param_groups):
                for k, p in enumerate(group["params"]):
                    pname = self.by_param.setdefault(id(p), f"{prefix}.param_groups.{g}.params.{k}")
                    self._add(p, pname, "parameter")
                    for key, v in opt.state.get(p, {}).items():
                        if isinstance(v, Tensor):
                            self._add(v, f"{prefix}.state.{pname}.{key}", "optimizer")

    def _add(self, t: Tensor, name: str, kind: str) -> None:
        if id(t._storage) not in self.by_storage:
            self.by_storage[id(t._storage)] = name
            self.kinds[name] = kind

    def of_storage(self, t: Tensor) -> str:
        name = self.by_storage.get(id(t._storage))
        if name is None:
            name = f"tensor.{self._fallback}"
            self._fallback += 1
            self._add(t, name, "tensor")
        return name

    def of_grad(self, leaf: Tensor) -> str:
        name = self.by_param.get(id(leaf))
        if name is None:
            name = self.of_storage(leaf)
        self.kinds[name + ".grad"] = "grad"
        return name + ".grad"

    def of_hyper(self, opt, g: int, key: str, index) -> str:
        prefix = self._opt_prefix.get(id(opt), "optimizer")
        return f"{prefix}.param_groups.{g}.{key}" + ("" if index is None else f".{index}")

"""``OptimizedModule``: what ``munet.compile(module)`` returns, a module whose calls run compiled.

As PyTorch's: the original module is the submodule ``_orig_mod`` (so ``parameters()``, ``train()``,
``to()`` reach it and ``state_dict`` keys start with ``_orig_mod.``), attributes it lacks are looked
up on the original, and calling it runs the :class:`CompiledFunction`. ``stats()``, ``describe()``
and ``graph`` are the compiled function's.
"""

from __future__ import annotations

from munet.nn.module import Module


class OptimizedModule(Module):
    def __init__(self, mod: Module, compiled):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiled", compiled)

    def __call__(self, *args, **kwargs):
        from munet.compiler.eager_regions import is_compiling

        if is_compiling():  # inside another traced function: part of that trace
            return self._orig_mod(*args, **kwargs)
        return self._compiled(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self(*args, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    @property
    def graph(self):
        return self._compiled.graph

    def stats(self) -> dict:
        return self._compiled.stats()

    def describe(self) -> str:
        return self._compiled.describe()

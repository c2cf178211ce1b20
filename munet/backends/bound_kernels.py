"""``BoundKernels``: a backend's kernel table bound to one device's runtime, shared by the device
backends whose kernels take their runtime first (vulkan, cuda)."""

from __future__ import annotations


class BoundKernels(dict):
    """``kernels`` (a registry's table) bound to ``rt`` with ``bind(fn, rt)``, each at first use, so a
    kernel registered after the device opened (an op defined later, rendered from its formula) is
    found too."""

    def __init__(self, kernels: dict, bind, rt):
        super().__init__()
        self.table = kernels
        self.bind = bind
        self.rt = rt

    def __missing__(self, name):
        fn = self[name] = self.bind(self.table[name], self.rt)
        return fn

    def __contains__(self, name) -> bool:
        return name in self.table

    def get(self, name, default=None):
        return self[name] if name in self.table else default

"""``munet.linalg``: PyTorch's ``torch.linalg`` namespace.

The functions are defined with the ops, in ``munet/ops/linalg*.py``; each such module lists its
``torch.linalg`` names in ``__linalg__``. See docs/linalg.md.
"""

from munet import ops as _ops


def _export(namespace: dict) -> list:
    names = []
    for module in _ops.MODULES:
        for name in getattr(module, "__linalg__", ()):
            namespace[name] = getattr(module, name)
            names.append(name)
    return names


__all__ = _export(globals())

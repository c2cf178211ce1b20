"""``munet.nn.functional``: activations, normalization, losses, convolution, pooling, ..."""

from munet import ops as _ops


def _export(namespace: dict) -> None:
    for module in _ops.MODULES:
        for name in getattr(module, "__functional__", ()):
            namespace[name] = getattr(module, name)


_export(globals())

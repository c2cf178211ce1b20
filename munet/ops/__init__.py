"""Op definitions by family. Each module lists its public names in ``__all__`` (the ``munet``
namespace), ``__functional__`` (``munet.nn.functional``) and ``__tensor_methods__``."""

from munet.ops import (
    activation,
    attention,
    checks,
    conv,
    convert,
    copy,
    creation,
    distance,
    elementwise,
    elementwise_math,
    embedding,
    histogram,
    indexing,
    linalg,
    linalg_factor,
    linalg_func,
    linalg_ldl,
    linalg_norm,
    linalg_solve,
    linalg_torch,
    loss,
    movement,
    normalization,
    pooling,
    quantile,
    random,
    reduce,
    sampling,
    sort,
    special,
    view,
)
from munet.ops._registry import OPS, Op, apply, apply_inplace, define

MODULES = (
    creation,
    convert,
    view,
    copy,
    elementwise,
    elementwise_math,
    reduce,
    linalg,
    linalg_factor,
    linalg_func,
    linalg_ldl,
    linalg_norm,
    linalg_solve,
    linalg_torch,
    movement,
    indexing,
    sort,
    histogram,
    quantile,
    random,
    activation,
    normalization,
    embedding,
    distance,
    loss,
    attention,
    conv,
    pooling,
    sampling,
    special,
)


def export(namespace: dict, listing: str) -> list:
    """Put every op family's functions named in its ``listing`` (``"__all__"``, ``"__functional__"``,
    ``"__linalg__"``, ``"__special__"``) into ``namespace``; returns their names."""
    names = []
    for module in MODULES:
        for name in getattr(module, listing, ()):
            namespace[name] = getattr(module, name)
            names.append(name)
    return names


__all__ = ["MODULES", "OPS", "Op", "apply", "apply_inplace", "define", "export"]

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
    float_parts,
    histogram,
    householder,
    index_math,
    index_writes,
    indexing,
    integer_math,
    integration,
    linalg,
    linalg_factor,
    linalg_func,
    linalg_norm,
    linalg_solve,
    linalg_torch,
    log_cumulative,
    loss,
    movement,
    norm_variants,
    normalization,
    pooling,
    quantile,
    random,
    random_draws,
    reduce,
    sampling,
    scatter_views,
    sort,
    special,
    special_bessel,
    special_gamma,
    special_polynomials,
    statistics,
    structured,
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
    statistics,
    scatter_views,
    structured,
    integration,
    integer_math,
    float_parts,
    log_cumulative,
    norm_variants,
    index_writes,
    index_math,
    random_draws,
    special_bessel,
    special_polynomials,
    special_gamma,
    householder,
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

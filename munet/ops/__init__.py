"""Op definitions by family. Each module lists its public names in ``__all__`` (the ``munet``
namespace), ``__functional__`` (``munet.nn.functional``) and ``__tensor_methods__``."""

from munet.ops import (
    activation,
    attention,
    conv,
    convert,
    copy,
    creation,
    distance,
    elementwise,
    elementwise_math,
    embedding,
    indexing,
    linalg,
    linalg_factor,
    linalg_norm,
    linalg_solve,
    loss,
    movement,
    normalization,
    pooling,
    random,
    reduce,
    sampling,
    sort,
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
    linalg_norm,
    linalg_solve,
    movement,
    indexing,
    sort,
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
)

__all__ = ["MODULES", "OPS", "Op", "apply", "apply_inplace", "define"]

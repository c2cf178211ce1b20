"""The cuda kernels the renderers produce for the registered op set, shared by the cuda tests.

``eager_sources()``: every formula op x every dtype its formula takes (rank 2), every cast
between two cuda dtypes and every strided copy (rank 3), every reduction x dtype x layout.
"""

from __future__ import annotations

import functools

from munet.backends.cuda import kernels_elementwise as E
from munet.backends.cuda import kernels_reduce as R
from munet.ops._registry import OPS

REDUCTION_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "bool")


def formula_operands(op, dtype: str) -> tuple:
    return tuple("bool" if role == "condition" else dtype for role in op.inputs)


def reduction_out(op: str, dtype: str) -> str:
    if op.startswith("arg"):
        return "int64"
    if op in ("sum", "prod") and dtype in ("bool", "int32", "int8", "int16", "uint8"):
        return "int64"
    return dtype


@functools.cache
def formula_cases() -> tuple:
    """``(op name, dtype)`` of every formula op and dtype the cuda renderer gives a kernel."""
    return tuple(
        (name, dt) for name, op in OPS.items() if op.formula is not None for dt in E.DTYPES if E.supports(name, dt)
    )


@functools.cache
def eager_sources() -> tuple:
    sources = [
        E.render_elementwise(name, formula_operands(OPS[name], dt), rank=2, attrs=E.sample_attrs(OPS[name]))
        for name, dt in formula_cases()
    ]
    sources += [E.render_cast(a, b, rank=3) for a in E.DTYPES for b in E.DTYPES if a != b]
    sources += [E.render_copy(dt, rank=3) for dt in E.DTYPES]
    for op in R.OPS:
        for dt in REDUCTION_DTYPES:
            for layout in ("outputs", "rows"):
                sources.append(
                    R.render_reduction(op, dt, reduction_out(op, dt), kept_rank=2, reduced_rank=2, layout=layout)
                )
    return tuple(sources)

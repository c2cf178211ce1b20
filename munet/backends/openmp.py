"""``munet.backends.openmp.is_available()``: whether MuNet's generated cpu kernels run OpenMP
teams, i.e. whether the C compiler found at run time accepts ``-fopenmp``."""

from __future__ import annotations


def is_available() -> bool:
    from munet.compiler.codegen.build import find_compiler

    found = find_compiler()
    return found is not None and "-fopenmp" in found[2]

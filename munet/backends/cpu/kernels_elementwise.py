"""CPU kernels for elementwise ops (NumPy ufuncs; in-place variants write into ``out``)."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.registry import kernel


def _ufunc_pair(name: str, ufunc):
    """Register ``name`` (new array) and ``name_`` (in place) for a NumPy ufunc."""

    def fresh(*args):
        return ufunc(*args)

    def inplace(out, *args):
        ufunc(out, *args, out=out, casting="unsafe")

    kernel(name)(fresh)
    kernel(name + "_")(inplace)


_ufunc_pair("add", np.add)
_ufunc_pair("sub", np.subtract)
_ufunc_pair("mul", np.multiply)
_ufunc_pair("div", np.true_divide)
_ufunc_pair("neg", np.negative)
_ufunc_pair("exp", np.exp)

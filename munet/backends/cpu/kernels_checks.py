"""CPU kernel of the ``check`` primitive (``munet/ops/checks.py``): raises at the op when ``ok`` fails."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.registry import kernel
from munet.ops.checks import failure


@kernel("check")
def check(ok, value, *, message, error):
    if ok.all():
        return np.ones((), np.bool_)  # a token: nothing reads it
    first = int(np.argmin(ok.reshape(-1)))
    raise failure(message, error, None if value is None else int(value.reshape(-1)[first]), first)

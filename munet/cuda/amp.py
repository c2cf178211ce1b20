"""``munet.cuda.amp``: PyTorch's deprecated spellings ``torch.cuda.amp.autocast(...)`` and
``torch.cuda.amp.GradScaler(...)``, which mean ``munet.amp.autocast("cuda", ...)`` and
``munet.amp.GradScaler("cuda", ...)`` and warn (FutureWarning) as PyTorch does. Without a CUDA
device both are disabled with a UserWarning, as in PyTorch."""

from __future__ import annotations

import warnings

from munet import _dtype as D
from munet import amp as _amp

__all__ = ["GradScaler", "autocast"]


class autocast(_amp.autocast):  # noqa: N801 - PyTorch's name
    def __init__(self, enabled: bool = True, dtype=D.float16, cache_enabled: bool = True):
        warnings.warn(
            "`munet.cuda.amp.autocast(args...)` is deprecated. Please use `munet.amp.autocast('cuda', args...)` "
            "instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        warnings.warn(
            "`munet.cuda.amp.GradScaler(args...)` is deprecated. Please use `munet.amp.GradScaler('cuda', args...)` "
            "instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)

"""``munet.amp``: automatic mixed precision (autocast, GradScaler, float32 master weights)."""

from munet.amp.autocast_mode import autocast, float32_under_autocast, get_autocast_dtype, is_autocast_enabled
from munet.amp.custom_function import custom_bwd, custom_fwd, is_autocast_available
from munet.amp.grad_scaler import GradScaler
from munet.amp.master_weights import MasterWeightOptimizer

__all__ = [
    "GradScaler",
    "MasterWeightOptimizer",
    "autocast",
    "custom_bwd",
    "custom_fwd",
    "float32_under_autocast",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_enabled",
]

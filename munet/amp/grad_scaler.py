"""``GradScaler``: dynamic loss scaling for float16 training (PyTorch's ``torch.amp.GradScaler``)."""

from __future__ import annotations

import math
import warnings
from enum import Enum

from munet import _dtype as D
from munet._device import device_type_available
from munet._tensor import Tensor
from munet.autograd.grad_mode import no_grad
from munet.ops._registry import step_unless
from munet.ops.creation import tensor
from munet.ops.elementwise import isfinite, logical_not, logical_or, where


class _Stage(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _agreed_across_replicas(found_inf: Tensor, optimizer) -> Tensor:
    """``found_inf`` OR-ed over the ranks of every process group that keeps the optimizer's
    parameters equal (``DistributedDataParallel``'s), so all replicas skip a step together even
    where their gradients differ (a hook, a gradient written after backward). A MAX all-reduce
    per group, recorded as a graph node under ``munet.compile``; nothing outside DDP."""
    from munet import distributed as dist

    if not dist.is_initialized():
        return found_inf
    from munet.distributed import replicated
    from munet.distributed.functional_collectives import all_reduce

    params = [p for group in optimizer.param_groups for p in group["params"]]
    for group in replicated.groups_of(params):
        found_inf = all_reduce(found_inf.to(D.int32), "MAX", group) > 0
    return found_inf


class GradScaler:
    """Multiplies the loss by ``scale`` before backward, checks gradients for inf/NaN before
    each optimizer step (skipping the step if any), and adapts the scale: ``backoff_factor``
    after an overflow, ``growth_factor`` after ``growth_interval`` clean steps.

    The scale and the growth tracker are 0-d cpu tensors (float64 and int64), the one source of
    truth in both modes. Eager calls read them on the host (a cpu read, never a device sync) and
    skip ``optimizer.step`` on the host when a gradient is inf/NaN, as PyTorch does. Inside
    ``munet.compile`` (a tracer is active) nothing is read on the host: the tensors are state of
    the graph, ``found_inf`` is a bool tensor, ``step`` runs the optimizer and then puts every
    parameter and optimizer-state tensor back where ``found_inf`` holds, and ``update`` adapts the
    scale with ``where``. Optimizer state created by that step (the first step) cannot be put
    back in the graph (before it there was none): the compiled call removes it from the optimizer
    after a run whose ``found_inf`` holds (one host read of a cpu flag, in that first-step program
    only), so the next call starts from fresh state as eager does, whatever the optimizer.

    Under ``DistributedDataParallel`` the inf/NaN decision is agreed across the DDP's ranks (a MAX
    all-reduce of the flag in ``unscale_``): one rank's overflow skips the step on every rank, and
    the scales stay equal. PyTorch relies on DDP's averaged gradients being equal instead.

    As in PyTorch, a scaler for a device type with no device here (``GradScaler("cuda")`` without
    CUDA) is disabled with a UserWarning. Unlike PyTorch, ``device`` defaults to ``"cpu"`` (PyTorch's
    ``"cuda"`` default would disable every scaler on a machine without CUDA)."""

    def __init__(
        self,
        device: str = "cpu",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        device_type = device if isinstance(device, str) else str(device)
        if enabled and not device_type_available(device_type.split(":")[0]):
            warnings.warn(f"GradScaler is enabled, but no {device_type} device is available. Disabling.", stacklevel=2)
            enabled = False
        self._device = device
        self._enabled = enabled
        self._init_scale = float(init_scale)
        self._scale = tensor(float(init_scale), dtype=D.float64, device="cpu")
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._growth_tracker = tensor(0, dtype=D.int64, device="cpu")
        self._per_optimizer: dict[int, dict] = {}

    def is_enabled(self) -> bool:
        return self._enabled

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _Stage.READY, "found_inf": False})

    def scale(self, outputs):
        """``outputs * scale`` (a tensor or a nest of tensors)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if outputs.dtype in (D.float32, D.float64):  # cast on cpu: vulkan holds no float64
                return outputs * self._scale.to(outputs.dtype).to(outputs.device)
            # eager multiplies a 16-bit tensor by the Python float at higher precision, then rounds (float32
            # here: the same for power-of-two scales, the ones growth and backoff keep by default)
            return (outputs.float() * self._scale.float().to(outputs.device)).to(outputs.dtype)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    @no_grad()
    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale (e.g. before clipping) and record inf/NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] is _Stage.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        # tensor ops only (no host read), so the same code runs under munet.compile
        inv = 1.0 / self._scale  # float64, rounded to each gradient's dtype
        found_inf = None
        for g in grads:
            stored = g._values() if g.is_sparse else g  # a sparse gradient: its stored values, as PyTorch checks
            bad = logical_not(isfinite(stored).all().to("cpu"))
            found_inf = bad if found_inf is None else logical_or(found_inf, bad)
            g.mul_(inv.to(g.dtype).to(g.device))
        if found_inf is None:
            found_inf = tensor(False)
        state["found_inf"] = _agreed_across_replicas(found_inf, optimizer)
        state["stage"] = _Stage.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if not done yet) and run ``optimizer.step`` unless a gradient was inf/NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        result = step_unless(state["found_inf"], optimizer, lambda: optimizer.step(*args, **kwargs))
        state["stage"] = _Stage.STEPPED
        return result

    @no_grad()
    def update(self, new_scale=None) -> None:
        """Adapt the scale after this iteration's steps (or set it to ``new_scale``)."""
        if not self._enabled:
            return
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                self._scale.copy_(new_scale.detach().reshape(()).to("cpu").to(D.float64))
            else:
                self._scale.fill_(float(new_scale))
        else:
            if not self._per_optimizer:
                raise RuntimeError("No inf checks were recorded prior to update.")
            found = None
            for s in self._per_optimizer.values():
                flag = s["found_inf"] if isinstance(s["found_inf"], Tensor) else tensor(s["found_inf"])
                found = flag if found is None else logical_or(found, flag)
            found = found.to("cpu")
            tracker = where(found, 0, self._growth_tracker + 1)
            grow = tracker == self._growth_interval
            scale = where(grow, self._scale * self._growth_factor, self._scale)
            self._scale.copy_(where(found, self._scale * self._backoff_factor, scale))
            self._growth_tracker.copy_(where(grow, 0, tracker))
        self._per_optimizer = {}

    def get_scale(self) -> float:
        return self._scale.item() if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {
            "scale": self._scale.item(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": int(self._growth_tracker.item()),
        }

    def check_state_dict(self, state_dict: dict) -> None:
        """Raise if ``load_state_dict(state_dict)`` would fail or load a value this scaler refuses
        (RuntimeError for an empty state, as PyTorch; ValueError naming the entry otherwise);
        changes nothing. A disabled scaler accepts anything, as its ``load_state_dict`` ignores it."""
        if not self._enabled:
            return
        if not isinstance(state_dict, dict):
            raise ValueError(f"GradScaler state_dict: expected a dict, got {type(state_dict).__name__}")
        if not state_dict:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler."
            )
        missing = [k for k in _STATE_RULES if k not in state_dict]
        if missing:
            raise ValueError(f"GradScaler state_dict: missing key(s) {missing}")
        for key, (kinds, valid, expected) in _STATE_RULES.items():
            value = state_dict[key]
            if isinstance(value, bool) or not isinstance(value, kinds) or not valid(value):
                raise ValueError(f"GradScaler state_dict: expected '{key}' to be {expected}, got {value!r}")

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore ``state_dict()``, after ``check_state_dict`` accepted all of it."""
        if not self._enabled:
            return
        self.check_state_dict(state_dict)
        self._scale.fill_(float(state_dict["scale"]))
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker.fill_(int(state_dict["_growth_tracker"]))


# key -> (accepted types, value check, what the message says is expected); the factors as the
# constructor requires them
_STATE_RULES = {
    "scale": ((int, float), lambda v: 0 < v < math.inf, "a positive finite number"),
    "growth_factor": ((int, float), lambda v: 1 < v < math.inf, "a finite number > 1"),
    "backoff_factor": ((int, float), lambda v: -math.inf < v < 1, "a finite number < 1"),
    "growth_interval": (int, lambda v: True, "an int"),
    "_growth_tracker": (int, lambda v: v >= 0, "an int >= 0"),
}

"""Save and resume a whole training run: model, optimizer, scheduler, GradScaler, RNG, step.

One ``munet.save`` file holds everything. ``load_training_state`` validates every part against
the live objects before it changes any of them, so a bad file leaves the run as it was, and a
resumed run continues bit for bit where the saved one stopped (same RNG streams included).
"""

from __future__ import annotations

from munet.ops import random as _random
from munet.serialization import load, save

__all__ = ["load_training_state", "save_training_state"]

FORMAT = "munet.training_state/1"


def save_training_state(
    path,
    *,
    model,
    optimizer=None,
    scheduler=None,
    scaler=None,
    step: int = 0,
    generators: dict | None = None,
    extra=None,
) -> None:
    """Write the training state to ``path`` atomically.

    ``generators`` names extra ``munet.Generator`` objects to restore (e.g. a DataLoader's);
    ``extra`` is any saveable value (dicts, lists, numbers, strings, tensors).
    """
    state = {
        "format": FORMAT,
        "step": int(step),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "rng": _random.get_rng_state(),
        "generators": {name: g.get_state() for name, g in (generators or {}).items()},
        "extra": extra,
    }
    save(state, path)


def load_training_state(
    path, *, model, optimizer=None, scheduler=None, scaler=None, generators: dict | None = None, map_location=None
) -> dict:
    """Restore what ``save_training_state`` wrote; returns ``{"step": ..., "extra": ...}``."""
    state = load(path, map_location=map_location)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"load_training_state: {path} is not a MuNet training state (format {FORMAT})")
    generators = generators or {}
    _check_parts(path, state, optimizer, scheduler, scaler, generators)
    model.check_state_dict(state["model"])
    if optimizer is not None:
        optimizer.check_state_dict(state["optimizer"])
    # Everything fits: now mutate.
    model.load_state_dict(state["model"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None:
        scheduler.load_state_dict(dict(state["scheduler"]))
    if scaler is not None:
        scaler.load_state_dict(state["scaler"])
    _random.set_rng_state(state["rng"])
    for name, g in generators.items():
        g.set_state(state["generators"][name])
    return {"step": state["step"], "extra": state["extra"]}


def _check_parts(path, state: dict, optimizer, scheduler, scaler, generators: dict) -> None:
    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler), ("scaler", scaler)):
        if obj is not None and state.get(name) is None:
            raise ValueError(f"load_training_state: {path} holds no {name} state, but a {name} was given")
    missing = sorted(set(generators) - set(state.get("generators") or {}))
    if missing:
        raise ValueError(f"load_training_state: {path} holds no state for generator(s) {missing}")

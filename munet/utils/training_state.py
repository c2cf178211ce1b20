"""Save and resume a whole training run: model, optimizer, scheduler, GradScaler, RNG, step.

One ``munet.save`` file holds everything. ``load_training_state`` validates every part against
the live objects before it changes any of them, so a bad file leaves the run as it was, and a
resumed run continues bit for bit where the saved one stopped (same RNG streams included).
"""

from __future__ import annotations

import copy

from munet.autograd.grad_mode import no_grad
from munet.ops import random as _random
from munet.serialization import CheckpointError, load, save

__all__ = ["load_training_state", "save_training_state"]

FORMAT = "munet.training_state/1"
_KEYS = ("format", "step", "model", "optimizer", "scheduler", "scaler", "rng", "generators", "extra")


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
    """Restore what ``save_training_state`` wrote; returns ``{"step": ..., "extra": ...}``.

    Every part is checked first (the model's and optimizer's state dicts, the scheduler's keys
    and value kinds, the GradScaler's entries, the global RNG state and each named generator's,
    ``step`` an int, ``extra`` present): a part that does not fit raises ``CheckpointError``
    naming the file and the part, and nothing has changed. Only then are the parts loaded; should
    one still fail midway, the parts already loaded are put back (from a copy of the model's
    parameters and buffers and of the other parts' states, held for the duration of the load)
    before the error propagates. ``generators`` lists only the generators to restore: the file may
    hold more.
    """
    state = load(path, map_location=map_location)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"load_training_state: {path}: format: not a MuNet training state ({FORMAT})")
    generators = generators or {}
    _check_parts(path, state, model, optimizer, scheduler, scaler, generators)
    undo = _snapshot(model, optimizer, scheduler, scaler, generators)
    try:
        _random.set_rng_state(state["rng"])
        for name, g in generators.items():
            g.set_state(state["generators"][name])
        if scaler is not None:
            scaler.load_state_dict(state["scaler"])
        if scheduler is not None:
            scheduler.load_state_dict(dict(state["scheduler"]))
        if optimizer is not None:
            optimizer.load_state_dict(state["optimizer"])
        model.load_state_dict(state["model"])
    except BaseException:
        undo()
        raise
    return {"step": state["step"], "extra": state["extra"]}


def _check_parts(path, state: dict, model, optimizer, scheduler, scaler, generators: dict) -> None:
    """Raise ``CheckpointError`` naming ``path`` and the first part that does not fit."""
    missing = [k for k in _KEYS if k not in state]
    if missing:
        raise CheckpointError(f"load_training_state: {path}: {missing[0]}: missing from the file")
    step = state["step"]
    if isinstance(step, bool) or not isinstance(step, int):
        raise CheckpointError(f"load_training_state: {path}: step: expected an int, got {type(step).__name__}")
    parts = [("model", model.check_state_dict, state["model"])]
    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler), ("scaler", scaler)):
        if obj is None:
            continue
        if state[name] is None:
            raise CheckpointError(f"load_training_state: {path}: {name}: the file holds no {name} state")
        parts.append((name, obj.check_state_dict, state[name]))
    parts.append(("rng", _random.Generator.check_state, state["rng"]))
    saved_generators = state["generators"]
    if not isinstance(saved_generators, dict):
        raise CheckpointError(
            f"load_training_state: {path}: generators: expected a dict, got {type(saved_generators).__name__}"
        )
    for name in generators:
        if name not in saved_generators:
            raise CheckpointError(f"load_training_state: {path}: generators[{name!r}]: the file holds no state for it")
        parts.append((f"generators[{name!r}]", _random.Generator.check_state, saved_generators[name]))
    for part, check, value in parts:
        try:
            check(value)
        except Exception as exc:  # any failure to validate a part means the part does not fit
            raise CheckpointError(f"load_training_state: {path}: {part}: {exc}") from exc


def _snapshot(model, optimizer, scheduler, scaler, generators: dict):
    """Copy what loading will change; returns the function that puts it back."""
    rng = _random.get_rng_state()
    generator_states = {name: g.get_state() for name, g in generators.items()}
    scaler_state = scaler.state_dict() if scaler is not None else None
    scheduler_state = copy.deepcopy(scheduler.state_dict()) if scheduler is not None else None
    if optimizer is not None:
        optimizer_state = optimizer.state
        optimizer_groups = [dict(group) for group in optimizer.param_groups]
    model_tensors = [(t, t.clone()) for t in model.state_dict().values()]

    def undo() -> None:
        with no_grad():
            for live, saved in model_tensors:
                live.copy_(saved)
        if optimizer is not None:
            optimizer.state = optimizer_state
            for group, saved in zip(optimizer.param_groups, optimizer_groups):
                group.clear()
                group.update(saved)
        if scheduler is not None:
            scheduler.load_state_dict(scheduler_state)
        if scaler is not None and scaler_state:
            scaler.load_state_dict(scaler_state)
        _random.set_rng_state(rng)
        for name, g in generators.items():
            g.set_state(generator_states[name])

    return undo

"""The structure check behind the ``check_state_dict`` of optimizers and schedulers: a saved value
must be of the kind of the live value it would replace."""

from __future__ import annotations

import numbers

from munet._tensor import Tensor


def kind(value) -> str:
    """``"a number"`` (0-d tensors included, as PyTorch takes a tensor ``lr``), ``"a bool"``, ..."""
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, numbers.Real) or (isinstance(value, Tensor) and value.ndim == 0):
        return "a number"
    if isinstance(value, str):
        return "a str"
    if isinstance(value, Tensor):
        return "a tensor"
    return f"a {type(value).__name__}"


def check_like(saved, current, where: str) -> None:
    """Raise ``ValueError`` naming the entry where ``saved`` does not have the structure of the live
    ``current``: the same kind, lists of the same length element by element, dicts on their common
    keys; a live ``None`` accepts anything."""
    if current is None:
        return
    if isinstance(current, dict):
        if not isinstance(saved, dict):
            raise ValueError(f"{where}: expected a dict, got {kind(saved)}")
        for key in saved.keys() & current.keys():
            check_like(saved[key], current[key], f"{where}[{key!r}]")
        return
    if isinstance(current, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(current):
            got = f"a list of {len(saved)}" if isinstance(saved, (list, tuple)) else kind(saved)
            raise ValueError(f"{where}: expected a list of {len(current)}, got {got}")
        for i, (s, c) in enumerate(zip(saved, current)):
            check_like(s, c, f"{where}[{i}]")
        return
    if kind(saved) != kind(current):
        raise ValueError(f"{where}: expected {kind(current)}, got {kind(saved)} ({saved!r:.40})")

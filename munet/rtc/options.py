"""Compiler options and exports as the modules take them: a string or a sequence of strings."""

from __future__ import annotations


def as_strings(value, owner: str, what: str) -> tuple[str, ...]:
    """``value`` (a string, or a sequence of strings) as a tuple of strings."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(f"{owner}: {what} must be a string or a sequence of strings, got {value!r}")

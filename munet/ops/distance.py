"""(to be filled) ops of the distance family."""

from __future__ import annotations

__all__: list[str] = []
__functional__: list[str] = []
__tensor_methods__: list[str] = []

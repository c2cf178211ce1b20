"""(to be filled) nn layers: activation."""

from __future__ import annotations

__all__: list[str] = []

"""(to be filled) nn layers: padding."""

from __future__ import annotations

__all__: list[str] = []

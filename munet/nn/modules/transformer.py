"""(to be filled) nn layers: transformer."""

from __future__ import annotations

__all__: list[str] = []

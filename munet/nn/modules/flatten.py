"""(to be filled) nn layers: flatten."""

from __future__ import annotations

__all__: list[str] = []

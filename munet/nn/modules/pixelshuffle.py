"""(to be filled) nn layers: pixelshuffle."""

from __future__ import annotations

__all__: list[str] = []

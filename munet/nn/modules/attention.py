"""(to be filled) nn layers: attention."""

from __future__ import annotations

__all__: list[str] = []

"""(to be filled) nn layers: sparse."""

from __future__ import annotations

__all__: list[str] = []

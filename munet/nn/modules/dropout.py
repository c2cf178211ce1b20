"""(to be filled) nn layers: dropout."""

from __future__ import annotations

__all__: list[str] = []

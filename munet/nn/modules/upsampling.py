"""(to be filled) nn layers: upsampling."""

from __future__ import annotations

__all__: list[str] = []

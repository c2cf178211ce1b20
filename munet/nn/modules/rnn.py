"""(to be filled) nn layers: rnn."""

from __future__ import annotations

__all__: list[str] = []

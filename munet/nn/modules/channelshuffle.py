"""``nn.ChannelShuffle``."""

from __future__ import annotations

from munet.nn import functional as F
from munet.nn.module import Module

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """Interleave the channels of ``groups`` groups: ``(N, C, *)`` to ``(N, C, *)``."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def extra_repr(self) -> str:
        return f"groups={self.groups}"

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

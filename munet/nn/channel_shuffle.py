"""``F.channel_shuffle``: interleave the channels of ``groups`` groups (ShuffleNet)."""

from __future__ import annotations

from munet._tensor import Tensor

__all__ = ["channel_shuffle", "native_channel_shuffle"]


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """``(N, C, *)`` viewed as ``(N, groups, C / groups, *)``, the two group dims swapped."""
    if input.ndim < 3:
        raise RuntimeError(
            f"channel_shuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    channels = input.size(1)
    if channels % groups:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {channels} channels and {groups} groups."
        )
    batch, spatial = input.size(0), tuple(input.shape[2:])
    grouped = input.reshape(batch, groups, channels // groups, *spatial)
    return grouped.transpose(1, 2).reshape(batch, channels, *spatial)


native_channel_shuffle = channel_shuffle

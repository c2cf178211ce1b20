"""Seeded damage to a file's bytes, shared by the loaders' fuzz tests (munet.load of MuNet files
and of torch.save checkpoints)."""

from __future__ import annotations

import random

KINDS = ("flip", "byte", "burst", "insert", "delete", "truncate")


def mutate(raw: bytes, rng: random.Random) -> bytes:
    """``raw`` with one random kind of damage: a flipped bit, a changed byte, a burst of up to 64
    random bytes (a damaged sector), up to 16 inserted or deleted bytes, or a truncation."""
    kind = rng.choice(KINDS)
    data = bytearray(raw)
    offset = rng.randrange(len(raw))
    if kind == "flip":
        data[offset] ^= 1 << rng.randrange(8)
    elif kind == "byte":
        data[offset] = rng.choice([b for b in range(256) if b != raw[offset]])
    elif kind == "burst":
        end = min(len(raw), offset + rng.randint(2, 64))
        data[offset:end] = bytes(rng.randrange(256) for _ in range(end - offset))
    elif kind == "insert":
        data[offset:offset] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif kind == "delete":
        del data[offset : offset + rng.randint(1, 16)]
    else:
        del data[offset:]
    return bytes(data)

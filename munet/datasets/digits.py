"""The UCI handwritten digits (1797 images of 8x8 pixels, values 0..16, labels 0..9)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

_PATH = Path(__file__).with_name("digits.csv.gz")


def load_digits(as_numpy: bool = False):
    """Return ``(images, labels)``: float32 images of shape (1797, 8, 8) scaled to [0, 1] and
    int64 labels of shape (1797,). Tensors unless ``as_numpy``."""
    with gzip.open(_PATH, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    if table.shape != (1797, 65):
        raise ValueError(f"load_digits: {_PATH} is damaged: expected a 1797x65 table, got {table.shape}")
    images = (table[:, :64].astype(np.float32) / 16.0).reshape(-1, 8, 8)
    labels = table[:, 64].copy()
    if as_numpy:
        return images, labels
    from munet.ops.creation import from_numpy

    return from_numpy(images), from_numpy(labels)

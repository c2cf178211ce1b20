"""quantile and nanquantile vs PyTorch: q scalar or tensor, dims, keepdim, interpolations, NaN."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn

MODES = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("interpolation", MODES)
@pytest.mark.parametrize(("dim", "keepdim"), [(None, False), (None, True), (0, False), (-1, True), (1, False)])
@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_quantile(fn, dim, keepdim, interpolation):
    x = randn(4, 5, 3)
    for q in (0.3, 0.5, 1.0, "tensor"):
        mq = munet.tensor([0.0, 0.25, 0.6, 1.0]) if q == "tensor" else q
        tq = torch.tensor([0.0, 0.25, 0.6, 1.0]) if q == "tensor" else q
        check(
            lambda a: getattr(munet, fn)(a, mq, dim, keepdim, interpolation=interpolation),
            lambda a: getattr(torch, fn)(a, tq, dim, keepdim, interpolation=interpolation),
            x,
        )
    check(lambda a: a.quantile(0.4, dim=0), lambda a: a.quantile(0.4, dim=0), noncontiguous(x))


@pytest.mark.parametrize("interpolation", MODES)
def test_quantile_nan(interpolation):
    x = randn(4, 6, seed=2)
    x[0, 2] = x[1, 0] = x[1, 5] = np.nan
    x[3, :] = np.nan
    for fn in ("quantile", "nanquantile"):
        for q in (0.0, 0.35, 1.0):
            check(
                lambda a: getattr(munet, fn)(a, q, dim=1, interpolation=interpolation),
                lambda a: getattr(torch, fn)(a, q, dim=1, interpolation=interpolation),
                x,
                grad=False,
            )


def test_quantile_shapes_and_dtypes():
    check(lambda a: munet.quantile(a, 0.5), lambda a: torch.quantile(a, 0.5), np.array(3.0, np.float32), grad=False)
    check(lambda a: munet.quantile(a, 0.5, dim=0), lambda a: torch.quantile(a, 0.5, dim=0), randn(1, 3), grad=False)
    x = randn(5).astype(np.float64)
    check(
        lambda a: munet.quantile(a, munet.tensor([0.1, 0.9], dtype=munet.float64)),
        lambda a: torch.quantile(a, torch.tensor([0.1, 0.9], dtype=torch.float64)),
        x,
    )
    check(
        lambda a: munet.quantile(a, munet.tensor(0.7, dtype=munet.float64)),
        lambda a: torch.quantile(a, torch.tensor(0.7, dtype=torch.float64)),
        x,
    )


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((munet.zeros(0), 0.5), {}, "must be non-empty"),
        ((munet.ones(3), 1.5), {}, r"in the range \[0, 1\]"),
        ((munet.ones(3), munet.tensor([0.5], dtype=munet.float64)), {}, "same dtype"),
        ((munet.tensor([1, 2]), 0.5), {}, "float or double"),
        ((munet.ones(3), 0.5), {"interpolation": "foo"}, "interpolation must be one of"),
    ],
)
def test_quantile_errors(args, kwargs, message):
    with pytest.raises(RuntimeError, match=message):
        munet.quantile(*args, **kwargs)

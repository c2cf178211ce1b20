"""renorm, norm_except_dim, frobenius_norm and nuclear_norm (munet/ops/norm_variants.py) against PyTorch."""

import warnings

import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn


@pytest.mark.parametrize("p,dim,maxnorm", [(2, 0, 1.0), (1, 1, 0.5), (3.5, -1, 2.0), (2, 1, 100.0), (2, 0, 0.0)])
def test_renorm(p, dim, maxnorm):
    x = randn(3, 4, 5)
    check(lambda x: munet.renorm(x, p, dim, maxnorm), lambda x: torch.renorm(x, p, dim, maxnorm), x)
    check(lambda x: x.renorm(p, dim, maxnorm), lambda x: x.renorm(p, dim, maxnorm), noncontiguous(x))

    def inplace(x):
        y = x * 1
        y.renorm_(p, dim, maxnorm)
        return y

    check(inplace, inplace, x)


def test_renorm_errors():
    with pytest.raises(RuntimeError, match="renorm: non-positive-norm not supported"):
        munet.renorm(munet.ones(2, 2), 0, 0, 1.0)
    with pytest.raises(RuntimeError, match="renorm: input needs at least 2 dimensions"):
        munet.renorm(munet.ones(2), 2, 0, 1.0)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("p", [2, 3])
def test_norm_except_dim(dim, p):
    check(lambda v: munet.norm_except_dim(v, p, dim), lambda v: torch.norm_except_dim(v, p, dim), randn(3, 4, 5))


def test_deprecated_norms():
    x = randn(3, 4, 5, dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dim, keepdim in [((0, 1), False), ((2,), True), (1, False)]:
            check(lambda x: munet.frobenius_norm(x, dim, keepdim), lambda x: torch.frobenius_norm(x, dim, keepdim), x)
        check(lambda x: munet.nuclear_norm(x[0]), lambda x: torch.nuclear_norm(x[0]), x)
        check(lambda x: munet.nuclear_norm(x[0], True), lambda x: torch.nuclear_norm(x[0], True), x)
        check(lambda x: munet.nuclear_norm(x, (0, 2)), lambda x: torch.nuclear_norm(x, (0, 2)), x)
    with pytest.warns(UserWarning, match="frobenius_norm is deprecated"):
        munet.frobenius_norm(munet.ones(2, 2), (0, 1))

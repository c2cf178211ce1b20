"""Distances (munet/ops/distance.py) against PyTorch: forward and gradients."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from tests.reference import check, noncontiguous, randn


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "s1,s2,dim",
    [((4, 5), (4, 5), 1), ((3, 4, 5), (3, 4, 5), -1), ((4, 5), (1, 5), 1), ((2, 1, 3), (4, 3), 0), ((6,), (6,), 0)],
)
def test_cosine_similarity(s1, s2, dim, dtype):
    a, b = randn(*s1, dtype=dtype), randn(*s2, dtype=dtype, seed=2)
    check(lambda a, b: F.cosine_similarity(a, b, dim), lambda a, b: TF.cosine_similarity(a, b, dim), a, b)
    check(
        lambda a, b: munet.cosine_similarity(a, b, dim),
        lambda a, b: torch.cosine_similarity(a, b, dim),
        noncontiguous(a),
        b,
    )


def test_cosine_similarity_small_norms_and_eps():
    a = np.array([[1e-10, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    b = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [3.0, 2.0, 1.0]])
    check(lambda a, b: F.cosine_similarity(a, b), lambda a, b: TF.cosine_similarity(a, b), a, b)
    check(lambda a, b: F.cosine_similarity(a, b, eps=0.5), lambda a, b: TF.cosine_similarity(a, b, eps=0.5), a * 0.1, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance(p, keepdim, dtype):
    a, b = randn(4, 5, dtype=dtype), randn(4, 5, dtype=dtype, seed=2)
    check(
        lambda a, b: F.pairwise_distance(a, b, p, keepdim=keepdim),
        lambda a, b: TF.pairwise_distance(a, b, p, keepdim=keepdim),
        a,
        b,
    )
    check(lambda a, b: munet.pairwise_distance(a, b, p), lambda a, b: torch.pairwise_distance(a, b, p), randn(5), b)
    check(
        lambda a, b: F.pairwise_distance(a, b, p, eps=1e-2),
        lambda a, b: TF.pairwise_distance(a, b, p, eps=1e-2),
        noncontiguous(a),
        b,
    )


@pytest.mark.parametrize("p", [2.0, 1.0, 0.5, 3.0])
def test_pdist(p):
    check(lambda x: F.pdist(x, p), lambda x: TF.pdist(x, p), randn(5, 3, dtype="float64"))
    check(lambda x: F.pdist(x, p), lambda x: TF.pdist(x, p), randn(1, 3, dtype="float64"))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("s1,s2", [((4, 3), (5, 3)), ((2, 4, 3), (2, 6, 3)), ((2, 4, 3), (6, 3))])
def test_cdist(s1, s2, p):
    check(
        lambda a, b: munet.cdist(a, b, p),
        lambda a, b: torch.cdist(a, b, p),
        randn(*s1, dtype="float64"),
        randn(*s2, dtype="float64", seed=2),
    )


def test_cdist_float32_large():
    a, b = randn(30, 8), randn(40, 8, seed=2)
    check(munet.cdist, torch.cdist, a, b, float64_reference=True)


def test_distance_errors():
    with pytest.raises(RuntimeError, match="cdist: X1 and X2 must have the same number of columns. X1: 3 X2: 4"):
        munet.cdist(munet.zeros(2, 3), munet.zeros(2, 4))
    with pytest.raises(RuntimeError, match=r"pdist: expected input of rank 2 \(N, M\), got shape \[2, 3, 4\]"):
        F.pdist(munet.zeros(2, 3, 4))
    with pytest.raises(RuntimeError, match="cosine_similarity: the size of tensors must match"):
        F.cosine_similarity(munet.zeros(2, 3), munet.zeros(4, 3))

"""bincount, histc and histogram vs PyTorch."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn, rng


@pytest.mark.parametrize("minlength", [0, 3, 12])
def test_bincount(minlength):
    x = rng(0).integers(0, 7, size=20)
    check(lambda a: munet.bincount(a, minlength=minlength), lambda a: torch.bincount(a, minlength=minlength), x)
    check(lambda a: a.bincount(), lambda a: a.bincount(), x[::2])
    check(lambda a: munet.bincount(a, minlength=minlength), lambda a: torch.bincount(a, minlength=minlength), x[:0])


@pytest.mark.parametrize("wdtype", ["float32", "float64", "int64", "int32"])
def test_bincount_weights_dtype_and_grad(wdtype):
    x = rng(1).integers(0, 5, size=12)
    w = rng(2).normal(size=12).astype(wdtype) if "float" in wdtype else rng(2).integers(-3, 3, size=12).astype(wdtype)
    check(lambda a, b: munet.bincount(a, b, 7), lambda a, b: torch.bincount(a, b, 7), x, w, grad=False)


def test_bincount_weights_gradient():
    # PyTorch has no derivative for bincount; MuNet's is the upstream gradient read at each value.
    x = rng(1).integers(0, 5, size=12)
    w = munet.tensor(randn(12), requires_grad=True)
    g = randn(5, seed=5)
    munet.bincount(munet.tensor(x), w).backward(munet.tensor(g))
    np.testing.assert_array_equal(w.grad.numpy(), g[x])


def test_bincount_rejects_bad_input():
    for bad in (munet.tensor([-1, 2]), munet.tensor([[1]]), munet.tensor([1.0])):
        with pytest.raises(RuntimeError, match="1-d non-negative integral"):
            munet.bincount(bad)
    with pytest.raises(RuntimeError, match="same length"):
        munet.bincount(munet.tensor([1, 2]), munet.tensor([1.0]))


@pytest.mark.parametrize(("bins", "lo", "hi"), [(10, 0, 0), (7, -1.0, 1.5), (1, 0, 0), (5, 2.0, 2.0)])
def test_histc(bins, lo, hi):
    x = randn(6, 5)
    x[0, 0] = 1.5  # a value on the right edge counts in the last bin
    check(lambda a: munet.histc(a, bins, lo, hi), lambda a: torch.histc(a, bins, lo, hi), x, grad=False)
    check(lambda a: a.histc(bins=bins), lambda a: a.histc(bins=bins), noncontiguous(x), grad=False)


def test_histc_edge_cases():
    for x in (np.ones(3, np.float32), np.zeros(0, np.float32), randn(4).astype(np.float64)):
        check(lambda a: munet.histc(a, bins=4), lambda a: torch.histc(a, bins=4), x, grad=False)
        check(lambda a: munet.histc(a, 4, 2, 2), lambda a: torch.histc(a, 4, 2, 2), x, grad=False)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        munet.histc(munet.tensor([1.0]), bins=3, min=2, max=1)
    with pytest.raises(RuntimeError, match="not implemented"):
        munet.histc(munet.tensor([1, 2]), bins=3)


@pytest.mark.parametrize("density", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("bins", [1, 6, "tensor"])
def test_histogram(bins, weighted, density):
    x = randn(5, 4, seed=3)
    w = np.abs(randn(5, 4, seed=4)) if weighted else None
    edges = np.array([-2.0, -0.5, 0.0, 0.3, 1.0], np.float32)
    m_bins = munet.tensor(edges) if bins == "tensor" else bins
    t_bins = torch.tensor(edges) if bins == "tensor" else bins

    def m_fn(a, *wt):
        return munet.histogram(a, m_bins, weight=wt[0] if wt else None, density=density)

    def t_fn(a, *wt):
        return torch.histogram(a, t_bins, weight=wt[0] if wt else None, density=density)

    inputs = (x, w) if weighted else (x,)
    check(m_fn, t_fn, *inputs, grad=False)
    check(
        lambda a: munet.histogram(a, 4, range=(-1.0, 1.0)),
        lambda a: torch.histogram(a, 4, range=(-1.0, 1.0)),
        x,
        grad=False,
    )


def test_histogram_edge_cases():
    for x in (np.ones(3, np.float32), np.zeros(0, np.float32), np.array([0.0, 1, 3], np.float32)):
        check(lambda a: munet.histogram(a, bins=4), lambda a: torch.histogram(a, bins=4), x, grad=False)
        for r in ((0.0, 0.0), (2.0, 2.0)):
            check(lambda a: munet.histogram(a, 4, range=r), lambda a: torch.histogram(a, 4, range=r), x, grad=False)
    hist, edges = munet.histogram(munet.tensor([0.0, 1.0]), bins=2)
    assert hist.tolist() == [1.0, 1.0] and edges.tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(RuntimeError, match="min should not exceed max"):
        munet.histogram(munet.tensor([1.0]), bins=3, range=(2.0, 1.0))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bins": 4},
        {"bins": [2, 3, 4]},
        {"bins": 3, "range": [-1.0, 1.0, -2.0, 2.0, 0.0, 1.0]},
        {"bins": 3, "density": True},
        {"bins": [3, 1, 2], "weighted": True},
        {"bins": [3, 1, 2], "weighted": True, "density": True},
    ],
)
def test_histogramdd(kwargs):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 9, 3)).astype(np.float32)
    w = rng.uniform(size=(6, 9)).astype(np.float32)
    kwargs = dict(kwargs)
    weighted = kwargs.pop("weighted", False)
    want = torch.histogramdd(torch.tensor(x), weight=torch.tensor(w) if weighted else None, **kwargs)
    got = munet.histogramdd(munet.tensor(x), weight=munet.tensor(w) if weighted else None, **kwargs)
    np.testing.assert_allclose(got.hist.numpy(), want.hist.numpy(), rtol=1e-5, atol=1e-6)
    assert len(got.bin_edges) == 3
    for g, e in zip(got.bin_edges, want.bin_edges):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6)


def test_histogramdd_edges_points_on_edges_and_errors():
    x = np.array([[-3.0, 0.0], [0.0, 2.0], [3.0, 1.0], [3.5, 0.5], [1.0, -1.0]], dtype=np.float32)
    edges = [np.array([-3.0, 0.0, 3.0], dtype=np.float32), np.array([-1.0, 0.0, 1.0, 2.0], dtype=np.float32)]
    want = torch.histogramdd(torch.tensor(x), bins=[torch.tensor(e) for e in edges])
    got = munet.histogramdd(munet.tensor(x), bins=[munet.tensor(e) for e in edges])
    np.testing.assert_array_equal(got.hist.numpy(), want.hist.numpy())
    empty = munet.histogramdd(munet.zeros(0, 2), bins=2)
    np.testing.assert_array_equal(empty.hist.numpy(), torch.histogramdd(torch.zeros(0, 2), bins=2).hist.numpy())
    with pytest.raises(RuntimeError, match="histogramdd: expected 2 sequences of bin edges"):
        munet.histogramdd(munet.tensor(x), bins=[2, 2, 2])
    with pytest.raises(RuntimeError, match="histogramdd: expected 4 values for range"):
        munet.histogramdd(munet.tensor(x), bins=2, range=[0.0, 1.0])

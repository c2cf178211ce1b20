"""The numerical-comparison helpers of tests/reference.py: the bounds they derive must accept and reject."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import TOL, assert_close_to_reference, check


def _cancelling_rows(length: int) -> np.ndarray:
    """Rows of ``length`` terms of magnitude 100 to 1000 that cancel to a sum of a few hundred at most."""
    r = np.random.default_rng(0)
    half = r.uniform(100, 1000, (64, length // 2))
    rows = np.concatenate([half, -half], axis=1) + r.standard_normal((64, length))
    return r.permuted(rows, axis=1).astype(np.float32)


def test_a_sum_as_accurate_as_torch_passes_where_the_fixed_float32_tolerance_fails():
    x = _cancelling_rows(4096)
    reference = torch.from_numpy(x).double().sum(dim=1)
    expected = torch.from_numpy(x).sum(dim=1)
    rtol, atol = TOL["float32"]
    # float32 torch itself is farther from the exact sums than the default float32 tolerance allows
    assert (expected.double() - reference).abs().max() > rtol * reference.abs().max() + atol
    assert_close_to_reference(munet.tensor(x).sum(dim=1), expected, reference)


def test_a_less_accurate_sum_fails():
    x = _cancelling_rows(16384)
    reference = torch.from_numpy(x).double().sum(dim=1)
    expected = torch.from_numpy(x).sum(dim=1)
    sequential = np.cumsum(x, axis=1, dtype=np.float32)[:, -1]  # error grows with the length, not its log
    with pytest.raises(AssertionError, match="max |actual - float64 reference|"):
        assert_close_to_reference(munet.tensor(sequential), expected, reference)


def test_the_floor_is_one_rounding_at_the_tensors_scale_when_the_trusted_result_is_exact():
    reference = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    expected = reference.float()
    ulp = np.finfo(np.float32).eps * 2.0
    assert_close_to_reference(munet.tensor(np.float32([1.0, -2.0 + 4 * ulp, 0.5])), expected, reference)
    with pytest.raises(AssertionError, match="4 x"):
        assert_close_to_reference(munet.tensor(np.float32([1.0, -2.0 + 5 * ulp, 0.5])), expected, reference)


def test_misuse_is_refused():
    x = torch.arange(6.0)
    with pytest.raises(AssertionError, match="must be computed in float64"):
        assert_close_to_reference(munet.arange(6.0), x, x)
    with pytest.raises(AssertionError, match="shapes"):
        assert_close_to_reference(munet.arange(5.0), x, x.double())
    with pytest.raises(AssertionError, match="dtype"):
        assert_close_to_reference(munet.arange(6.0, dtype=munet.float64), x, x.double())
    with pytest.raises(AssertionError):  # integer tensors must be equal
        assert_close_to_reference(munet.tensor([0, 1, 3]), torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2]))


def test_check_with_a_float64_reference_accepts_torchs_accuracy_and_rejects_less():
    x = _cancelling_rows(16384)
    check(lambda t: t.sum(dim=1), lambda t: t.sum(dim=1), x, float64_reference=True)  # outputs and gradients

    def sequential_sum(t):
        return munet.tensor(np.cumsum(t.numpy(), axis=1, dtype=np.float32)[:, -1])

    with pytest.raises(AssertionError, match="float64 reference"):
        check(sequential_sum, lambda t: t.sum(dim=1), x, grad=False, float64_reference=True)

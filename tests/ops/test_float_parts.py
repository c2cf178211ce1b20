"""frexp and nextafter (munet/ops/float_parts.py) against PyTorch, bit for bit (they are exact), on
subnormals, zeros, infinities and NaN too (also on vulkan, whose driver may flush subnormals)."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn

EDGE = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 0.5, -2.0, 3.0, 1e-45, 1e-40, 2.0**-126, 3.4028235e38, 1e-300, 5e-324]


def _values(dtype):
    rng = np.random.default_rng(0)
    spread = rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200)
    with np.errstate(over="ignore"):  # float16: the large values become infinities
        return np.concatenate([EDGE, spread]).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_frexp_exact(dtype):
    x = _values("float32" if dtype == "bfloat16" else dtype)
    tx = torch.tensor(x).to(getattr(torch, dtype))
    mx = munet.tensor(x).to(getattr(munet, dtype))
    tm, te = torch.frexp(tx)
    mm, me = munet.frexp(mx)
    np.testing.assert_array_equal(mm.float().numpy(), tm.float().numpy())
    np.testing.assert_array_equal(me.numpy(), te.numpy())
    assert me.dtype is munet.int32 and mm.dtype is mx.dtype
    mm2, me2 = mx.frexp()
    np.testing.assert_array_equal(me2.numpy(), te.numpy())


def test_frexp_gradient_and_errors():
    check(lambda x: munet.frexp(x).mantissa, lambda x: torch.frexp(x).mantissa, noncontiguous(randn(3, 4) * 100))
    with pytest.raises(RuntimeError, match="frexp: expected a floating-point tensor"):
        munet.frexp(munet.tensor([1, 2]))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_nextafter_exact(dtype):
    x = _values("float32" if dtype == "bfloat16" else dtype)
    targets = [np.zeros_like(x), np.full_like(x, np.inf), np.full_like(x, -np.inf), x[::-1].copy(), np.ones_like(x)]
    for y in targets:
        t = torch.nextafter(torch.tensor(x).to(getattr(torch, dtype)), torch.tensor(y).to(getattr(torch, dtype)))
        m = munet.nextafter(munet.tensor(x).to(getattr(munet, dtype)), munet.tensor(y).to(getattr(munet, dtype)))
        np.testing.assert_array_equal(m.float().numpy(), t.float().numpy())


def test_nextafter_gradient_broadcast_and_inplace():
    y = randn(4, seed=2)  # torch's gradient for other is zero; MuNet's is None
    check(lambda x: munet.nextafter(x, munet.tensor(y)), lambda x: torch.nextafter(x, torch.tensor(y)), randn(3, 4))
    x = munet.tensor([1.0, 2.0])
    assert x.nextafter_(munet.tensor([2.0, 0.0])) is x
    np.testing.assert_array_equal(
        x.numpy(), torch.nextafter(torch.tensor([1.0, 2.0]), torch.tensor([2.0, 0.0])).numpy()
    )


def test_frexp_and_nextafter_compile_to_the_eager_bits():
    x = munet.tensor(_values("float32"))
    y = munet.tensor(_values("float32")[::-1].copy())
    f = munet.compile(lambda a, b: (munet.frexp(a).mantissa, munet.frexp(a).exponent, munet.nextafter(a, b)))
    for got, want in zip(f(x, y), (*munet.frexp(x), munet.nextafter(x, y))):
        np.testing.assert_array_equal(got.numpy(), want.numpy())

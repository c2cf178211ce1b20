"""Dtypes and type promotion, checked against PyTorch over every pair of dtypes."""

import itertools

import numpy as np
import pytest
import torch

import munet
from munet import _dtype as D

PAIRS = [
    (D.float32, torch.float32),
    (D.float64, torch.float64),
    (D.float16, torch.float16),
    (D.bfloat16, torch.bfloat16),
    (D.int8, torch.int8),
    (D.uint8, torch.uint8),
    (D.int16, torch.int16),
    (D.int32, torch.int32),
    (D.int64, torch.int64),
    (D.bool_, torch.bool),
]
TORCH_OF = {m: t for m, t in PAIRS}


@pytest.mark.parametrize("a,b", list(itertools.product([p[0] for p in PAIRS], repeat=2)))
def test_promote_types_matches_torch(a, b):
    assert TORCH_OF[D.promote_types(a, b)] == torch.promote_types(TORCH_OF[a], TORCH_OF[b])


def _operand(kind, dtype):
    if kind == "dim":
        return munet.zeros(2, dtype=dtype), torch.zeros(2, dtype=TORCH_OF[dtype])
    return munet.zeros((), dtype=dtype), torch.zeros((), dtype=TORCH_OF[dtype])


@pytest.mark.parametrize("dtype", [p[0] for p in PAIRS])
@pytest.mark.parametrize("scalar", [True, 2, 2.5])
def test_result_type_with_python_scalars(dtype, scalar):
    for kind in ("dim", "zero"):
        m, t = _operand(kind, dtype)
        assert TORCH_OF[D.result_type(m, scalar)] == torch.result_type(t, scalar)


@pytest.mark.parametrize(
    "a,b", [(D.float16, D.float64), (D.int32, D.float16), (D.uint8, D.int64), (D.bool_, D.float32), (D.int8, D.uint8)]
)
def test_result_type_dim_vs_zero_dim(a, b):
    ma, ta = _operand("dim", a)
    mb, tb = _operand("zero", b)
    assert TORCH_OF[D.result_type(ma, mb)] == torch.result_type(ta, tb)


def test_arithmetic_uses_promotion():
    x = munet.tensor([1, 2, 3])
    assert (x + 1.5).dtype is munet.float32
    assert (x / 2).dtype is munet.float32
    assert (x * 2).dtype is munet.int64
    assert (munet.tensor([1.0], dtype=munet.float16) + munet.tensor(1.0, dtype=munet.float64)).dtype is munet.float16
    assert (munet.tensor([1], dtype=munet.uint8) + munet.tensor([1], dtype=munet.int8)).dtype is munet.int16


def test_default_dtype():
    assert munet.get_default_dtype() is munet.float32
    try:
        munet.set_default_dtype(munet.float64)
        assert munet.tensor([1.5]).dtype is munet.float64
        assert munet.zeros(2).dtype is munet.float64
    finally:
        munet.set_default_dtype(munet.float32)
    with pytest.raises(TypeError, match="floating dtype"):
        munet.set_default_dtype(munet.int32)


@pytest.mark.parametrize(
    "method,dtype",
    [
        ("float", "float32"),
        ("double", "float64"),
        ("half", "float16"),
        ("bfloat16", "bfloat16"),
        ("long", "int64"),
        ("int", "int32"),
        ("bool", "bool"),
    ],
)
def test_conversion_methods(method, dtype):
    x = munet.tensor([0.0, 1.7, -2.5])
    t = torch.tensor([0.0, 1.7, -2.5])
    assert getattr(x, method)().dtype.name == dtype
    np.testing.assert_array_equal(
        np.asarray(getattr(x, method)().float().numpy(), dtype=np.float64),
        getattr(t, method)().float().numpy().astype(np.float64),
    )


def test_casts_between_floats_are_differentiable():
    x = munet.tensor([1.0, 2.0], requires_grad=True)
    y = x.double() * 3
    assert y.dtype is munet.float64
    y.sum().backward()
    assert x.grad.dtype is munet.float32
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])
    h = x.half()
    assert h.requires_grad
    assert not x.long().requires_grad


def test_bfloat16_roundtrip_bits():
    values = np.array([1.0, -0.0, 3.140625, 65280.0], dtype=np.float32)
    m = munet.tensor(values).bfloat16()
    t = torch.tensor(values).bfloat16()
    np.testing.assert_array_equal(m.numpy().view(np.uint16), t.view(torch.int16).numpy().view(np.uint16))


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_finfo_matches_torch(name):
    m, t = munet.finfo(getattr(munet, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(m, attr) == getattr(t, attr), attr
    assert repr(m) == repr(t) and m == munet.finfo(getattr(munet, name))


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(name):
    m, t = munet.iinfo(getattr(munet, name)), torch.iinfo(getattr(torch, name))
    for attr in ("bits", "max", "min", "dtype"):
        assert getattr(m, attr) == getattr(t, attr), attr
    assert repr(m) == repr(t)


def test_finfo_default_and_errors_as_torch():
    assert munet.finfo().dtype == torch.finfo().dtype == "float32"
    munet.set_default_dtype(munet.float64)
    try:
        assert munet.finfo().dtype == "float64"
    finally:
        munet.set_default_dtype(munet.float32)
    for lib in (munet, torch):
        with pytest.raises(TypeError, match="finfo"):
            lib.finfo(lib.int32)
        with pytest.raises(TypeError, match="iinfo"):
            lib.iinfo(lib.float32)
        with pytest.raises(TypeError, match="bool is not supported"):
            lib.iinfo(lib.bool)

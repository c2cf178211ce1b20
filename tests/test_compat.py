"""munet/_compat.py: legacy tensor types, Tensor.type() and munet._assert, against PyTorch."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close

NAMES = [
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "ByteTensor",
    "CharTensor",
    "ShortTensor",
    "IntTensor",
    "LongTensor",
    "BoolTensor",
]


@pytest.mark.parametrize("name", NAMES)
def test_legacy_constructors_match_torch(name):
    m, t = getattr(munet, name), getattr(torch, name)
    data = [[1.7, 0.0, -2.2], [3.0, 1.0, 0.5]] if name != "ByteTensor" else [[1.7, 0.0, 2.2], [3.0, 1.0, 0.5]]
    assert_close(m(data), t(data))
    for args in ((2, 3), (4,), ((2, 3),), (munet.Size([2, 3]),)):
        t_args = tuple(torch.Size(a) if isinstance(a, munet.Size) else a for a in args)
        assert tuple(m(*args).shape) == tuple(t(*t_args).shape) and m(*args).dtype.name == str(t(*t_args).dtype)[6:]
    assert tuple(m().shape) == tuple(t().shape) == (0,)
    for lib, legacy in ((munet, m), (torch, t)):
        x = legacy(data)
        assert isinstance(x, legacy) and isinstance(x, lib.Tensor)
        assert not isinstance(x.to(lib.float64 if name != "DoubleTensor" else lib.float32), legacy)
        assert legacy(x) is not None and legacy(x).data_ptr() == x.data_ptr()
        assert x.type() == f"{lib.__name__}.{name}"


def test_legacy_constructor_refuses_another_dtype_tensor():
    for lib in (munet, torch):
        with pytest.raises(TypeError):
            lib.FloatTensor(lib.ones(2, dtype=lib.int64))


def test_tensor_type_casts_as_torch():
    values = np.array([1.5, -2.5, 0.0], np.float32)
    for target in ("float64", "int64", "bool", "float16"):
        assert_close(
            munet.tensor(values).type(getattr(munet, target)), torch.tensor(values).type(getattr(torch, target))
        )
    for name in ("torch.DoubleTensor", "torch.IntTensor"):
        assert_close(munet.tensor(values).type(name), torch.tensor(values).type(name))
    assert_close(munet.tensor(values).type(munet.LongTensor), torch.tensor(values).type(torch.LongTensor))
    x = munet.tensor(values)
    assert x.type(munet.float32) is x and x.type("munet.FloatTensor") is x
    with pytest.raises(ValueError, match="invalid type 'torch.Nope'"):
        x.type("torch.Nope")


def test_type_names_device_tensors(vulkan):
    assert munet.ones(2, device=vulkan).type() == f"munet.{vulkan.type}.FloatTensor"
    assert not isinstance(munet.ones(2, device=vulkan), munet.FloatTensor)


def test_assert_as_torch():
    for lib in (munet, torch):
        lib._assert(True, "unused")
        lib._assert(lib.tensor(True), "unused")
        with pytest.raises(AssertionError, match="shape mismatch"):
            lib._assert(lib.tensor(1) == 2, "shape mismatch")

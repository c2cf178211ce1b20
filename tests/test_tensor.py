"""Tensor state: creation, host exchange, devices, repr, DLPack."""

import numpy as np
import pytest
import torch

import munet


def test_from_numpy_shares_memory_both_ways():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = munet.from_numpy(arr)
    arr[0, 0] = 100
    assert t[0, 0].item() == 100
    t[1, 2] = -1
    assert arr[1, 2] == -1
    assert t.numpy() is not None and np.shares_memory(t.numpy(), arr)


def test_from_numpy_strided_array_keeps_strides():
    arr = np.arange(24, dtype=np.float64).reshape(4, 6)[::2, 1::2]
    t = munet.from_numpy(arr)
    assert t.stride() == torch.from_numpy(arr).stride()
    np.testing.assert_array_equal(t.numpy(), arr)


def test_tensor_copies_and_infers_dtype():
    arr = np.arange(3)
    t = munet.tensor(arr)
    arr[0] = 9
    assert t.tolist() == [0, 1, 2]
    assert munet.tensor([1, 2]).dtype is munet.int64
    assert munet.tensor([1.0, 2]).dtype is munet.float32
    assert munet.tensor([True, False]).dtype is munet.bool
    assert munet.tensor(np.zeros(2, np.float64)).dtype is munet.float64
    assert munet.tensor([[1, 2], [3, 4]]).shape == (2, 2)
    assert munet.tensor([munet.tensor(1.0), munet.tensor(2.0)]).tolist() == [1.0, 2.0]


def test_as_tensor_shares_when_possible():
    arr = np.ones(3, np.float32)
    t = munet.as_tensor(arr)
    arr[0] = 5
    assert t[0].item() == 5
    x = munet.ones(2)
    assert munet.as_tensor(x) is x


@pytest.mark.parametrize(
    "make_m,make_t",
    [
        (lambda: munet.zeros(2, 3), lambda: torch.zeros(2, 3)),
        (lambda: munet.ones((2, 3), dtype=munet.int32), lambda: torch.ones((2, 3), dtype=torch.int32)),
        (lambda: munet.full((2,), 7), lambda: torch.full((2,), 7)),
        (lambda: munet.full((2,), 7.5), lambda: torch.full((2,), 7.5)),
        (lambda: munet.arange(5), lambda: torch.arange(5)),
        (lambda: munet.arange(1, 2.5, 0.5), lambda: torch.arange(1, 2.5, 0.5)),
        (lambda: munet.arange(10, 0, -3), lambda: torch.arange(10, 0, -3)),
        (lambda: munet.linspace(0, 1, 7), lambda: torch.linspace(0, 1, 7)),
        (lambda: munet.linspace(-3, 3, 1), lambda: torch.linspace(-3, 3, 1)),
        (lambda: munet.eye(3), lambda: torch.eye(3)),
        (lambda: munet.eye(2, 4, dtype=munet.int64), lambda: torch.eye(2, 4, dtype=torch.int64)),
        (lambda: munet.zeros(0, 4), lambda: torch.zeros(0, 4)),
        (
            lambda: munet.zeros_like(munet.ones(2, dtype=munet.float64)),
            lambda: torch.zeros_like(torch.ones(2, dtype=torch.float64)),
        ),
        (lambda: munet.full_like(munet.ones(2), 3), lambda: torch.full_like(torch.ones(2), 3)),
        (lambda: munet.ones(2).new_zeros(3), lambda: torch.ones(2).new_zeros(3)),
    ],
)
def test_creation_matches_torch(make_m, make_t):
    m, t = make_m(), make_t()
    assert tuple(m.shape) == tuple(t.shape)
    assert m.dtype.name == str(t.dtype).replace("torch.", "")
    np.testing.assert_allclose(m.numpy(), t.numpy(), rtol=1e-6)


def test_item_tolist_len_iter_bool():
    t = munet.tensor([[1.5, 2.0], [3.0, 4.0]])
    assert t[0, 1].item() == 2.0 and isinstance(t[0, 1].item(), float)
    assert t.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert len(t) == 2
    assert [row.tolist() for row in t] == [[1.5, 2.0], [3.0, 4.0]]
    assert bool(munet.tensor([1])) is True
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(t)
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        t.item()
    with pytest.raises(TypeError, match="0-d"):
        len(munet.tensor(1.0))
    assert munet.tensor(3).item() == 3 and isinstance(munet.tensor(3).item(), int)


def test_numpy_requires_detach_when_grad():
    t = munet.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        t.numpy()
    assert t.detach().numpy().tolist() == [1.0, 1.0]


@pytest.mark.parametrize(
    "values,kwargs",
    [
        ([1.0, 2.5, -3.0], {}),
        ([[1.0, 2.0], [3.0, 4.0]], {}),
        ([1, 2, 300], {}),
        ([True, False], {}),
        ([0.0001, 123456.0], {}),
        ([1.0, float("nan"), float("inf")], {}),
        (3.5, {}),
        ([1.0, 2.0], {"dtype": "float64"}),
        ([1, 2], {"dtype": "int32"}),
        ([1.0, 2.0], {"requires_grad": True}),
        ([], {}),
    ],
)
def test_repr_matches_torch(values, kwargs):
    dtype = kwargs.get("dtype")
    m = munet.tensor(
        values, dtype=getattr(munet, dtype) if dtype else None, requires_grad=kwargs.get("requires_grad", False)
    )
    t = torch.tensor(
        values, dtype=getattr(torch, dtype) if dtype else None, requires_grad=kwargs.get("requires_grad", False)
    )
    assert repr(m).replace("munet.", "torch.") == repr(t)


def test_repr_shows_grad_fn():
    m = munet.ones(2, requires_grad=True) * 2
    assert repr(m) == "tensor([2., 2.], grad_fn=<MulBackward0>)"


def test_devices_and_errors():
    assert munet.devices()[0].startswith("cpu")
    x = munet.ones(2)
    assert x.device == munet.device("cpu") and x.device.type == "cpu"
    assert x.to("cpu") is x and x.cpu() is x
    with pytest.raises(munet.DeviceError, match="unknown device 'tpu'.*available devices: cpu"):
        munet.ones(2, device="tpu")
    with pytest.raises(munet.DeviceError, match="cuda:0"):
        x.to("cuda:0")
    with pytest.raises(munet.DeviceError, match="invalid device string"):
        munet.device("cpu:x")
    assert str(munet.device("vulkan", 1)) == "vulkan:1"


def test_to_parses_dtype_device_and_tensor():
    x = munet.ones(2)
    assert x.to(munet.float64).dtype is munet.float64
    assert x.to("cpu", munet.int32).dtype is munet.int32
    assert x.to(munet.zeros(1, dtype=munet.float16)).dtype is munet.float16
    assert x.to(dtype=munet.float32) is x
    assert x.to(munet.float32, copy=True) is not x


def test_dlpack_zero_copy_with_torch_and_numpy():
    m = munet.arange(6.0).reshape(2, 3)
    t = torch.from_dlpack(m)
    t[0, 0] = 42
    assert m[0, 0].item() == 42
    back = munet.from_dlpack(torch.arange(4.0))
    assert back.tolist() == [0.0, 1.0, 2.0, 3.0]
    src = torch.zeros(3)
    shared = munet.from_dlpack(src)
    src[1] = 7
    assert shared[1].item() == 7
    arr = np.from_dlpack(m)
    assert np.shares_memory(arr, m.numpy())
    assert m.__dlpack_device__() == (1, 0)


def test_stride_offset_contiguity_and_data_ptr():
    x = munet.zeros(3, 4)
    y = x[1:, ::2]
    tx = torch.zeros(3, 4)
    ty = tx[1:, ::2]
    assert y.stride() == ty.stride() and y.storage_offset() == ty.storage_offset()
    assert y.is_contiguous() == ty.is_contiguous() and x.t().is_contiguous() == tx.t().is_contiguous()
    assert y.data_ptr() == x.data_ptr() + 4 * 4
    assert x.contiguous() is x
    assert y.contiguous().is_contiguous()


def test_legacy_tensor_constructor_and_size():
    t = munet.Tensor([1, 2])
    assert t.dtype is munet.float32
    assert munet.Tensor(2, 3).shape == munet.Size([2, 3])
    assert repr(munet.zeros(2, 3).shape) == "munet.Size([2, 3])"
    assert munet.zeros(2, 3).size(-1) == 3 and munet.zeros(2, 3).shape.numel() == 6


def test_kernel_results_get_every_field_a_made_tensor_gets():
    # Tensor._from_kernel sets _make's fields inline (the hot path): the two must agree field by field
    from munet._tensor import Storage, Tensor
    from munet.ops._registry import Meta

    x = munet.ones(2, 3)
    backend = x._storage.backend
    raw = np.ones((2, 3), np.float32)
    fresh = Tensor._from_kernel(backend, raw, Meta((2, 3), munet.float32))
    made = Tensor._make(Storage(raw.reshape(-1), backend), (2, 3), (3, 1), 0, munet.float32, raw)
    fields = [name for name in Tensor.__slots__ if not name.startswith("__") and name not in ("_storage", "_data")]
    assert {f: getattr(fresh, f) for f in fields} == {f: getattr(made, f) for f in fields}
    assert type(fresh._shape) is munet.Size and fresh._storage.data.base is raw

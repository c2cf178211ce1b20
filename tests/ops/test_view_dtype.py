"""``Tensor.view(dtype)``: the same bytes read as another dtype, against PyTorch: shapes, strides,
offsets, values and PyTorch's error messages; storage and version counter shared with the base."""

from __future__ import annotations

import numpy as np
import pytest

import munet

torch = pytest.importorskip("torch")

PAIRS = [
    ("float32", "int32"),
    ("float32", "int16"),
    ("int16", "float32"),
    ("float64", "uint8"),
    ("bfloat16", "int16"),
    ("float16", "bfloat16"),
    ("bool", "uint8"),
    ("uint8", "bool"),
    ("int8", "float64"),
    ("int64", "float32"),
]
SLICES = [(slice(None), slice(None)), (slice(1, 3), slice(0, 8)), (slice(None), slice(4, 12)), (0, slice(None, 6))]


@pytest.mark.parametrize("source, target", PAIRS)
@pytest.mark.parametrize("index", range(len(SLICES)))
def test_matches_torch(source, target, index):
    base = np.random.default_rng(0).integers(0, 120, 48)
    if "bool" in (source, target):  # bytes other than 0 and 1 are no bool (what reads them is undefined)
        base = base % 2 == 0 if source == "bool" else base % 2
    t = torch.tensor(base).to(getattr(torch, source)).reshape(4, 12)[SLICES[index]]
    m = munet.tensor(base).to(getattr(munet, source)).reshape(4, 12)[SLICES[index]]
    try:
        expected = t.view(getattr(torch, target))
    except RuntimeError as error:
        with pytest.raises(RuntimeError) as raised:
            m.view(getattr(munet, target))
        assert str(raised.value) == str(error)
        return
    got = m.view(getattr(munet, target))
    assert got.dtype is getattr(munet, target)
    assert tuple(got.shape) == tuple(expected.shape)
    assert got.stride() == expected.stride() and got.storage_offset() == expected.storage_offset()
    # compare the bytes (NaN payloads and bool bytes included)
    assert got.contiguous().numpy().tobytes() == _bytes(expected)


def _bytes(t) -> bytes:
    """A torch tensor's bytes in row-major order (through a same-size integer view: NumPy has no bfloat16)."""
    t = t.contiguous()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()


def test_a_zero_dim_tensor_keeps_its_size():
    got = munet.tensor(1.0).view(munet.int32)
    assert got.shape == () and got.item() == torch.tensor(1.0).view(torch.int32).item()
    with pytest.raises(RuntimeError, match="self.dim\\(\\) cannot be 0 to view Float as Short"):
        munet.tensor(1.0).view(munet.int16)


def test_shares_storage_and_version_with_its_base():
    x = munet.zeros(2, 4)
    bits = x.view(munet.int32)
    bits[0, 1] = 0x3F800000  # the bits of 1.0
    assert x[0, 1].item() == 1.0 and x._version == bits._version
    x.add_(1)
    assert bits[0, 0].item() == 0x3F800000 and x._version == bits._version
    assert bits.untyped_storage() is x.untyped_storage()


def test_a_modified_saved_tensor_is_detected_through_the_reinterpreted_view():
    w = munet.ones(3, requires_grad=True)
    y = w.exp()  # saves its result
    y.detach().view(munet.int32).zero_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_has_no_history_as_in_torch():
    x = munet.randn(4, requires_grad=True)
    assert not x.view(munet.int32).requires_grad and x.view(munet.int32).grad_fn is None
    assert x.view(munet.float32).requires_grad == torch.randn(4, requires_grad=True).view(torch.float32).requires_grad


def test_other_devices_refuse_clearly(vulkan):
    with pytest.raises(
        RuntimeError, match="view\\(dtype\\): viewing munet.float32 as munet.int32 is supported on cpu only"
    ):
        munet.zeros(4, device=vulkan).view(munet.int32)


def test_compiled_functions_take_it_as_an_argument_and_refuse_it_as_state():
    bits = munet.arange(4.0).view(munet.int32)
    compiled = munet.compile(lambda b: b + 1, fullgraph=True)
    for _ in range(2):  # the trace, then a replay
        assert compiled(bits).tolist() == (bits + 1).tolist()
    with pytest.raises(RuntimeError, match="view\\(dtype\\) of float32 storage cannot be traced"):
        munet.compile(lambda: bits + 1, fullgraph=True)()

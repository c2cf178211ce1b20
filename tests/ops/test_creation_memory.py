"""``munet/ops/creation_memory.py`` against PyTorch: ``asarray`` (sharing and copying rules),
``frombuffer``, ``from_file`` (shared and private mappings), ``empty_strided``, ``empty_permuted`` and
the deprecated, end-inclusive ``range``."""

import numpy as np
import pytest
import torch

import munet


def test_asarray_shares_tensors_and_arrays():
    t = munet.ones(3)
    assert munet.asarray(t) is t
    array = np.arange(4, dtype=np.float32)
    shared = munet.asarray(array)
    array[0] = 9.0
    assert shared[0].item() == 9.0
    copied = munet.asarray(array, copy=True)
    array[1] = 7.0
    assert copied[1].item() == 1.0
    assert munet.asarray(t, dtype=munet.float64).dtype is munet.float64
    with pytest.raises(ValueError, match="can't alias"):
        munet.asarray(t, dtype=munet.float64, copy=False)
    with pytest.raises(ValueError, match="can't alias"):
        munet.asarray([1, 2], copy=False)


@pytest.mark.parametrize(
    "data", [[1, 2], [1.0, 2.5], 3, 3.5, True, [[True, False]], np.ones(2, np.float64), np.arange(3), np.float64(2.5)]
)
def test_asarray_dtypes_match_torch(data):
    ours, theirs = munet.asarray(data), torch.asarray(data)
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_asarray_buffers_and_requires_grad():
    buffer = bytearray(np.arange(3, dtype=np.float32).tobytes())
    ours = munet.asarray(buffer, dtype=munet.float32)
    theirs = torch.asarray(buffer, dtype=torch.float32)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    buffer[0:4] = np.float32(5.0).tobytes()
    assert ours[0].item() == 5.0
    assert munet.asarray([1.0, 2.0], requires_grad=True).requires_grad


def test_frombuffer_matches_torch():
    buffer = bytearray(np.arange(6, dtype=np.int32).tobytes())
    for kwargs in ({}, {"count": 2, "offset": 4}):
        ours = munet.frombuffer(buffer, dtype=munet.int32, **kwargs)
        theirs = torch.frombuffer(buffer, dtype=torch.int32, **kwargs)
        assert ours.tolist() == theirs.tolist()
    ours = munet.frombuffer(buffer, dtype=munet.int32)
    ours[5] = 42
    assert np.frombuffer(bytes(buffer), dtype=np.int32)[5] == 42
    with pytest.raises(ValueError, match="offset"):
        munet.frombuffer(buffer, dtype=munet.int32, offset=len(buffer))
    with pytest.raises(ValueError, match="multiple of the element size"):
        munet.frombuffer(bytearray(6), dtype=munet.int32)


def test_from_file_private_and_shared(tmp_path):
    path = tmp_path / "values.bin"
    path.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    private = munet.from_file(str(path), size=4, dtype=munet.float32)
    assert private.tolist() == torch.from_file(str(path), size=4, dtype=torch.float32).tolist()
    private[0] = 9.0
    assert np.fromfile(path, dtype=np.float32)[0] == 0.0  # copy-on-write
    shared = munet.from_file(str(path), shared=True, size=4, dtype=munet.float32)
    shared[1] = 8.0
    del shared
    assert np.fromfile(path, dtype=np.float32)[1] == 8.0
    with pytest.raises(RuntimeError, match="smaller than the required mapping size <32>"):
        munet.from_file(str(path), size=8, dtype=munet.float32)
    created = tmp_path / "new.bin"
    grown = munet.from_file(str(created), shared=True, size=3)
    assert grown.tolist() == [0.0, 0.0, 0.0] and created.stat().st_size == 12


@pytest.mark.parametrize("size, stride", [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((4,), (2,)), ((2, 0), (1, 1)), ((), ())])
def test_empty_strided_matches_torch(size, stride):
    ours, theirs = munet.empty_strided(size, stride), torch.empty_strided(size, stride)
    assert ours.shape == theirs.shape and ours.stride() == theirs.stride() and ours.dtype is munet.float32
    assert munet.empty_strided(size, stride, dtype=munet.int64).dtype is munet.int64


@pytest.mark.parametrize("size, order", [((2, 3, 4), (0, 2, 1)), ((2, 3, 4, 5), (0, 2, 3, 1)), ((3,), (0,))])
def test_empty_permuted_matches_torch(size, order):
    ours, theirs = munet.empty_permuted(size, order), torch.empty_permuted(size, order)
    assert ours.shape == theirs.shape and ours.stride() == theirs.stride()
    with pytest.raises(RuntimeError, match="must be a permutation"):
        munet.empty_permuted((2, 3), (0, 0))


@pytest.mark.parametrize(
    "args, kwargs",
    [((1, 4), {}), ((0, 1, 0.3), {}), ((3, 0, -1), {}), ((1, 4), {"dtype": "int64"}), ((0, 1, 0.1), {})],
)
def test_range_matches_torch_with_inclusive_end(args, kwargs):
    mk = {k: getattr(munet, v) for k, v in kwargs.items()}
    tk = {k: getattr(torch, v) for k, v in kwargs.items()}
    with pytest.warns(UserWarning, match="munet.range is deprecated"):
        ours = munet.range(*args, **mk)
    with pytest.warns(UserWarning):
        theirs = torch.range(*args, **tk)
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_range_needs_an_end():
    with pytest.raises(TypeError):
        munet.range(5)
    with pytest.raises(TypeError):
        torch.range(5)

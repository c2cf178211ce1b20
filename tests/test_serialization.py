"""munet.save / munet.load: bit-exact round trips, validation before anything is returned, interop."""

import math
import os
import pickle
import struct

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import munet
import munet.nn as nn
from munet.serialization import CheckpointError
from tests.reference import to_torch

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool"]


def _special_values(dtype: str) -> munet.Tensor:
    if dtype == "bool":
        return munet.tensor([True, False, True])
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return munet.tensor(np.array([info.min, 0, info.max, 7], dtype=dtype))
    t = munet.tensor([0.0, -0.0, math.inf, -math.inf, 1.5, 3.0e-5], dtype=munet.float64).to(getattr(munet, dtype))
    if dtype in ("float32", "float64"):
        # A NaN with a non-default payload must survive bit for bit.
        arr = t.numpy().copy()
        bits = arr.view(np.uint32 if dtype == "float32" else np.uint64)
        bits[0] = 0x7FC12345 if dtype == "float32" else 0x7FF8000000ABCDEF
        t = munet.from_numpy(arr)
    return t


def _bits(t: munet.Tensor) -> bytes:
    return t.contiguous().numpy().tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips_bit_for_bit(tmp_path, dtype):
    t = _special_values(dtype)
    path = tmp_path / "t.safetensors"
    munet.save({"x": t, "view": t[::2]}, path)
    back = munet.load(path)
    assert back["x"].dtype is t.dtype and _bits(back["x"]) == _bits(t)
    assert _bits(back["view"]) == _bits(t[::2])


def test_nested_structures_round_trip(tmp_path):
    w = munet.randn(3, 2)
    obj = {
        "model": {"w": w, "b": munet.zeros(2)},
        "optimizer": {
            "state": {0: {"step": munet.tensor(3.0), "exp_avg": munet.ones(3, 2)}},
            "param_groups": [{"lr": 0.1, "params": [0]}],
        },
        "epoch": 7,
        "loss": float("nan"),
        "neg_zero": -0.0,
        "names": ("a", None, True),
        "dtype": munet.bfloat16,
        "same": w,
    }
    path = tmp_path / "ckpt.safetensors"
    munet.save(obj, path)
    back = munet.load(path)
    assert back["epoch"] == 7 and math.isnan(back["loss"]) and math.copysign(1, back["neg_zero"]) == -1
    assert back["names"] == ("a", None, True) and back["dtype"] is munet.bfloat16
    assert list(back["optimizer"]["state"]) == [0]
    assert back["optimizer"]["param_groups"][0]["params"] == [0]
    np.testing.assert_array_equal(back["model"]["w"].numpy(), w.numpy())
    assert back["same"] is back["model"]["w"]


def test_parameters_and_requires_grad_are_restored(tmp_path):
    p = nn.Parameter(munet.ones(2))
    munet.save({"p": p, "t": munet.ones(1, requires_grad=True)}, tmp_path / "p.st")
    back = munet.load(tmp_path / "p.st")
    assert isinstance(back["p"], nn.Parameter) and back["p"].requires_grad and back["t"].requires_grad


def test_write_is_atomic_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "a.safetensors"
    munet.save({"x": munet.ones(2)}, path)
    with pytest.raises(TypeError, match="cannot save an object of type object"):
        munet.save({"x": munet.zeros(2), "bad": object()}, path)
    assert munet.load(path)["x"].tolist() == [1.0, 1.0]
    assert os.listdir(tmp_path) == ["a.safetensors"]


def _corrupt(path, fn):
    raw = bytearray(path.read_bytes())
    path.write_bytes(bytes(fn(raw)))


def test_damaged_files_raise_clear_errors(tmp_path):
    path = tmp_path / "m.safetensors"
    munet.save({"w": munet.arange(100.0)}, path)
    size = path.stat().st_size

    _corrupt(path, lambda raw: raw[: size - 10])
    with pytest.raises(CheckpointError, match="truncated"):
        munet.load(path)

    munet.save({"w": munet.arange(100.0)}, path)

    def flip(raw):
        raw[-5] ^= 0x01
        return raw

    _corrupt(path, flip)
    with pytest.raises(CheckpointError, match="SHA-256"):
        munet.load(path)

    path.write_bytes(struct.pack("<Q", 10_000) + b"{}")
    with pytest.raises(CheckpointError, match="header size"):
        munet.load(path)

    header = b'{"w":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}'
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    with pytest.raises(CheckpointError, match="unknown dtype 'C64'"):
        munet.load(path)


def test_pickle_files_are_refused(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(CheckpointError, match="never unpickles"):
        munet.load(path)
    path.write_bytes(pickle.dumps({"w": [1, 2]}))
    with pytest.raises(CheckpointError, match="never unpickles"):
        munet.load(path)


def test_safetensors_interop_both_ways(tmp_path):
    weights = {"a": torch.randn(3, 4), "b": torch.arange(5), "c": torch.randn(2).to(torch.bfloat16)}
    save_file(weights, tmp_path / "torch.safetensors")
    back = munet.load(tmp_path / "torch.safetensors")
    assert set(back) == {"a", "b", "c"}
    for k, v in weights.items():
        assert torch.equal(to_torch(back[k]), v)
    sd = {"w": munet.randn(2, 3), "i": munet.arange(4), "h": munet.ones(2, dtype=munet.bfloat16)}
    munet.save(sd, tmp_path / "munet.safetensors")
    loaded = load_file(tmp_path / "munet.safetensors")
    for k, v in sd.items():
        assert torch.equal(loaded[k], to_torch(v))


def test_bad_file_leaves_model_unchanged(tmp_path):
    model = nn.Sequential(nn.Module())
    model.register_parameter("w", nn.Parameter(munet.ones(3)))
    path = tmp_path / "m.safetensors"
    munet.save({"w": munet.zeros(4)}, path)
    with pytest.raises(RuntimeError, match="size mismatch for w"):
        model.load_state_dict(munet.load(path))
    assert model.w.tolist() == [1.0, 1.0, 1.0]

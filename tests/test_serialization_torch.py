"""munet.load on torch.save zip checkpoints: compared with torch.load, malicious pickles refused, fuzzed."""

import io
import os
import pickle
import random
import zipfile

import numpy as np
import pytest
import torch

import munet
from munet.serialization import CheckpointError
from tests.mutations import mutate


def _to_numpy(t):
    return np.asarray(t.detach().float().numpy() if t.dtype == torch.bfloat16 else t.detach().numpy())


def _assert_same(ours, theirs):
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, munet.Tensor)
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.stride() == theirs.stride()
        assert ours.storage_offset() == theirs.storage_offset()
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
        assert ours.requires_grad == theirs.requires_grad
        assert isinstance(ours, munet.nn.Parameter) == isinstance(theirs, torch.nn.Parameter)
        mine = ours.detach().float().numpy() if ours.dtype == munet.bfloat16 else ours.detach().numpy()
        np.testing.assert_array_equal(mine, _to_numpy(theirs))
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs)
        for k in theirs:
            _assert_same(ours[k], theirs[k])
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b)
    else:
        assert ours == theirs


def _checkpoint():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    model(torch.randn(5, 4)).sum().backward()
    opt.step()
    w = torch.randn(4, 6)
    tensors = {
        "w": w,
        "view": w[1:, 2:5],
        "t": w.t(),
        "f64": torch.randn(3, dtype=torch.float64),
        "f16": torch.randn(3).half(),
        "bf16": torch.randn(3).bfloat16(),
        "i64": torch.arange(4),
        "i32": torch.arange(3, dtype=torch.int32),
        "i16": torch.arange(3, dtype=torch.int16),
        "i8": torch.arange(-2, 2, dtype=torch.int8),
        "u8": torch.arange(3, dtype=torch.uint8),
        "bool": torch.tensor([True, False]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "grad": torch.ones(2, requires_grad=True),
        "param": torch.nn.Parameter(torch.randn(2)),
    }
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "tensors": tensors,
        "epoch": 3,
        "x": (1.5, None),
    }


def _saved(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("mmap", [False, True])
def test_torch_checkpoint_matches_torch_load(tmp_path, mmap):
    path = tmp_path / "ckpt.pt"
    torch.save(_checkpoint(), path)
    ours = munet.load(path, mmap=mmap)
    _assert_same(ours, torch.load(path, weights_only=True))
    assert ours["model"]._metadata == torch.load(path)["model"]._metadata
    ours["tensors"]["w"][1, 2] = 100.0  # views share the storage, as in torch
    assert ours["tensors"]["view"][0, 0].item() == 100.0 and ours["tensors"]["t"][2, 1].item() == 100.0


def test_stream_and_map_location(tmp_path):
    raw = _saved({"a": torch.randn(2, 3)})
    stream = io.BytesIO(b"xx" + raw)
    stream.seek(2)
    ours = munet.load(stream, map_location="cpu")
    _assert_same(ours, torch.load(io.BytesIO(raw)))


def test_big_endian_checkpoint(tmp_path):
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    raw = _saved({"t": t})
    src = zipfile.ZipFile(io.BytesIO(raw))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("/byteorder"):
                data = b"big"
            elif "/data/" in info.filename:
                data = np.frombuffer(data, dtype="<f4").astype(">f4").tobytes()
            dst.writestr(info.filename, data)
    _assert_same(munet.load(io.BytesIO(out.getvalue())), torch.load(io.BytesIO(out.getvalue())))


def test_whole_module_refused_with_state_dict_hint(tmp_path):
    path = tmp_path / "model.pt"
    torch.save(torch.nn.Linear(2, 3), path)
    with pytest.raises(CheckpointError, match=r"model\.pt.*torch\.nn\.modules\.linear\.Linear.*state_dict"):
        munet.load(path)


class _System:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


class _Eval:
    def __init__(self, code):
        self.code = code

    def __reduce__(self):
        return (eval, (self.code,))


def _with_pickle(payload: bytes) -> bytes:
    """A torch.save archive whose data.pkl is replaced by ``payload``."""
    src = zipfile.ZipFile(io.BytesIO(_saved({"w": torch.ones(2)})))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, payload if info.filename.endswith("data.pkl") else src.read(info))
    return out.getvalue()


@pytest.mark.parametrize("kind", ["os.system", "eval", "builtins.getattr"])
def test_malicious_pickles_refused_without_executing(tmp_path, kind):
    marker = tmp_path / "pwned"
    if kind == "os.system":
        payload = pickle.dumps({"w": _System(f"touch {marker}")}, protocol=2)
        name = "system"
    elif kind == "eval":
        payload = pickle.dumps([_Eval(f"open({str(marker)!r}, 'w')")], protocol=2)
        name = "eval"
    else:
        payload = b"cbuiltins\ngetattr\n(cos\nsystem\nS'x'\ntR."
        name = "getattr"
    path = tmp_path / "evil.pt"
    path.write_bytes(_with_pickle(payload))
    with pytest.raises(CheckpointError, match=rf"evil\.pt.*{name}"):
        munet.load(path)
    assert not marker.exists()
    if kind != "builtins.getattr":  # the same file does run code under a plain unpickler
        with zipfile.ZipFile(path) as archive:
            pickle.loads(archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl"))))
        assert marker.exists() or kind == "os.system" and os.system("true") != 0


def _picklemutate(raw: bytes, rng: random.Random) -> bytes:
    """Damage data.pkl itself and store it with a valid CRC, so the unpickler sees the damage."""
    src = zipfile.ZipFile(io.BytesIO(raw))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info.filename, mutate(data, rng) if info.filename.endswith("data.pkl") else data)
    return out.getvalue()


def test_seeded_fuzz_refuses_or_loads_the_same():
    rng = random.Random(4321)
    obj = _checkpoint()
    raw = _saved(obj)
    expected = torch.load(io.BytesIO(raw), weights_only=True)
    for i in range(40):  # each case runs a whole load: 40 keep the test to seconds
        damaged = mutate(raw, rng) if i % 2 else _picklemutate(raw, rng)
        stream = io.BytesIO(damaged)
        stream.name = "fuzzed.pt"
        try:
            result = munet.load(stream)
        except CheckpointError as exc:
            assert "fuzzed.pt" in str(exc)
            continue
        if i % 2:  # raw damage that loads touched only unchecked zip fields: the same result
            _assert_same(result, expected)

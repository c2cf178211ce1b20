"""munet.save / munet.load: bit-exact round trips, validation before anything is returned, interop."""

import hashlib
import io
import json
import math
import mmap
import os
import pickle
import signal
import stat
import struct
import threading

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

    header = b'{"w":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[0,1]}}'
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0")
    with pytest.raises(CheckpointError, match="unknown dtype 'F8_E5M2'"):
        munet.load(path)


def test_pickle_files_are_refused(tmp_path):
    path = tmp_path / "model.pt"
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


# tamper evidence -----------------------------------------------------------------------------------


def _split(raw: bytes) -> tuple[str, bytes]:
    (n,) = struct.unpack("<Q", raw[:8])
    return raw[8 : 8 + n].decode(), raw[8 + n :]


def _join(header: str, data: bytes) -> bytes:
    text = header.encode()
    return struct.pack("<Q", len(text)) + text + data


def _edit_header(path, old: str, new: str) -> None:
    header, data = _split(path.read_bytes())
    assert old in header
    edited = header.rstrip(" ").replace(old, new, 1)
    path.write_bytes(_join(edited + " " * (-len(edited) % 8), data))  # padded as MuNet pads


def _bn_checkpoint(path):
    munet.save({"bn": {"weight": munet.ones(3), "running_mean": munet.zeros(3)}, "half": munet.ones(2, 3).half()}, path)


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('"name\\":\\"bn.weight', '"name\\":\\"bn.running_mean', "digest"),  # running_mean lands in bn.weight
        ('"dtype":"F16"', '"dtype":"BF16"', "digest"),
        ('"shape":[2,3]', '"shape":[3,2]', "digest"),
        ('{"__metadata__":', '{"__metadata__":{},"__metadata__":', "duplicate key '__metadata__'"),
        ('"munet.manifest"', '"munet.manifesu"', "no 'munet.manifest'"),
        ('"munet.manifest"', '"nunet.manifest"', "has 'munet.digest' but no 'munet.manifest'"),
        ('"munet.digest"', '"nunet.digest"', "format version 2\\) but no 'munet.digest'"),
        ('{"__metadata__"', '{ "__metadata__"', "canonical"),
    ],
)
def test_edited_headers_are_refused(tmp_path, old, new, message):
    path = tmp_path / "bn.safetensors"
    _bn_checkpoint(path)
    _edit_header(path, old, new)
    with pytest.raises(CheckpointError, match=f"{path}: .*{message}"):
        munet.load(path)


def test_user_metadata_cannot_use_the_munet_prefix(tmp_path):
    with pytest.raises(ValueError, match="keys starting with 'munet.' are reserved"):
        munet.save({"w": munet.ones(1)}, tmp_path / "m.munet", metadata={"munet.digest": "x"})
    assert not os.listdir(tmp_path)


def test_plain_safetensors_files_from_other_writers_still_load(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 2], dtype=np.int64)}
    safetensors_numpy.save_file(arrays, tmp_path / "np.safetensors", metadata={"format": "np"})
    back = munet.load(tmp_path / "np.safetensors")
    assert set(back) == {"a", "b"} and back["a"].tolist() == arrays["a"].tolist() and back["b"].tolist() == [1, 2]


def test_a_version_1_file_without_a_digest_still_loads(tmp_path):
    """Files written before the header digest (format version 1): per-tensor hashes only."""
    data = np.arange(3, dtype=np.float32).tobytes()
    tree = {"t": "dict", "k": [{"t": "str", "v": "w"}], "v": [{"t": "tensor", "name": "w", "requires_grad": False}]}
    digest = hashlib.sha256(data).hexdigest()
    manifest = json.dumps({"format": "munet", "version": 1, "tree": tree, "sha256": {"w": digest}})
    header = {
        "__metadata__": {"munet.manifest": manifest},
        "w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
    }
    text = json.dumps(header, separators=(",", ":"))
    path = tmp_path / "v1.safetensors"
    path.write_bytes(_join(text + " " * (-len(text) % 8), data))
    assert munet.load(path)["w"].tolist() == [0.0, 1.0, 2.0]


# malformed files -----------------------------------------------------------------------------------


def _forge(path, manifest_text: str, tensors: dict | None = None, data: bytes = b"") -> None:
    """A file with a valid digest around ``manifest_text``, built from the documented format."""
    metadata = {"munet.manifest": manifest_text, "munet.digest": "0" * 64}
    header = {"__metadata__": metadata, **(tensors or {})}

    def canonical():
        text = json.dumps(header, separators=(",", ":")).encode()
        return text + b" " * (-len(text) % 8)

    blank = canonical()
    metadata["munet.digest"] = hashlib.sha256(struct.pack("<Q", len(blank)) + blank).hexdigest()
    text = canonical()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def _manifest(tree, version=2, sha256=None) -> str:
    return json.dumps({"format": "munet", "version": version, "tree": tree, "sha256": sha256 or {}})


_W = {"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
_W_HASH = {"w": hashlib.sha256(b"\0" * 4).hexdigest()}


def _plain(path, header: str, data: bytes = b"") -> None:
    path.write_bytes(_join(header, data))


@pytest.mark.parametrize(
    "write, message",
    [
        (lambda p: _plain(p, '{"a":' + "[" * 1000 + "]" * 1000 + "}"), "header is nested too deeply"),
        (lambda p: _forge(p, "[" * 1000 + "]" * 1000), "manifest is nested too deeply"),
        (lambda p: _forge(p, _manifest({"t": "none"}, version="1")), "version must be an integer, got '1'"),
        (
            lambda p: _forge(p, _manifest({"t": "tensor", "name": ["w"]}, sha256=_W_HASH), _W, b"\0" * 4),
            r"refers to tensor \['w'\]",
        ),
        (lambda p: _forge(p, _manifest({"t": "dtype", "v": ["float32"]})), r"unknown dtype \['float32'\]"),
        (
            lambda p: _plain(p, '{"w":{"dtype":["F32"],"shape":[1],"data_offsets":[0,4]}}', b"\0" * 4),
            r"tensor 'w' has unknown dtype \['F32'\]",
        ),
        (
            lambda p: _plain(p, '{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}'),
            "element count overflows int64",
        ),
        (
            lambda p: _plain(p, '{"w":{"dtype":"F32","shape":[true],"data_offsets":[0,4]}}', b"\0" * 4),
            "invalid shape",
        ),
        (lambda p: _plain(p, '{"w":{"dtype":"F32","shape":[NaN],"data_offsets":[0,4]}}'), "NaN is not a JSON number"),
    ],
)
def test_malformed_files_raise_checkpoint_errors(tmp_path, write, message):
    path = tmp_path / "bad.safetensors"
    write(path)
    with pytest.raises(CheckpointError, match=f"{path}: .*{message}"):
        munet.load(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
def test_a_fifo_or_directory_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    outcome = []

    def load():
        try:
            munet.load(fifo)
        except Exception as exc:  # noqa: BLE001 - reported below
            outcome.append(exc)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # it opened the FIFO and blocks: give it a writer so the thread ends
        with open(fifo, "wb"):
            pass
        reader.join()
        pytest.fail("munet.load opened a FIFO for reading and blocked")
    assert isinstance(outcome[0], CheckpointError) and "not a regular file (a FIFO)" in str(outcome[0])
    with pytest.raises(CheckpointError, match="not a regular file \\(a directory\\)"):
        munet.load(tmp_path)


# saving: temporaries, links, modes, file objects, mmap ------------------------------------------------------


def _killed_save(path) -> int:
    """Run ``munet.save`` in a forked child killed by SIGKILL once its temporary is written; the status."""
    pid = os.fork()
    if pid == 0:  # the child: die before the rename, as a killed job does
        try:
            os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
            munet.save({"w": munet.ones(1000)}, path)
        finally:
            os._exit(1)
    return os.waitpid(pid, 0)[1]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_the_next_save_removes_the_temporary_of_a_killed_save(tmp_path):
    from munet.serialization import _temporary_name

    path = tmp_path / "a.munet"
    status = _killed_save(path)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    (leftover,) = os.listdir(tmp_path)
    assert leftover.startswith(".munet-save")
    live = tmp_path / _temporary_name("a.munet")  # a save in progress in this (live) process
    other = tmp_path / (leftover.replace("a.munet", "b.munet", 1))  # another target's
    live.write_bytes(b"")
    other.write_bytes(b"")
    munet.save({"w": munet.zeros(2)}, path)
    assert sorted(os.listdir(tmp_path)) == sorted(["a.munet", live.name, other.name])
    assert munet.load(path)["w"].tolist() == [0.0, 0.0]


def test_save_writes_through_a_symlink_and_keeps_the_mode(tmp_path):
    target = tmp_path / "real.munet"
    munet.save({"w": munet.ones(1)}, target)
    os.chmod(target, 0o644)
    link = tmp_path / "link.munet"
    link.symlink_to(target)
    old = os.umask(0o077)
    try:
        munet.save({"w": munet.zeros(1)}, link)
    finally:
        os.umask(old)
    assert link.is_symlink() and munet.load(target)["w"].tolist() == [0.0]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert sorted(os.listdir(tmp_path)) == ["link.munet", "real.munet"]


def test_a_new_file_follows_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        munet.save({"w": munet.ones(1)}, tmp_path / "new.munet")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.munet").st_mode) == 0o644


def test_save_and_load_accept_file_objects(tmp_path):
    obj = {"w": munet.arange(4.0), "step": 3, "names": ("a", None)}
    buffer = io.BytesIO()
    munet.save(obj, buffer)
    buffer.seek(0)
    back = munet.load(buffer)
    assert back["w"].tolist() == [0.0, 1.0, 2.0, 3.0] and back["step"] == 3 and back["names"] == ("a", None)
    with open(tmp_path / "f.munet", "wb") as f:
        munet.save(obj, f)
    with open(tmp_path / "f.munet", "rb") as f:
        assert munet.load(f)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    with open(tmp_path / "f.munet", "rb") as f, pytest.raises(ValueError, match="not open for writing"):
        munet.save(obj, f)
    with open(tmp_path / "t.txt", "w") as f, pytest.raises(TypeError, match="text stream; open it in binary mode"):
        munet.save(obj, f)
    with open(tmp_path / "f.munet") as f, pytest.raises(TypeError, match="text stream; open it in binary mode"):
        munet.load(f)


def _owner(array):
    """The object that owns an array's memory."""
    while isinstance(array, (np.ndarray, memoryview)):
        array = array.base if isinstance(array, np.ndarray) else array.obj
    return array


def test_mmap_maps_the_file_copy_on_write(tmp_path):
    path = tmp_path / "m.munet"
    w = munet.randn(64, 32)
    munet.save({"w": w, "i": munet.arange(5)}, path)
    back = munet.load(path, mmap=True)
    np.testing.assert_array_equal(back["w"].numpy(), w.numpy())
    assert back["i"].tolist() == [0, 1, 2, 3, 4]
    assert isinstance(_owner(back["w"].numpy()), mmap.mmap)  # a view of the mapping, not a copy
    back["w"].mul_(0.0)  # private pages: the file keeps its bytes
    np.testing.assert_array_equal(munet.load(path)["w"].numpy(), w.numpy())
    again = munet.load(path, mmap=True)
    munet.save({"w": munet.ones(64, 32), "i": munet.zeros(5, dtype=munet.int64)}, path)  # replaced by rename
    np.testing.assert_array_equal(again["w"].numpy(), w.numpy())
    assert again["i"].tolist() == [0, 1, 2, 3, 4] and munet.load(path)["w"].sum().item() == 64 * 32
    with pytest.raises(ValueError, match="mmap=True needs a file path"):
        munet.load(io.BytesIO(path.read_bytes()), mmap=True)

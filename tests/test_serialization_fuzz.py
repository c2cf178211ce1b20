"""munet.load on damaged files: every single-byte change to a MuNet-written file is refused.

Exhaustive on small files of each kind (state dict, nested training-state-like dict, compiled
program): every offset with three replacement bytes, plus a byte removed or inserted at every
offset. Seeded and bounded on larger files: random flips, bursts, insertions, deletions and
truncations. A damaged file must raise ``CheckpointError`` naming the file, nothing else.
"""

import io
import os
import random

import pytest

import munet
import munet.nn as nn
from munet.serialization import CheckpointError
from tests.compiler.models import train_step
from tests.mutations import mutate

REPLACEMENTS = (0x01, 0x20, 0x80)  # lowest bit, ASCII case, high bit


def _small_state_dict():
    munet.manual_seed(0)
    return {"w": munet.randn(2, 3), "b": munet.arange(3), "h": munet.ones(2, dtype=munet.float16)}


def _small_nested():
    munet.manual_seed(0)
    w = nn.Parameter(munet.randn(2))
    return {
        "model": {"w": w, "bn.running_mean": munet.zeros(2)},
        "optimizer": {"state": {0: {"step": munet.tensor(3.0)}}, "param_groups": [{"lr": 0.1, "params": [0]}]},
        "epoch": 7,
        "loss": 0.25,
        "names": ("a", None, True),
        "dtype": munet.bfloat16,
        "same": w,
    }


def _small_program():
    munet.manual_seed(0)
    x = munet.randn(3, 2)
    f = munet.compile(lambda x: (x * 2.5).sum(0))
    f(x)
    return f


def _large_objects():
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10))
    opt = munet.optim.AdamW(model.parameters(), lr=1e-2)
    compiled = munet.compile(train_step)
    x, y = munet.randn(8, 64), munet.randint(0, 10, (8,))
    for _ in range(2):
        compiled(model, opt, x, y)
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "metrics": [0.5, 0.25]}
    return {"state_dict": model.state_dict(), "training_state": state, "program": compiled}


def _saved_bytes(obj, metadata=None) -> bytes:
    buffer = io.BytesIO()
    munet.save(obj, buffer, metadata=metadata)
    return buffer.getvalue()


def _assert_refused(raw: bytes, path) -> None:
    path.write_bytes(raw)
    _assert_load_refused(path, str(path))


def _assert_stream_refused(raw: bytes, name: str) -> None:
    stream = io.BytesIO(raw)
    stream.name = name
    _assert_load_refused(stream, name)


def _assert_load_refused(f, name: str) -> None:
    with pytest.raises(CheckpointError) as info:
        munet.load(f)
    assert name in str(info.value)


@pytest.mark.parametrize("make", [_small_state_dict, _small_nested, _small_program])
def test_every_single_byte_change_is_refused(tmp_path, make):
    raw = _saved_bytes(make(), metadata={"run": "r1"})  # user metadata sits between the two marks
    path = tmp_path / "damaged.munet"
    path.write_bytes(raw)
    munet.load(path)  # the intact file loads
    fd = os.open(path, os.O_WRONLY)
    try:
        for offset in range(len(raw)):
            for bits in REPLACEMENTS:  # changed in place: rewriting the file each time is slow
                os.pwrite(fd, bytes([raw[offset] ^ bits]), offset)
                _assert_load_refused(path, str(path))
            os.pwrite(fd, raw[offset : offset + 1], offset)
            _assert_stream_refused(raw[:offset] + raw[offset + 1 :], "removed")
            _assert_stream_refused(raw[:offset] + b" " + raw[offset:], "inserted")
    finally:
        os.close(fd)
    _assert_stream_refused(raw + b" ", "appended")


def test_seeded_fuzz_of_larger_files(tmp_path):
    rng = random.Random(1234)
    for kind, obj in _large_objects().items():
        raw = _saved_bytes(obj)
        munet.load(io.BytesIO(raw))
        for i in range(160):
            damaged = mutate(raw, rng)
            if damaged == raw:  # a burst may write the bytes that were there
                continue
            if i % 16:
                _assert_stream_refused(damaged, kind)
            else:
                _assert_refused(damaged, tmp_path / f"{kind}.munet")

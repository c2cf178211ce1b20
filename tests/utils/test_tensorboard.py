"""SummaryWriter: the event files it writes, read back with TensorBoard's EventAccumulator."""

import os

import numpy as np
import pytest

import munet
from munet.utils.tensorboard import SummaryWriter

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def _read(path):
    acc = event_accumulator.EventAccumulator(str(path), size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    return acc


def test_scalars_text_and_histogram(tmp_path):
    values = np.random.default_rng(0).normal(size=1000)
    with SummaryWriter(tmp_path) as writer:
        for step in range(3):
            writer.add_scalar("loss", munet.tensor(1.0 / (step + 1)), step)
        writer.add_text("notes", "hello **tensorboard**", 0)
        writer.add_histogram("weights", munet.tensor(values), 5)
        writer.add_histogram("counted", values, 6, bins=10)
        writer.flush()
    acc = _read(tmp_path)
    loss = acc.Scalars("loss")
    assert [e.step for e in loss] == [0, 1, 2]
    np.testing.assert_allclose([e.value for e in loss], [1.0, 0.5, 1 / 3], rtol=1e-6)
    text = acc.Tensors("notes/text_summary")[0]
    assert text.tensor_proto.string_val == [b"hello **tensorboard**"]
    histogram = acc.Histograms("weights")[0]
    assert histogram.step == 5
    h = histogram.histogram_value
    assert h.num == 1000 and sum(h.bucket) == 1000
    assert h.min == pytest.approx(values.min()) and h.max == pytest.approx(values.max())
    assert h.sum == pytest.approx(values.sum()) and h.sum_squares == pytest.approx(np.dot(values, values))
    counted = acc.Histograms("counted")[0].histogram_value
    expected_counts, expected_edges = np.histogram(values, bins=10)
    assert list(counted.bucket) == expected_counts.tolist()
    np.testing.assert_allclose(counted.bucket_limit, expected_edges[1:])


def test_add_scalars_writes_one_run_per_tag(tmp_path):
    writer = SummaryWriter(tmp_path)
    for step in range(2):
        writer.add_scalars("run/acc", {"train": 0.5 + step, "val": 0.25 + step}, step)
    writer.close()
    for tag, base in (("train", 0.5), ("val", 0.25)):
        acc = _read(os.path.join(tmp_path, f"run_acc_{tag}"))
        assert [(e.step, e.value) for e in acc.Scalars("run/acc")] == [(0, base), (1, base + 1)]


def test_default_log_dir_and_empty_histogram(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = SummaryWriter(comment="_lr0.1")
    assert writer.get_logdir().startswith("runs") and writer.get_logdir().endswith("_lr0.1")
    with pytest.raises(ValueError, match="add_histogram"):
        writer.add_histogram("empty", munet.zeros(0))
    writer.close()

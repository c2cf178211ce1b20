"""Running ONNX models in onnxruntime (the reference for munet.onnx) and comparing with MuNet.

Tolerance: float32 rtol=1e-5 with atol=1e-6 for values near zero (tests/reference.py's float32
tolerances): both runtimes compute the same float32 ops, in different orders.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

RTOL, ATOL = 1e-5, 1e-6


def run_ort(model, feeds: dict) -> list:
    """Outputs of ``model`` (a ModelProto) on ``feeds`` (name -> NumPy array) in onnxruntime on the CPU."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_matches(got, expected, rtol: float = RTOL, atol: float = ATOL) -> None:
    got = [g.detach().numpy() if hasattr(g, "detach") else np.asarray(g) for g in got]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        e = np.asarray(e)
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        assert g.shape == e.shape, (g.shape, e.shape)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)

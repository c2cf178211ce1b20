"""CUDA graphs (``munet.cuda.CUDAGraph``, ``graph``, ``make_graphed_callables``) on the fake devices.

The fake CuPy (``fake_cupy``) follows CUDA's capture rules: work issued on a capturing stream is
recorded, not run; a graph launch runs it on the memory named at capture; host synchronisations
invalidate the capture. So these tests check MuNet's side: what is issued on which stream, where
captured memory comes from, and that replays recompute from the static inputs.
``test_cuda_gpu.py`` runs the same on a GPU (marker ``cuda``).
"""

import numpy as np
import pytest

import munet
from tests.backends import fake_cupy

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")


def _randn(*shape, seed=0):
    return munet.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _step(x, w):
    return munet.tanh(x @ w) * 2 + 1


def test_a_captured_graph_replays_on_the_static_inputs():
    x, w = _randn(4, 5).cuda(), _randn(5, 3, seed=1).cuda()
    _step(x, w)  # warm-up: kernels loaded outside the capture
    g = munet.cuda.CUDAGraph()
    launches, gemms = len(fake_cupy.LAUNCHES), len(fake_cupy.GEMM_CALLS)
    with munet.cuda.graph(g):
        assert munet.cuda.is_current_stream_capturing()
        y = _step(x, w)
    assert not munet.cuda.is_current_stream_capturing()
    assert (len(fake_cupy.LAUNCHES), len(fake_cupy.GEMM_CALLS)) == (launches, gemms)  # recorded, not run
    for seed in (2, 3):
        new = _randn(4, 5, seed=seed)
        x.copy_(new.cuda())
        g.replay()
        np.testing.assert_allclose(y.cpu().numpy(), _step(new, w.cpu()).numpy(), rtol=1e-5, atol=1e-6)
    assert len(fake_cupy.GEMM_CALLS) == gemms + 2


def test_capture_memory_comes_from_the_graphs_private_pool():
    x = _randn(64, 64).cuda()
    (x * 2).sum()
    before = munet.cuda.memory_allocated()
    g = munet.cuda.CUDAGraph()
    with munet.cuda.graph(g):
        y = x * 3
    assert munet.cuda.memory_allocated() >= before + y.numel() * 4  # counted in the device's figures
    munet.cuda.empty_cache()  # a graph's pool keeps its blocks
    g.replay()
    np.testing.assert_allclose(y.cpu().numpy(), x.cpu().numpy() * 3, rtol=1e-6)
    z = x + 1  # outside the capture: the device pool, never the graph's
    assert z.data_ptr() != y.data_ptr()
    h = munet.cuda.CUDAGraph()
    with munet.cuda.graph(h, pool=g.pool()):
        x * 4
    assert h.pool() == g.pool()
    assert isinstance(munet.cuda.graph_pool_handle(), tuple)


def test_capture_rules():
    x = _randn(3).cuda()
    g = munet.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="non-default stream"):
        g.capture_begin()  # the current stream is the default one outside graph(...)
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.pool()
    with pytest.raises(RuntimeError, match="no graph captured"):
        g.replay()
    with pytest.raises(RuntimeError, match="not permitted when stream is capturing"):
        with munet.cuda.graph(g):
            (x * 2).sum().item()  # a host read inside a capture
    assert not munet.cuda.is_current_stream_capturing()
    with pytest.raises(ValueError, match="capture_error_mode"):
        with munet.cuda.graph(g, capture_error_mode="loose"):
            pass
    with munet.cuda.graph(g, capture_error_mode="relaxed"):
        y = x + 1
    g.replay()
    np.testing.assert_allclose(y.cpu().numpy(), x.cpu().numpy() + 1)
    with pytest.raises(RuntimeError, match="reset"):
        g.capture_begin()
    g.reset()
    with pytest.raises(RuntimeError, match="no graph captured"):
        g.replay()


def test_debug_dump_writes_the_graph(tmp_path):
    x = _randn(3).cuda()
    g = munet.cuda.CUDAGraph()
    g.enable_debug_mode()
    with munet.cuda.graph(g):
        x + 1
    g.debug_dump(str(tmp_path / "g.dot"))
    assert (tmp_path / "g.dot").read_text().startswith("digraph")


def test_make_graphed_callables_matches_eager_forward_and_backward():
    munet.manual_seed(0)
    model = munet.nn.Sequential(munet.nn.Linear(5, 4), munet.nn.Tanh(), munet.nn.Linear(4, 2))
    reference = munet.nn.Sequential(munet.nn.Linear(5, 4), munet.nn.Tanh(), munet.nn.Linear(4, 2))
    reference.load_state_dict(model.state_dict())
    model.cuda()
    sample = _randn(3, 5).cuda().requires_grad_()
    graphed = munet.cuda.make_graphed_callables(model, (sample,), num_warmup_iters=1)
    assert graphed is model
    for seed in (4, 5):
        x = _randn(3, 5, seed=seed)
        xc = x.cuda().requires_grad_()
        x.requires_grad_()
        model.zero_grad()
        reference.zero_grad()
        out = graphed(xc)
        want = reference(x)
        np.testing.assert_allclose(out.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
        (out * out).sum().backward()
        (want * want).sum().backward()
        np.testing.assert_allclose(xc.grad.cpu().numpy(), x.grad.numpy(), rtol=1e-5, atol=1e-6)
        for p, q in zip(model.parameters(), reference.parameters()):
            np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_make_graphed_callables_refuses_compiled_callables():
    compiled = munet.compile(lambda x: x * 2)
    with pytest.raises(TypeError, match="CUDA graph of its own"):
        munet.cuda.make_graphed_callables(compiled, (_randn(2).cuda(),))

"""``munet.compile`` on the fake cuda devices replays its plan as one CUDA graph
(``lower_cuda_graphs.GraphReplay``) into the device arena (``lower_cuda.CudaTarget``).

The fake CuPy records the work of a capture without running it and runs it at each graph launch
(``fake_cupy``), so equality with the eager cpu reference over several calls shows that the graph
replays the whole step on the right memory: the arguments copied into the graph's buffers, the
hyperparameters uploaded before each launch, the parameters and optimizer state updated in place.
"""

import numpy as np
import pytest

import munet
from tests.backends import fake_cupy

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")


def _data(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [munet.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]


def _models():
    munet.manual_seed(0)
    model = munet.nn.Sequential(munet.nn.Linear(8, 16), munet.nn.ReLU(), munet.nn.Linear(16, 3))
    reference = munet.nn.Sequential(munet.nn.Linear(8, 16), munet.nn.ReLU(), munet.nn.Linear(16, 3))
    reference.load_state_dict(model.state_dict())
    return model.cuda(), reference


def _step(model, opt, x, target):
    opt.zero_grad()
    loss = munet.nn.functional.mse_loss(model(x), target)
    loss.backward()
    opt.step()
    return loss


def _close(got, want):
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_training_step_replays_as_one_graph_with_a_new_learning_rate():
    model, reference = _models()
    opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = munet.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    compiled = munet.compile(lambda a, b: _step(model, opt, a, b))
    for call in range(6):
        if call == 4:  # a scheduler's change: read at each replay, not frozen in the graph
            for group in opt.param_groups + ref_opt.param_groups:
                group["lr"] = 0.05
        x, target = _data(call, (5, 8), (5, 3))
        gemms = len(fake_cupy.GEMM_CALLS)
        _close(compiled(x.cuda(), target.cuda()), _step(reference, ref_opt, x, target))
        assert len(fake_cupy.GEMM_CALLS) > gemms  # the matmuls ran (eagerly or in the graph's launch)
    stats = compiled.stats()
    assert stats["cuda_graphs"] is True, stats["cuda_graph"]
    assert "replayed" in stats["cuda_graph"] and stats["inplace_updates"] > 0
    assert stats["arena_bytes"] > 0 and stats["memory"]["planned_values"] > 0
    for p, q in zip(model.parameters(), reference.parameters()):
        _close(p, q)


def test_adam_and_a_moved_parameter():
    model, reference = _models()
    opt = munet.optim.Adam(model.parameters(), lr=0.01)
    ref_opt = munet.optim.Adam(reference.parameters(), lr=0.01)
    compiled = munet.compile(lambda a, b: _step(model, opt, a, b))
    for call in range(5):
        x, target = _data(10 + call, (5, 8), (5, 3))
        _close(compiled(x.cuda(), target.cuda()), _step(reference, ref_opt, x, target))
    for p, q in zip(model.parameters(), reference.parameters()):
        _close(p, q)
    # Adam's step count lives on the cpu (as in PyTorch): uploaded into the graph's buffer per call
    assert compiled.stats()["cuda_graphs"] is True, compiled.stats()["cuda_graph"]
    moved = munet.zeros_like(model[0].weight)
    moved.copy_(model[0].weight.detach())
    model[0].weight.data = moved  # the parameter's memory moves: the plan captures again
    for call in range(3):
        x, target = _data(40 + call, (5, 8), (5, 3))
        _close(compiled(x.cuda(), target.cuda()), _step(reference, ref_opt, x, target))
    for p, q in zip(model.parameters(), reference.parameters()):
        _close(p, q)
    assert "2 captures" in compiled.stats()["cuda_graph"], compiled.stats()["cuda_graph"]


def test_results_are_copies_the_next_replay_does_not_overwrite():
    compiled = munet.compile(lambda x: munet.tanh(x) * 3 + 1)
    results = []
    for call in range(4):
        (x,) = _data(20 + call, (4, 6))
        results.append((compiled(x.cuda()), x))
    assert compiled.stats()["cuda_graphs"] is True, compiled.stats()["cuda_graph"]
    for got, x in results:
        _close(got, munet.tanh(x) * 3 + 1)


def test_graph_capture_can_be_turned_off():
    for kwargs in ({"options": {"cuda_graphs": False}}, {"mode": "max-autotune-no-cudagraphs"}):
        compiled = munet.compile(lambda x: x * 2 + 1, **kwargs)
        for call in range(3):
            (x,) = _data(call, (3, 3))
            _close(compiled(x.cuda()), x * 2 + 1)
        assert compiled.stats()["cuda_graphs"] is False
        assert compiled.stats()["cuda_graph"] == "not requested"
    with pytest.raises(TypeError, match="cuda_graphs"):
        munet.compile(lambda x: x, options={"cuda_graphs": 1})


def test_a_plan_with_a_host_transfer_is_not_captured():
    def f(x):
        return (x.cpu() * 2).cuda() + 1

    compiled = munet.compile(f)
    for call in range(3):
        (x,) = _data(call, (3, 3))
        _close(compiled(x.cuda()), x * 2 + 1)
    assert compiled.stats()["cuda_graphs"] is False
    assert "host memory" in compiled.stats()["cuda_graph"]


def test_a_compiled_forward_and_its_backward():
    model, reference = _models()
    compiled = munet.compile(model)
    for call in range(4):
        x, _ = _data(30 + call, (5, 8), (1,))
        model.zero_grad()
        reference.zero_grad()
        got, want = compiled(x.cuda()), reference(x)
        _close(got, want)
        (got * got).sum().backward()
        (want * want).sum().backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            _close(p.grad, q.grad)
    assert compiled.stats()["cuda_graphs"] is True, compiled.stats()["cuda_graph"]


def test_a_compiled_plan_refuses_to_run_inside_a_user_capture():
    compiled = munet.compile(lambda x: x * 2 + 1)
    (x,) = _data(0, (3,))
    x = x.cuda()
    compiled(x)
    g = munet.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="inside a CUDA graph capture"):
        with munet.cuda.graph(g):
            compiled(x)


def test_a_new_argument_shape_is_not_replayed_on_the_old_graph():
    compiled = munet.compile(lambda x: (x * 2 + 1).sum(0))
    for call, rows in enumerate((4, 4, 4, 5, 5, 3)):
        (x,) = _data(50 + call, (rows, 6))
        _close(compiled(x.cuda()), (x * 2 + 1).sum(0))
    assert compiled.stats()["cuda_graph"], compiled.stats()

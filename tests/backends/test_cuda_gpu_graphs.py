"""CUDA graphs and compiled-plan replay on a GPU (marker ``cuda``: skipped without one, failing under
``MUNET_TEST_CUDA=1``; scripts/gpu_check.sh runs them). The same checks as
``test_cuda_graphs.py``/``test_cuda_compiled_graphs.py`` on the fake devices, against the real
driver: capture on a side stream, replay on new static inputs, the capture CUDA refuses, and whole
training steps replayed as one graph equal to the eager cpu reference."""

import numpy as np
import pytest

import munet

pytestmark = pytest.mark.cuda


def _randn(*shape, seed=0):
    return munet.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _close(got, want, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)


def _mse_step(model, opt, x, target):
    """One SGD/Adam training step of ``model`` on the mean squared error; the loss."""
    opt.zero_grad()
    loss = munet.nn.functional.mse_loss(model(x), target)
    loss.backward()
    opt.step()
    return loss


def _compiled_steps_match(model, opt, reference, ref_opt):
    """Six compiled cuda steps of ``model`` (replayed as one CUDA graph) equal eager cpu steps of ``reference``."""
    compiled = munet.compile(lambda a, b: _mse_step(model, opt, a, b))
    for call in range(6):
        x, target = _randn(16, 32, seed=call), _randn(16, 8, seed=100 + call)
        _close(compiled(x.cuda(), target.cuda()), _mse_step(reference, ref_opt, x, target))
    assert compiled.stats()["cuda_graphs"] is True, compiled.stats()["cuda_graph"]
    for p, q in zip(model.parameters(), reference.parameters()):
        _close(p, q)


def test_capture_and_replay():
    x, w = _randn(64, 32).cuda(), _randn(32, 16, seed=1).cuda()
    munet.tanh(x @ w) * 2 + 1  # warm-up
    g = munet.cuda.CUDAGraph()
    with munet.cuda.graph(g):
        assert munet.cuda.is_current_stream_capturing()
        y = munet.tanh(x @ w) * 2 + 1
    for seed in (2, 3):
        new = _randn(64, 32, seed=seed)
        x.copy_(new.cuda())
        g.replay()
        _close(y, munet.tanh(new @ w.cpu()) * 2 + 1)
    h = munet.cuda.CUDAGraph()
    with munet.cuda.graph(h, pool=g.pool()):
        z = y.sum()
    h.replay()
    _close(z, (munet.tanh(new @ w.cpu()) * 2 + 1).sum(), rtol=1e-4, atol=1e-3)


def test_a_host_read_invalidates_the_capture():
    x = _randn(8).cuda()
    g = munet.cuda.CUDAGraph()
    with pytest.raises(Exception):  # noqa: B017 - CuPy's or CUDA's own error, whatever its class
        with munet.cuda.graph(g):
            (x * 2).sum().item()
    assert not munet.cuda.is_current_stream_capturing()
    assert munet.equal((x * 2).cpu(), x.cpu() * 2)  # the device still works


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_a_compiled_training_step_replays_as_one_graph(optimizer):
    munet.manual_seed(0)
    model = munet.nn.Sequential(munet.nn.Linear(32, 64), munet.nn.ReLU(), munet.nn.Linear(64, 8))
    reference = munet.nn.Sequential(munet.nn.Linear(32, 64), munet.nn.ReLU(), munet.nn.Linear(64, 8))
    reference.load_state_dict(model.state_dict())
    model.cuda()
    kwargs = {"lr": 0.05, "momentum": 0.9} if optimizer == "SGD" else {"lr": 0.01}
    opt = getattr(munet.optim, optimizer)(model.parameters(), **kwargs)
    ref_opt = getattr(munet.optim, optimizer)(reference.parameters(), **kwargs)

    _compiled_steps_match(model, opt, reference, ref_opt)


def test_make_graphed_callables():
    munet.manual_seed(0)
    model = munet.nn.Sequential(munet.nn.Linear(16, 8), munet.nn.Tanh(), munet.nn.Linear(8, 4))
    reference = munet.nn.Sequential(munet.nn.Linear(16, 8), munet.nn.Tanh(), munet.nn.Linear(8, 4))
    reference.load_state_dict(model.state_dict())
    model.cuda()
    graphed = munet.cuda.make_graphed_callables(model, (_randn(4, 16).cuda().requires_grad_(),))
    x = _randn(4, 16, seed=7)
    xc = x.cuda().requires_grad_()
    x.requires_grad_()
    out, want = graphed(xc), reference(x)
    _close(out, want)
    out.square().sum().backward()
    want.square().sum().backward()
    _close(xc.grad, x.grad)
    for p, q in zip(model.parameters(), reference.parameters()):
        _close(p.grad, q.grad)


def test_memory_fraction_and_pools():
    total = munet.cuda.get_device_properties().total_memory
    munet.cuda.set_per_process_memory_fraction(0.5)
    try:
        with pytest.raises(munet.OutOfMemoryError, match="set_per_process_memory_fraction"):
            munet.empty(int(total * 0.6) // 4, device="cuda")
    finally:
        munet.cuda.set_per_process_memory_fraction(1.0)
    pool = munet.cuda.MemPool()
    with munet.cuda.use_mem_pool(pool):
        x = munet.ones(1 << 20, device="cuda")
    assert pool.used_bytes() >= x.numel() * 4


def _noisy(x):
    return munet.nn.functional.dropout(x, 0.5, True) * 2 + munet.randn(x.shape, device=x.device)


def test_a_compiled_step_with_random_ops_replays_the_eager_draws():
    """Random kernels in the graph read (key, counter) from device slots filled before each launch
    (test_cuda_graph_random.py on the fake devices): every replay draws the eager step's numbers,
    and reseeding between replays takes effect."""
    compiled = munet.compile(_noisy)
    x = munet.ones(4096, device="cuda")
    seeds = (3, None, None, None, 8, None)  # reseeded before the first and the fifth call
    got, want = [], []
    for run, outputs in ((compiled, got), (_noisy, want)):
        for seed in seeds:
            if seed is not None:
                munet.cuda.manual_seed(seed)
            outputs.append(run(x).cpu())
    stats = compiled.stats()
    assert stats["cuda_graphs"] is True and "random kernels" in stats["cuda_graph"], stats["cuda_graph"]
    for a, b in zip(got, want):
        _close(a, b, rtol=1e-6, atol=1e-6)  # the same kernels, by value or from the slots
    assert not munet.equal(got[3], got[2])


def _dropout_mlps(p: float):
    """A cuda MLP with dropout ``p`` and its cpu twin holding the same parameters."""
    munet.manual_seed(0)
    model, reference = (
        munet.nn.Sequential(munet.nn.Linear(32, 64), munet.nn.ReLU(), munet.nn.Dropout(p), munet.nn.Linear(64, 8))
        for _ in range(2)
    )
    reference.load_state_dict(model.state_dict())
    return model.cuda(), reference


def test_a_compiled_dropout_training_step_matches_the_eager_cpu_step():
    model, reference = _dropout_mlps(0.25)
    opt = munet.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ref_opt = munet.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)

    munet.manual_seed(5)  # the cpu and cuda generators draw the same bernoulli stream from here
    _compiled_steps_match(model, opt, reference, ref_opt)
    _close(munet.rand(7, device="cuda"), munet.rand(7), rtol=0, atol=0)  # the generators advanced alike


def _region(x):
    return (
        munet.nn.functional.dropout(x, 0.5, True),
        x * munet.rand(x.shape, device=x.device),
        munet.randn(513, device=x.device),
        munet.empty(257, dtype=munet.float64, device=x.device).normal_(1.0, 2.0),
    )


def test_a_user_capture_with_random_ops_replays_the_eager_draws():
    """A user's ``munet.cuda.graph`` capture of random ops (test_cuda_user_graph_random.py on the
    fake devices): each replay draws what the region run eagerly after the same seed draws, the
    generator ends where the eager runs leave it, and a reseed between replays takes effect."""
    x = _randn(64, 33).cuda()
    _region(x)  # warm-up
    g = munet.cuda.CUDAGraph()
    with munet.cuda.graph(g):
        outs = _region(x)
    assert g.random_draws() == 4
    seeds = (3, None, None, 8, None)  # reseeded before the first and the fourth replay
    got, want = [], []
    for seed in seeds:
        if seed is not None:
            munet.cuda.manual_seed(seed)
        g.replay()
        got.append([o.cpu() for o in outs])
    got_next = munet.rand(9, device="cuda").cpu()
    for seed in seeds:
        if seed is not None:
            munet.cuda.manual_seed(seed)
        want.append([o.cpu() for o in _region(x)])
    want_next = munet.rand(9, device="cuda").cpu()
    for a, b in zip(got, want, strict=True):
        for u, v in zip(a, b, strict=True):
            assert munet.equal(u, v)  # the same kernels, by value or from the slots
    for k in range(len(outs)):
        assert not munet.equal(got[2][k], got[1][k]), k
    assert munet.equal(got_next, want_next)


def test_make_graphed_callables_with_dropout_matches_eager_on_the_device():
    model, reference = _dropout_mlps(0.3)
    reference.cuda()
    graphed = munet.cuda.make_graphed_callables(model, (_randn(16, 32).cuda().requires_grad_(),))
    runs = []
    for module in (graphed, reference):
        munet.cuda.manual_seed(6)
        outputs = []
        for _ in range(4):  # one input: the calls differ by their dropout masks
            module.zero_grad()
            x = _randn(16, 32, seed=1).cuda().requires_grad_()
            out = module(x)
            out.square().sum().backward()
            outputs.append([out.detach().cpu(), x.grad.cpu(), *(p.grad.cpu() for p in module.parameters())])
        runs.append(outputs)
    for a, b in zip(*runs, strict=True):
        for u, v in zip(a, b, strict=True):
            _close(u, v, rtol=1e-5, atol=1e-5)
    assert not munet.equal(runs[0][1][0], runs[0][0][0])  # a new dropout mask at each call

"""Random ops in a compiled cuda plan replayed as one CUDA graph (``lower_cuda_graphs.GraphReplay``,
``kernels_draws.PhiloxSlots``): each random kernel reads its Philox ``(key, counter)`` from a
device slot that is filled from the generator before every launch of the graph.

The fake CuPy records a capture's work without running it and runs it at each launch, with the
pointers of the capture (``fake_cupy``), so a slot that were not refilled, or a counter frozen as a
launch argument, would repeat the first replay's numbers: every test compares several replays with
the step run eagerly after the same seed (values, parameters, the generator's next draw), and checks
that consecutive replays differ. GPU versions: ``test_cuda_gpu_graphs.py`` (marker ``cuda``).
"""

import re

import numpy as np
import pytest

import munet
from munet.backends.cuda import kernels_random as R
from munet.backends.cuda import launch
from munet.backends.cuda.registry import KERNELS
from tests.backends import fake_cupy

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")

CALLS = 6


def _replays(compiled, at_least: int = CALLS - 2) -> None:
    """The plan replays as one graph, ``at_least`` times (a training step's first call traces again
    once the optimizer holds its state), its random kernels reading their counters from slots."""
    text = compiled.stats()["cuda_graph"]
    assert compiled.stats()["cuda_graphs"] is True, text
    assert int(re.search(r"replayed (\d+) times", text).group(1)) >= at_least, text
    assert "random kernels read their Philox counters from device memory" in text, text


def _numpy(t):
    return t.detach().cpu().numpy()


def _dropout_mlp():
    return munet.nn.Sequential(munet.nn.Linear(8, 32), munet.nn.ReLU(), munet.nn.Dropout(0.3), munet.nn.Linear(32, 3))


def _classify(model, opt, x, labels):
    opt.zero_grad()
    loss = munet.nn.functional.cross_entropy(model(x), labels)
    loss.backward()
    opt.step()
    return loss


def test_a_dropout_training_step_replays_the_eager_draws():
    munet.manual_seed(0)
    model, reference = _dropout_mlp(), _dropout_mlp()
    reference.load_state_dict(model.state_dict())
    model.cuda()
    opt = munet.optim.AdamW(model.parameters(), lr=0.01)
    ref_opt = munet.optim.AdamW(reference.parameters(), lr=0.01)
    compiled = munet.compile(lambda a, b: _classify(model, opt, a, b))
    munet.manual_seed(11)  # the cpu and cuda generators: the same stream from here
    rng = np.random.default_rng(0)
    for call in range(CALLS + 3):
        if call == CALLS:  # a parameter's memory moves: the plan captures again, with new slots
            _replays(compiled)
            moved = munet.zeros_like(model[0].weight)
            moved.copy_(model[0].weight.detach())
            model[0].weight.data = moved
        x = munet.tensor(rng.standard_normal((16, 8)).astype(np.float32))
        labels = munet.tensor(rng.integers(0, 3, 16))
        got = compiled(x.cuda(), labels.cuda())
        want = _classify(reference, ref_opt, x, labels)
        np.testing.assert_allclose(_numpy(got), _numpy(want), rtol=1e-5, atol=1e-6)
    assert "2 captures" in compiled.stats()["cuda_graph"], compiled.stats()["cuda_graph"]
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(_numpy(p), _numpy(q), rtol=1e-5, atol=1e-6)
    # the replays advanced the cuda generator exactly as the eager steps advanced the cpu one
    np.testing.assert_array_equal(_numpy(munet.rand(5, device="cuda:0")), _numpy(munet.rand(5)))


def _every_draw(x):
    """Each random op with a cuda kernel, on ``x``'s device (values of one call, as numpy arrays)."""
    device = x.device
    probs = munet.softmax(x[:3], dim=1)
    return (
        x * munet.rand(x.shape, device=device),
        munet.randn(3, 5, device=device),
        munet.randn(7, dtype=munet.float64, device=device),
        munet.randint(-4, 9, (6,), device=device),
        munet.empty(9, device=device).exponential_(2.0),
        munet.normal(x, munet.full(x.shape, 0.5, device=device)),
        munet.bernoulli(munet.full((4, 4), 0.25, device=device)),
        munet.multinomial(probs, 4, replacement=True),
        munet.multinomial(probs, 3),
        munet.randperm(11, device=device),
        munet.nn.functional.dropout(x, 0.5, True),
    )


_EXACT = (0, 3, 6, 7, 9, 10)  # uniform, randint, bernoulli, multinomial's cdf search, randperm: bit for bit


def _close(got, want):
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.dtype == b.dtype and a.shape == b.shape, k
        if k in _EXACT:
            np.testing.assert_array_equal(a, b, err_msg=f"output {k}")
        elif k == 8:  # exponential races: the cpu's categories unless two keys are within an ulp
            np.testing.assert_array_equal(a, b, err_msg=f"output {k}")
        else:  # Box-Muller and -log1p(-u): the device's libm against NumPy's, to an ulp or two
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=f"output {k}")


def test_rand_randn_and_every_random_op_in_a_step():
    compiled = munet.compile(_every_draw)
    x = munet.tensor(np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32))
    munet.manual_seed(3)  # the cpu and cuda generators: the same stream from here
    runs = {"cuda:0": [], "cpu": []}
    for _ in range(CALLS):  # the compiled cuda step against the eager cpu step
        runs["cuda:0"].append([_numpy(t) for t in compiled(x.cuda())])
        runs["cpu"].append([_numpy(t) for t in _every_draw(x)])
    _replays(compiled)
    for got, want in zip(runs["cuda:0"], runs["cpu"]):
        _close(got, want)
    # a frozen counter would repeat the captured call's numbers
    for k in range(len(runs["cuda:0"][0])):
        assert not np.array_equal(runs["cuda:0"][-1][k], runs["cuda:0"][-2][k]), k
    np.testing.assert_array_equal(_numpy(munet.rand(5, device="cuda:0")), _numpy(munet.rand(5)))


def _noisy(x):
    return munet.nn.functional.dropout(x, 0.5, True) + munet.randn(x.shape, device=x.device)


def test_reseeding_and_rng_state_between_replays_take_effect():
    compiled = munet.compile(_noisy)
    x = munet.ones(64, device="cuda:0")
    munet.manual_seed(1)
    got = [_numpy(compiled(x)) for _ in range(3)]  # warm-up, capture, one replay
    state = munet.cuda.get_rng_state()
    got.append(_numpy(compiled(x)))
    munet.cuda.manual_seed(9)  # the cuda generator only
    got.append(_numpy(compiled(x)))
    munet.manual_seed(4)  # torch.manual_seed: every generator
    got.append(_numpy(compiled(x)))
    munet.cuda.set_rng_state(state)
    got.append(_numpy(compiled(x)))
    _replays(compiled, at_least=5)
    # the same calls eagerly on the device, with the same seeds
    munet.manual_seed(1)
    want = [_numpy(_noisy(x)) for _ in range(3)]
    want.append(_numpy(_noisy(x)))
    munet.cuda.manual_seed(9)
    want.append(_numpy(_noisy(x)))
    munet.manual_seed(4)
    want.append(_numpy(_noisy(x)))
    want.append(want[3])  # the state restored: call 3's numbers again
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=f"call {k}")
    assert not np.allclose(got[4], got[3]) and not np.allclose(got[5], got[4])


def test_a_slot_launch_draws_what_the_by_value_launch_draws():
    """The kernels read key and counter from the slot when given one, and ignore the by-value words."""
    from munet.backends.cuda import emulation

    key, counter = 0x0123456789ABCDEF_FEDCBA9876543210, (5 << 64) | (2**64 - 3)  # a carry into word 1
    slot = np.array(R.philox_slot_words(key, counter), np.uint64)
    cases = [(R.render_uniform("float32"), np.float32, {"scale": 2.0, "low": -1.0}),
             (R.render_normal("float64"), np.float64, {"std": 1.5, "mean": 0.25})]  # fmt: skip
    emulator = emulation.Emulator([src for src, _, _ in cases])
    for src, dtype, scalars in cases:
        n = 37
        threads = src.blocks(n) if src.name.startswith("munet_uniform") else n
        by_value, from_slot = np.zeros(n, dtype), np.zeros(n, dtype)
        emulator.run(src, threads, [v for _, v in src.arguments(key, counter, n, by_value, **scalars)])
        emulator.run(src, threads, [v for _, v in src.arguments(7, 99, n, from_slot, philox=slot, **scalars)])
        np.testing.assert_array_equal(from_slot, by_value, err_msg=src.name)
        other = np.zeros(n, dtype)
        emulator.run(src, threads, [v for _, v in src.arguments(7, 99, n, other, **scalars)])
        assert not np.array_equal(other, by_value)


# what the graph cannot serve: run op by op, with the reason -----------------------------------------


def test_a_generator_shared_with_a_host_step_is_not_captured():
    def step(x):  # a draw on the second device (a host step) and one on the plan's own
        return munet.rand(8, device="cuda:1").to("cuda:0") + munet.nn.functional.dropout(x, 0.5, True)

    compiled = munet.compile(step)
    x = munet.ones(8, device="cuda:0")
    munet.manual_seed(2)
    got = [_numpy(compiled(x)) for _ in range(4)]
    munet.manual_seed(2)
    want = [_numpy(step(x)) for _ in range(4)]
    np.testing.assert_array_equal(got, want)
    stats = compiled.stats()
    assert stats["cuda_graphs"] is False
    assert "draw from one generator" in stats["cuda_graph"] and "host step 'uniform'" in stats["cuda_graph"], stats


def test_a_kernel_drawing_by_value_falls_back_and_draws_once_per_call(monkeypatch):
    def uniform_by_value(rt, *, shape, dtype, low, high, generator):  # the kernel before device slots
        src = R.render_uniform(dtype.name)
        n = int(np.prod(shape))
        key, counter = generator.philox_advance((n + 3) // 4)
        out = rt.empty(tuple(shape), dtype)
        launch.launch(rt, src, src.blocks(n), src.arguments(key, counter, n, out.data.ptr, scale=high - low, low=low))
        return out

    monkeypatch.setitem(KERNELS, "uniform", uniform_by_value)

    def step(x):
        return x * munet.rand(x.shape, device=x.device) + 1

    compiled = munet.compile(step)
    munet.manual_seed(6)
    for _ in range(4):  # the failed capture drew nothing: every call is the eager cpu step's
        got, want = compiled(munet.ones(10, device="cuda:0")), step(munet.ones(10))
        np.testing.assert_array_equal(_numpy(got), _numpy(want))
    stats = compiled.stats()
    assert stats["cuda_graphs"] is False
    assert "'uniform' node's kernel takes its Philox counter by value" in stats["cuda_graph"], stats["cuda_graph"]
    np.testing.assert_array_equal(_numpy(munet.rand(3, device="cuda:0")), _numpy(munet.rand(3)))

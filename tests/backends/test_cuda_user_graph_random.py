"""Random ops in a user's own CUDA graph (``munet.cuda.CUDAGraph``, ``graph``, ``make_graphed_callables``):
each random kernel captured reads its Philox ``(key, counter)`` from a device slot, and every
``replay()`` first advances the generators by what the region drew and fills the slots
(``kernels_draws.PhiloxSlots``, the compiled plans' mechanism).

The fake CuPy records a capture's work without running it and runs it at each launch with the
pointers of the capture (``fake_cupy``), so a slot that were not refilled, or a counter frozen at the
capture, would repeat the same numbers at every replay: the tests compare several replays with the
region run eagerly on the device after the same seed (values, and the generator's next draw), and
check that consecutive replays differ. GPU versions: ``test_cuda_gpu_graphs.py`` (marker ``cuda``).
"""

import numpy as np
import pytest

import munet
from munet.backends.cuda import kernels_draws
from munet.backends.cuda.kernels_draws import FrozenDrawError
from tests.backends import fake_cupy

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")

REPLAYS = 4


def _numpy(t):
    return t.detach().cpu().numpy()


def _region(x):
    """Dropout, rand, randn (two dtypes), bernoulli and an in-place draw on ``x``'s device."""
    device = x.device
    return (
        munet.nn.functional.dropout(x, 0.5, True),
        x * munet.rand(x.shape, device=device),
        munet.randn(3, 5, device=device),
        munet.randn(7, dtype=munet.float64, device=device),
        munet.bernoulli(munet.full((4, 4), 0.25, device=device)),
        munet.empty(9, device=device).normal_(1.0, 2.0),
    )


def _static_input():
    return munet.tensor(np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)).cuda()


def _capture(fn, x, **graph_kwargs):
    fn(x)  # warm-up: kernels loaded outside the capture
    g = munet.cuda.CUDAGraph()
    with munet.cuda.graph(g, **graph_kwargs):
        outs = fn(x)
    return g, outs


def _assert_equal_runs(got, want):
    for call, (a, b) in enumerate(zip(got, want, strict=True)):
        for k, (u, v) in enumerate(zip(a, b, strict=True)):
            np.testing.assert_array_equal(u, v, err_msg=f"replay {call}, output {k}")


def _assert_fresh(runs):
    """Consecutive replays drew new numbers (a frozen counter repeats them)."""
    for call in range(1, len(runs)):
        for k, (u, v) in enumerate(zip(runs[call], runs[call - 1])):
            assert not np.array_equal(u, v), f"replay {call} repeated output {k}"


def test_replays_draw_what_the_region_run_eagerly_draws():
    x = _static_input()
    g, outs = _capture(_region, x)
    assert g.random_draws() == 6
    munet.manual_seed(5)
    got = []
    for _ in range(REPLAYS):
        g.replay()
        got.append([_numpy(o) for o in outs])
    after_replays = _numpy(munet.rand(10, device="cuda:0"))
    munet.manual_seed(5)
    want = [[_numpy(o) for o in _region(x)] for _ in range(REPLAYS)]
    after_eager = _numpy(munet.rand(10, device="cuda:0"))
    _assert_equal_runs(got, want)
    _assert_fresh(got)
    # the replays advanced the generator exactly as the eager runs did
    np.testing.assert_array_equal(after_replays, after_eager)


def test_the_capture_draws_nothing_and_eager_draws_between_replays_keep_their_order():
    x = _static_input()
    munet.manual_seed(2)
    g, outs = _capture(_region, x)  # the warm-up draws; the capture does not
    state = munet.cuda.get_rng_state()
    munet.manual_seed(2)
    _region(x)
    np.testing.assert_array_equal(state.numpy(), munet.cuda.get_rng_state().numpy())
    got, want = [], []
    munet.manual_seed(8)
    for _ in range(3):
        g.replay()
        got.append([_numpy(o) for o in outs] + [_numpy(munet.randn(5, device="cuda:0"))])
    munet.manual_seed(8)
    for _ in range(3):
        want.append([_numpy(o) for o in _region(x)] + [_numpy(munet.randn(5, device="cuda:0"))])
    _assert_equal_runs(got, want)


def test_reseeding_and_rng_state_between_replays_take_effect():
    x = munet.ones(64, device="cuda:0")

    def noisy(x):
        return (munet.nn.functional.dropout(x, 0.5, True) + munet.randn(x.shape, device=x.device),)

    g, (y,) = _capture(noisy, x)
    munet.manual_seed(1)
    g.replay()
    got = [_numpy(y)]
    state = munet.cuda.get_rng_state()
    g.replay()
    got.append(_numpy(y))
    munet.cuda.manual_seed(9)  # the cuda generator only
    g.replay()
    got.append(_numpy(y))
    munet.manual_seed(4)  # torch.manual_seed: every generator
    g.replay()
    got.append(_numpy(y))
    munet.cuda.set_rng_state(state)
    g.replay()
    got.append(_numpy(y))
    munet.manual_seed(1)
    want = [_numpy(noisy(x)[0]), _numpy(noisy(x)[0])]
    munet.cuda.manual_seed(9)
    want.append(_numpy(noisy(x)[0]))
    munet.manual_seed(4)
    want.append(_numpy(noisy(x)[0]))
    want.append(want[1])  # the state restored: the second replay's numbers again
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"replay {k}")
    assert not np.array_equal(got[2], got[1]) and not np.array_equal(got[3], got[2])


def test_a_registered_generator_of_its_own_is_advanced_by_each_replay():
    x = _static_input()
    gen = munet.Generator("cuda")

    def region(x):
        return (x + munet.rand(x.shape, device=x.device, generator=gen), munet.randn(6, device=x.device))

    g = munet.cuda.CUDAGraph()
    g.register_generator_state(gen)
    with pytest.raises(TypeError, match="register_generator_state: expected a cuda munet.Generator"):
        g.register_generator_state(munet.Generator())
    region(x)
    with munet.cuda.graph(g):
        outs = region(x)
    gen.manual_seed(30)
    munet.manual_seed(31)
    got = []
    for _ in range(3):
        g.replay()
        got.append([_numpy(o) for o in outs])
    gen.manual_seed(30)
    munet.manual_seed(31)
    want = [[_numpy(o) for o in region(x)] for _ in range(3)]
    _assert_equal_runs(got, want)
    _assert_fresh(got)


def test_side_stream_pool_sharing_and_reset():
    x = _static_input()
    side = munet.cuda.Stream()
    first, a = _capture(_region, x, stream=side)
    second, b = _capture(lambda t: (munet.nn.functional.dropout(a[0] + t, 0.3, True),), x, pool=first.pool())
    munet.manual_seed(12)
    got = []
    for _ in range(3):  # graphs sharing a pool replay in capture order; here on the default stream
        first.replay()
        second.replay()
        got.append([_numpy(o) for o in (*a, *b)])
    munet.manual_seed(12)
    want = []
    for _ in range(3):
        eager = _region(x)
        want.append([_numpy(o) for o in (*eager, munet.nn.functional.dropout(eager[0] + x, 0.3, True))])
    _assert_equal_runs(got, want)
    _assert_fresh(got)
    first.reset()
    with pytest.raises(RuntimeError, match="no graph captured"):
        first.random_draws()
    with munet.cuda.graph(first):  # captured again: new slots
        (y,) = _region(x)[:1]
    munet.manual_seed(13)
    first.replay()
    replayed = _numpy(y)
    munet.manual_seed(13)
    np.testing.assert_array_equal(replayed, _numpy(_region(x)[0]))


def test_make_graphed_callables_with_dropout_in_training():
    munet.manual_seed(0)

    def mlp():
        return munet.nn.Sequential(
            munet.nn.Linear(6, 16), munet.nn.ReLU(), munet.nn.Dropout(0.4), munet.nn.Linear(16, 3)
        )

    model, reference = mlp(), mlp()
    reference.load_state_dict(model.state_dict())
    model.cuda()
    reference.cuda()
    sample = _static_input().requires_grad_()
    graphed = munet.cuda.make_graphed_callables(model, (sample,), num_warmup_iters=2)

    def steps(module):
        rng = np.random.default_rng(3)
        runs = []
        for call in range(REPLAYS):  # new inputs, then one input twice: those calls differ by their masks
            module.zero_grad()
            if call < REPLAYS - 1:
                data = rng.standard_normal((4, 6)).astype(np.float32)
            x = munet.tensor(data).cuda().requires_grad_()
            out = module(x)
            (out * out).sum().backward()
            runs.append([_numpy(out), _numpy(x.grad), *(_numpy(p.grad) for p in module.parameters())])
        return runs, _numpy(munet.rand(8, device="cuda:0"))

    munet.manual_seed(21)
    got, after_graphed = steps(graphed)
    munet.manual_seed(21)
    want, after_eager = steps(reference)
    for call, (a, b) in enumerate(zip(got, want, strict=True)):
        for k, (u, v) in enumerate(zip(a, b, strict=True)):
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6, err_msg=f"call {call}, output {k}")
    assert not np.array_equal(got[-1][0], got[-2][0])  # a new dropout mask at each call
    np.testing.assert_array_equal(after_graphed, after_eager)


def test_host_draws_run_and_by_value_draws_are_refused_during_a_capture(monkeypatch):
    x = _static_input()
    g = munet.cuda.CUDAGraph()
    munet.manual_seed(40)
    with munet.cuda.graph(g):  # a cpu draw in the block runs on the host, once
        on_host = munet.rand(4)
        y = x + 1
    munet.manual_seed(40)
    np.testing.assert_array_equal(on_host.numpy(), munet.rand(4).numpy())
    g.replay()
    np.testing.assert_array_equal(_numpy(y), _numpy(x) + 1)

    with pytest.raises(FrozenDrawError, match="while cuda:0 captures a CUDA graph"):
        with munet.cuda.graph(munet.cuda.CUDAGraph()):
            munet.rand(3, device="cuda:1")  # would run now, before every replay's draws

    def by_value(rt, generator, blocks):  # the kernels as they were before device slots
        return (*generator.philox_advance(blocks), 0)

    monkeypatch.setattr(kernels_draws, "_philox", by_value)
    state = munet.cuda.get_rng_state()
    g = munet.cuda.CUDAGraph()
    with pytest.raises(FrozenDrawError, match="Philox counter as a launch argument during a CUDA graph capture"):
        with munet.cuda.graph(g):
            munet.rand(3, device="cuda:0")
    assert not munet.cuda.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="no graph captured"):
        g.replay()
    np.testing.assert_array_equal(state.numpy(), munet.cuda.get_rng_state().numpy())  # nothing drawn
    monkeypatch.undo()
    g, (z,) = _capture(lambda t: (munet.rand(t.shape, device=t.device),), x)  # the next capture works
    munet.manual_seed(41)
    g.replay()
    munet.manual_seed(41)
    np.testing.assert_array_equal(_numpy(z), _numpy(munet.rand(x.shape, device="cuda:0")))

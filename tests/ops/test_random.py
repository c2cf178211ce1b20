"""Random numbers: generators and seeding (determinism, independence, state), the stream's
definition (Philox), creation ops (shapes, dtypes, kwargs), distribution sanity with fixed
seeds, bernoulli/multinomial validity, in-place samplers and error messages."""

import math

import numpy as np
import pytest

import munet

N = 20000  # samples for statistics; bounds below are > 5 standard errors wide


def stats(t):
    x = t.double().numpy() if t.dtype.is_floating_point else t.numpy().astype(np.float64)
    return x.mean(), x.std()


# generators and seeding ---------------------------------------------------------------------------


def test_manual_seed_determinism_and_progress():
    gen = munet.manual_seed(123)
    assert gen is munet.default_generator and munet.initial_seed() == 123
    a, b = munet.rand(50), munet.randn(50)
    munet.manual_seed(123)
    assert np.array_equal(a.numpy(), munet.rand(50).numpy())
    assert np.array_equal(b.numpy(), munet.randn(50).numpy())
    c = munet.rand(50)
    assert not np.array_equal(a.numpy(), c.numpy()), "consecutive draws must differ"


def test_generators_are_independent():
    g1 = munet.Generator().manual_seed(7)
    g2 = munet.Generator(device="cpu")
    assert g2.manual_seed(7) is g2 and g1.initial_seed() == 7
    x1 = munet.rand(20, generator=g1)
    munet.rand(100)  # the default generator does not disturb g2
    x2 = munet.rand(20, generator=g2)
    assert np.array_equal(x1.numpy(), x2.numpy())
    g3 = munet.Generator().manual_seed(8)
    assert not np.array_equal(munet.rand(20, generator=g3).numpy(), munet.rand(20, generator=g1).numpy())
    state = munet.get_rng_state()
    munet.rand(5, generator=g1)
    assert np.array_equal(state.numpy(), munet.get_rng_state().numpy()), "generator= must not touch the default"


def test_get_set_state():
    g = munet.Generator().manual_seed(2**40 + 3)
    munet.randn(7, generator=g)
    state = g.get_state()
    assert state.dtype is munet.uint8 and tuple(state.shape) == (16,)
    a = munet.randn(9, generator=g)
    g.set_state(state)
    assert np.array_equal(a.numpy(), munet.randn(9, generator=g).numpy())
    munet.manual_seed(1)
    s = munet.get_rng_state()
    x = munet.rand(4)
    munet.set_rng_state(s)
    assert np.array_equal(x.numpy(), munet.rand(4).numpy())
    with pytest.raises(RuntimeError, match=r"set_state: expected a state of 16 bytes"):
        g.set_state(munet.zeros(3, dtype=munet.uint8))
    with pytest.raises(TypeError, match=r"set_state: expected a uint8 tensor"):
        g.set_state(munet.zeros(16))


def test_seed_and_negative_seed():
    s = munet.seed()
    assert isinstance(s, int) and munet.initial_seed() == s
    g = munet.Generator().manual_seed(-1)
    assert g.initial_seed() == 2**64 - 1
    with pytest.raises(TypeError, match=r"manual_seed: expected an int seed"):
        g.manual_seed("x")


def test_stream_is_philox_keyed_by_seed():
    """The stream definition another backend must reproduce (see kernels_random.py)."""
    g = munet.Generator().manual_seed(99)
    words = np.random.Philox(key=99, counter=0).random_raw(8)
    first = munet.rand(5, dtype=munet.float64, generator=g).numpy()
    np.testing.assert_array_equal(first, (words[:5] >> np.uint64(11)) * 2.0**-53)
    # 5 words used 2 counter blocks; the next draw starts at block 2 (words 8..)
    nxt = munet.rand(1, generator=g).numpy()
    word = np.random.Philox(key=99, counter=2).random_raw(1)
    np.testing.assert_array_equal(nxt, ((word >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)))


# creation ops -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [munet.rand, munet.randn])
def test_rand_randn_shapes_dtypes_kwargs(fn):
    assert tuple(fn(2, 3).shape) == (2, 3) and fn(2, 3).dtype is munet.float32
    assert tuple(fn((4, 0)).shape) == (4, 0)
    assert tuple(fn([5]).shape) == (5,) and tuple(fn(size=(2, 1)).shape) == (2, 1)
    assert tuple(fn().shape) == ()
    for dtype in (munet.float64, munet.float16, munet.bfloat16):
        assert fn(3, dtype=dtype).dtype is dtype
    t = fn(3, requires_grad=True, device="cpu")
    assert t.requires_grad and t.is_leaf
    out = munet.empty(4)
    assert fn(4, out=out) is out
    with pytest.raises(RuntimeError, match=r"expected a floating point dtype, got int64"):
        fn(3, dtype=munet.int64)


def test_like_variants():
    base = munet.zeros(2, 3, dtype=munet.float64)
    for fn in (munet.rand_like, munet.randn_like):
        t = fn(base)
        assert tuple(t.shape) == (2, 3) and t.dtype is munet.float64
        assert fn(base, dtype=munet.float16).dtype is munet.float16
    r = munet.randint_like(base, 5)
    assert r.dtype is munet.float64 and r.numpy().min() >= 0 and r.numpy().max() < 5
    r = munet.randint_like(munet.zeros(100, dtype=munet.int32), -3, 3)
    assert r.dtype is munet.int32 and set(r.numpy().tolist()) == set(range(-3, 3))


def test_uniform_statistics():
    u = munet.rand(N).double().numpy()
    assert 0 <= u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    x = munet.empty(N, dtype=munet.float64).uniform_(-2, 3)
    assert x.numpy().min() >= -2 and x.numpy().max() < 3
    assert abs(x.numpy().mean() - 0.5) < 0.06
    for dtype in (munet.bfloat16, munet.float16):
        h = munet.rand(5000, dtype=dtype).float().numpy()
        assert h.min() >= 0 and h.max() < 1 and abs(h.mean() - 0.5) < 0.02


@pytest.mark.parametrize("dtype", [munet.float32, munet.float64, munet.float16])
def test_normal_statistics(dtype):
    z = munet.randn(N, dtype=dtype).double().numpy()
    assert abs(z.mean()) < 0.04 and abs(z.std() - 1) < 0.03
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < 0.02
    assert abs(np.mean(np.abs(z) < 2) - 0.9545) < 0.01


def test_randint():
    t = munet.randint(10, (N,))
    assert t.dtype is munet.int64 and tuple(t.shape) == (N,)
    x = t.numpy()
    assert x.min() == 0 and x.max() == 9 and abs(x.mean() - 4.5) < 0.1
    assert set(munet.randint(-5, 5, (200,)).numpy().tolist()) == set(range(-5, 5))
    assert tuple(munet.randint(3, size=(2, 2)).shape) == (2, 2)
    assert tuple(munet.randint(low=2, high=4, size=(3,)).shape) == (3,)
    f = munet.randint(0, 3, (10,), dtype=munet.float32)
    assert f.dtype is munet.float32 and set(f.numpy().tolist()) <= {0.0, 1.0, 2.0}
    big = munet.randint(-(2**63), 2**63 - 1, (1000,)).numpy()
    assert big.min() < -(2**60) and big.max() > 2**60
    with pytest.raises(RuntimeError, match=r"randint: expected 'low' to be less than 'high', but got low=5 >= high=5"):
        munet.randint(5, 5, (3,))
    with pytest.raises(TypeError, match=r"randint: missing 'high' or 'size'"):
        munet.randint(5)


def test_randperm():
    for n in (0, 1, 10, 1000):
        p = munet.randperm(n)
        assert p.dtype is munet.int64 and np.array_equal(np.sort(p.numpy()), np.arange(n))
    assert munet.randperm(5, dtype=munet.float32).dtype is munet.float32
    firsts = np.array([munet.randperm(4)[0].item() for _ in range(400)])
    assert all(abs(np.mean(firsts == k) - 0.25) < 0.1 for k in range(4))
    with pytest.raises(RuntimeError, match=r"randperm: n must be non-negative"):
        munet.randperm(-1)


def test_normal_overloads():
    mean = munet.tensor([0.0, 10.0]).reshape(2, 1).expand(2, N // 2)
    std = munet.tensor([1.0, 0.1]).reshape(2, 1)
    x = munet.normal(mean, std)
    assert tuple(x.shape) == (2, N // 2) and x.dtype is munet.float32
    m, s = x.numpy().mean(1), x.numpy().std(1)
    assert abs(m[0]) < 0.06 and abs(m[1] - 10) < 0.006 and abs(s[0] - 1) < 0.04 and abs(s[1] - 0.1) < 0.004
    y = munet.normal(munet.full((N,), 3.0, dtype=munet.float64), 2.0)
    assert y.dtype is munet.float64 and abs(y.numpy().mean() - 3) < 0.1 and abs(y.numpy().std() - 2) < 0.06
    z = munet.normal(-1.0, munet.full((N,), 0.5))
    assert abs(z.numpy().mean() + 1) < 0.03 and abs(z.numpy().std() - 0.5) < 0.015
    w = munet.normal(2.0, 3.0, (N,), dtype=munet.float64)
    assert w.dtype is munet.float64 and abs(w.numpy().mean() - 2) < 0.15 and abs(w.numpy().std() - 3) < 0.1
    assert tuple(munet.normal(0.0, 1.0, size=(2, 3)).shape) == (2, 3)
    with pytest.raises(RuntimeError, match=r"normal: expects std >= 0.0, but found std -1.0"):
        munet.normal(0.0, -1.0, (3,))
    with pytest.raises(RuntimeError, match=r"normal: expects all elements of std >= 0.0"):
        munet.normal(munet.zeros(3), munet.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(TypeError, match=r"normal: with float mean and std, a size is required"):
        munet.normal(0.0, 1.0)


def test_inplace_samplers():
    x = munet.empty(N, dtype=munet.float64)
    m, s = stats(x.normal_(2.0, 0.5))
    assert abs(m - 2) < 0.02 and abs(s - 0.5) < 0.015
    m, _ = stats(x.exponential_(4.0))
    assert x.numpy().min() >= 0 and abs(m - 0.25) < 0.01
    m, _ = stats(x.log_normal_(0.0, 0.25))
    assert abs(m - math.exp(0.25**2 / 2)) < 0.01
    assert set(x.random_(3, 6).numpy().tolist()) == {3.0, 4.0, 5.0}
    assert set(x.random_(4).numpy().tolist()) == {0.0, 1.0, 2.0, 3.0}
    i = munet.zeros(1000, dtype=munet.int8).random_()
    assert i.numpy().min() >= 0 and i.numpy().max() > 100
    b = munet.zeros(1000, dtype=munet.bool).random_()
    assert set(b.numpy().tolist()) == {False, True}
    assert set(x.bernoulli_(0.3).numpy().tolist()) == {0.0, 1.0} and abs(x.numpy().mean() - 0.3) < 0.02
    with pytest.raises(
        RuntimeError, match=r"uniform_: expects to return a \[from, to\) range, but found from=3 > to=1"
    ):
        x.uniform_(3, 1)
    with pytest.raises(RuntimeError, match=r"exponential_: expects lambda > 0.0, but found lambda=0"):
        x.exponential_(0)
    with pytest.raises(RuntimeError, match=r"uniform_: expected a floating point tensor, got int64"):
        munet.zeros(3, dtype=munet.int64).uniform_()


def test_inplace_on_leaf_requiring_grad():
    w = munet.zeros(3, requires_grad=True)
    with pytest.raises(
        RuntimeError, match=r"a leaf Variable that requires grad is being used in an in-place operation"
    ):
        w.normal_()
    with munet.no_grad():
        w.uniform_(1, 2)
    assert w.requires_grad and np.all(w.detach().numpy() >= 1)


def test_bernoulli():
    p = munet.tensor([0.0, 1.0, 0.0, 1.0], dtype=munet.float64)
    assert np.array_equal(munet.bernoulli(p).numpy(), [0, 1, 0, 1])
    probs = munet.full((N,), 0.2, dtype=munet.float16)
    out = probs.bernoulli()
    assert out.dtype is munet.float16 and set(out.float().numpy().tolist()) == {0.0, 1.0}
    assert abs(out.float().numpy().mean() - 0.2) < 0.02
    assert abs(munet.bernoulli(munet.zeros(N), 0.7).numpy().mean() - 0.7) < 0.02
    grad_p = munet.full((3,), 0.5, requires_grad=True)
    assert not munet.bernoulli(grad_p).requires_grad
    mask = munet.zeros(N, dtype=munet.int64).bernoulli_(munet.tensor(0.9))
    assert mask.dtype is munet.int64 and abs(mask.numpy().mean() - 0.9) < 0.02
    with pytest.raises(RuntimeError, match=r"bernoulli: expected all probabilities in \[0, 1\]"):
        munet.bernoulli(munet.tensor([0.5, 1.5]))
    with pytest.raises(RuntimeError, match=r"bernoulli: expected all probabilities in \[0, 1\]"):
        munet.bernoulli(munet.tensor([-0.5]))
    with pytest.raises(RuntimeError, match=r"bernoulli_: expected 0 <= p <= 1, but got p=2"):
        munet.zeros(3).bernoulli_(2)


def test_multinomial_with_replacement_frequencies():
    probs = munet.tensor([[1.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 0.0]])
    s = munet.multinomial(probs, N, replacement=True)
    assert s.dtype is munet.int64 and tuple(s.shape) == (2, N)
    freq = np.bincount(s.numpy()[0], minlength=4) / N
    np.testing.assert_allclose(freq, [0.125, 0.0, 0.375, 0.5], atol=0.015)
    assert freq[1] == 0
    assert np.all(s.numpy()[1] == 2)
    one = munet.tensor([0.2, 0.8], dtype=munet.float64).multinomial(5, True)
    assert tuple(one.shape) == (5,)


def test_multinomial_without_replacement():
    probs = munet.tensor([[1.0, 1.0, 0.0, 2.0, 1.0]]).expand(500, 5)
    s = munet.multinomial(probs, 4).numpy()
    assert s.shape == (500, 4)
    assert all(len(set(row)) == 4 and 2 not in row for row in s)
    first = np.bincount(s[:, 0], minlength=5) / 500
    assert abs(first[3] - 0.4) < 0.08 and first[2] == 0
    full = munet.multinomial(munet.ones(6), 6).numpy()
    assert np.array_equal(np.sort(full), np.arange(6))


def test_multinomial_errors():
    with pytest.raises(RuntimeError, match=r"probability tensor contains either `inf`, `nan` or element < 0"):
        munet.multinomial(munet.tensor([0.5, -0.1]), 1)
    with pytest.raises(
        RuntimeError, match=r"cannot sample n_sample > prob_dist.size\(-1\) samples without replacement"
    ):
        munet.multinomial(munet.ones(3), 4)
    with pytest.raises(RuntimeError, match=r"invalid multinomial distribution \(sum of probabilities <= 0\)"):
        munet.multinomial(munet.zeros(3), 1, True)
    with pytest.raises(RuntimeError, match=r"not enough non-negative category to sample"):
        munet.multinomial(munet.tensor([1.0, 0.0, 0.0]), 2)
    with pytest.raises(RuntimeError, match=r"multinomial: prob_dist must be 1 or 2 dim"):
        munet.multinomial(munet.ones(2, 2, 2), 1)
    with pytest.raises(RuntimeError, match=r"cannot sample n_sample <= 0 samples"):
        munet.multinomial(munet.ones(3), 0)


SAMPLERS = {
    "rand": lambda g: munet.rand(6, generator=g),
    "randn": lambda g: munet.randn(2, 3, generator=g),
    "randint": lambda g: munet.randint(0, 100, (6,), generator=g),
    "randint_like": lambda g: munet.randint_like(munet.zeros(6), 100, generator=g),
    "rand_like": lambda g: munet.rand_like(munet.zeros(6), generator=g),
    "randn_like": lambda g: munet.randn_like(munet.zeros(6), generator=g),
    "randperm": lambda g: munet.randperm(20, generator=g),
    "normal_tt": lambda g: munet.normal(munet.zeros(6), munet.ones(6), generator=g),
    "normal_ff": lambda g: munet.normal(0.0, 1.0, (6,), generator=g),
    "bernoulli": lambda g: munet.bernoulli(munet.full((30,), 0.5), generator=g),
    "multinomial": lambda g: munet.multinomial(munet.ones(2, 10), 5, generator=g),
    "multinomial_repl": lambda g: munet.multinomial(munet.ones(10), 8, True, generator=g),
    "uniform_": lambda g: munet.empty(6).uniform_(0, 1, generator=g),
    "normal_": lambda g: munet.empty(6).normal_(generator=g),
    "exponential_": lambda g: munet.empty(6).exponential_(generator=g),
    "random_": lambda g: munet.empty(6).random_(0, 1000, generator=g),
    "bernoulli_": lambda g: munet.empty(30).bernoulli_(0.5, generator=g),
    "log_normal_": lambda g: munet.empty(6).log_normal_(generator=g),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_every_sampler_takes_a_generator(name):
    fn = SAMPLERS[name]
    before = munet.get_rng_state().numpy()
    a = fn(munet.Generator().manual_seed(11)).numpy()
    b = fn(munet.Generator().manual_seed(11)).numpy()
    c = fn(munet.Generator().manual_seed(12)).numpy()
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.array_equal(before, munet.get_rng_state().numpy())
    with pytest.raises(TypeError, match=r"generator must be a munet.Generator"):
        fn(np.random.default_rng(0))


def test_threads_asking_for_a_device_default_generator_at_once_share_one():
    """Two default generators for one device type would each start at offset 0 (repeated draws)."""
    import sys
    import threading

    from munet.ops import random as R

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for trial in range(30):
            device_type = f"threadtest{trial}"  # a new type each time: its default is made on first use
            start, seen = threading.Barrier(8), []

            def first_use(device_type=device_type, start=start, seen=seen):
                start.wait()
                seen.append(R.default_generator_for(device_type))

            threads = [threading.Thread(target=first_use) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert all(g is seen[0] for g in seen), f"trial {trial}: {len({id(g) for g in seen})} generators"
    finally:
        sys.setswitchinterval(before)
        for trial in range(30):
            R._device_defaults.pop(f"threadtest{trial}", None)

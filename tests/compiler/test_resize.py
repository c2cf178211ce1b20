"""``compiler/resize.py``: a new size of a dynamic dim reuses the cached program of its structure.

Each new shape still traces (the guard); when the traced graph is a cached one at other sizes, the
optimized, fused program is copied at the new sizes (no passes, no fusion) and its kernels are
reused. Results are the same bits as ``dynamic=False``, which optimizes every size on its own.
"""

import numpy as np
import pytest

import munet
import munet.nn as nn
from munet.compiler.codegen import build
from munet.compiler.resize import size_renaming
from tests.compiler.models import GPT, train_step

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def test_size_renaming_pairs_sizes_one_to_one():
    assert size_renaming([4, 8, 32, 4], [6, 8, 48, 6]) == {4: 6, 32: 48}
    assert size_renaming([4, 4], [6, 7]) is None  # one old size, two new ones
    assert size_renaming([4, 8], [8, 8]) is None  # two old sizes, one new one
    assert size_renaming([5, 9], [5, 9]) == {}


def _model(seed, hidden=32):
    munet.manual_seed(seed)
    model = nn.Sequential(nn.Linear(20, hidden), nn.GELU(), nn.LayerNorm(hidden), nn.Linear(hidden, 5))
    return model, munet.optim.AdamW(model.parameters(), lr=1e-2)


def _training_step(model, opt):
    return lambda x, y: train_step(model, opt, x, y)


def _train_both(batches, hidden=32, count=lambda: 0, counts=None):
    """Train a dynamic=True and a dynamic=False copy side by side; asserts the same bits each step.
    ``counts`` gets how much ``count()`` grew during each step of the dynamic copy."""
    rng = np.random.default_rng(4)
    (a, opt_a), (b, opt_b) = _model(3, hidden), _model(3, hidden)
    dynamic = munet.compile(_training_step(a, opt_a), dynamic=True)
    static = munet.compile(_training_step(b, opt_b), dynamic=False)
    for batch in batches:
        x, y = rng.standard_normal((batch, 20)).astype(np.float32), rng.integers(0, 5, batch)
        before = count()
        got = dynamic(munet.tensor(x), munet.tensor(y))
        if counts is not None:
            counts.append(count() - before)
        assert got.item() == static(munet.tensor(x), munet.tensor(y)).item(), batch
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    return dynamic


@needs_cc
def test_new_batch_sizes_reuse_the_program_and_its_kernels(record_calls):
    compiles = record_calls(build, "_compile")
    counts = []
    step = _train_both([16, 16, 9, 25, 9, 40], count=lambda: len(compiles), counts=counts)
    stats = step.stats()
    # the first step creates AdamW's state (a structure of its own), the second has it; 9, 25 and 40
    # are the second's structure at other sizes
    assert stats["traces"] == 5 and stats["reused"] == 3 and stats["programs"] == 2
    assert stats["kernels_reused"] == stats["fused_groups"] > 0 and stats["last_reuse_refusal"] is None
    assert counts[0] > 0 and counts[2:] == [0, 0, 0, 0]  # no C compiled for a new size


@needs_cc
def test_a_size_equal_to_another_dim_is_optimized_on_its_own():
    step = _train_both([16, 16, 32], hidden=32)  # batch 32 is the hidden width: not a renaming of 16
    assert step.stats()["reused"] == 0 and "rename one to one" in step.stats()["last_reuse_refusal"]
    step = _train_both([16, 16, 32, 24, 40], hidden=32)
    stats = step.stats()
    # 24 renames from 16 (the structure keeps a second program, 32's, for sizes that rename from it)
    assert stats["reused"] == 2 and stats["programs"] == 3 and stats["last_reuse_refusal"] is None


@needs_cc
def test_python_branching_on_a_size_traces_the_branch_it_takes():
    def scaled(x):
        return (x * 2.0).sum(0) if x.shape[0] > 10 else (x * 3.0).sum(0)

    step = munet.compile(scaled, dynamic=True)
    rng = np.random.default_rng(5)
    for batch in (4, 6, 20, 30, 8):
        x = rng.standard_normal((batch, 12)).astype(np.float32)
        static = munet.compile(scaled, dynamic=False)
        np.testing.assert_array_equal(step(munet.tensor(x)).numpy(), static(munet.tensor(x)).numpy())
    assert step.stats()["reused"] == 3  # 6 reuses 4's program, 30 reuses 20's, 8 reuses 4's


@needs_cc
def test_reductions_over_the_dynamic_dim_are_the_bits_of_static_plans():
    def reduce_batch(x):
        return x.sum(0), x.mean(0), (x * x).amax(0), x.softmax(0).sum(1), x.var(0)

    step = munet.compile(reduce_batch, dynamic=True)
    rng = np.random.default_rng(8)
    for batch in (6, 11, 3, 17):
        x = rng.standard_normal((batch, 40)).astype(np.float32)
        static = munet.compile(reduce_batch, dynamic=False)
        for got, want in zip(step(munet.tensor(x)), static(munet.tensor(x))):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert step.stats()["reused"] == 3


@needs_cc
def test_sizes_zero_and_one_have_programs_of_their_own():
    def f(x):
        return (x.exp() * 2.0).sum(0)

    step = munet.compile(f, dynamic=True)
    for batch in (5, 1, 0, 7):
        x = np.ones((batch, 3), np.float32)
        np.testing.assert_array_equal(
            step(munet.tensor(x)).numpy(), munet.compile(f, dynamic=False)(munet.tensor(x)).numpy()
        )
    assert step.stats()["reused"] == 1 and step.stats()["programs"] == 3  # 7 reuses 5's


@needs_cc
def test_programs_are_bounded_by_cache_size():
    def f(x, k):
        return (x * k).sum(0)

    step = munet.compile(f, dynamic=True, cache_size=2)
    for k in (2.0, 3.0, 4.0):  # a float argument is part of the key: three structures
        step(munet.ones(4, 3), k)
    assert step.stats()["programs"] == 2
    step(munet.ones(6, 3), 2.0)  # its program was dropped: optimized again
    assert step.stats()["reused"] == 0
    step(munet.ones(9, 3), 4.0)
    assert step.stats()["reused"] == 1


def _gpt(seed):
    munet.manual_seed(seed)
    model = GPT(vocab=13, context=12, width=16, heads=2, layers=2)
    return model, munet.optim.AdamW(model.parameters(), lr=1e-2)


@needs_cc
def test_new_sequence_lengths_of_a_gpt_reuse_its_program():
    rng = np.random.default_rng(6)
    (a, opt_a), (b, opt_b) = _gpt(1), _gpt(1)
    dynamic = munet.compile(_training_step(a, opt_a), dynamic=True)
    static = munet.compile(_training_step(b, opt_b), dynamic=False)
    for t in (9, 9, 5, 7, 11, 5):  # attention over (batch, heads, time, time), a causal mask of (time, time)
        x, y = rng.integers(0, 13, (3, t)), rng.integers(0, 13, 3 * t)
        got = dynamic(munet.tensor(x), munet.tensor(y))
        assert got.item() == static(munet.tensor(x), munet.tensor(y)).item(), t
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    stats = dynamic.stats()
    assert stats["reused"] == 3, stats["last_reuse_refusal"]  # 5, 7 and 11 took 9's program


@needs_cc
def test_a_reused_program_saves_and_resumes(tmp_path):
    model, opt = _model(2)
    compiled = munet.compile(train_step, dynamic=True)
    rng = np.random.default_rng(9)

    def batch(n):
        return munet.tensor(rng.standard_normal((n, 20)).astype(np.float32)), munet.tensor(rng.integers(0, 5, n))

    for n in (16, 16, 9, 25):
        compiled(model, opt, *batch(n))
    assert compiled.stats()["reused"] == 2
    munet.save(compiled, tmp_path / "step.munet")  # the latest specialization: 25's, a copy of 16's program
    program = munet.load(tmp_path / "step.munet", device="cpu")
    for _ in range(2):
        x, y = batch(25)
        assert program(x, y).item() == compiled(model, opt, x, y).item()

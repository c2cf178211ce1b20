"""munet/ops/checks.py: a value check is an op, so bad values raise the same error in eager mode and in
a compiled step (the losses' target and input checks, embedding's and one_hot's index checks)."""

import numpy as np
import pytest

import munet
import munet.nn.functional as F


def _classes(values):
    return munet.tensor(values)


CASES = {
    # name: (fn(x, t), x, good t, bad t, error, message)
    "cross_entropy": (
        lambda x, t: F.cross_entropy(x, t),
        np.random.default_rng(0).standard_normal((2, 3)),
        [0, 2],
        [0, 3],
        IndexError,
        "cross_entropy: target 3 is out of bounds for 3 classes (expected 0 <= target < 3)",
    ),
    "nll_loss": (
        lambda x, t: F.nll_loss(x, t),
        np.random.default_rng(1).standard_normal((2, 3)),
        [-100, 1],  # ignore_index is no error
        [-1, 1],
        IndexError,
        "nll_loss: target -1 is out of bounds for 3 classes (expected 0 <= target < 3)",
    ),
    "multi_margin_loss": (
        lambda x, t: F.multi_margin_loss(x, t),
        np.random.default_rng(2).standard_normal((2, 3)),
        [2, 1],
        [2, 5],
        IndexError,
        "multi_margin_loss: target 5 is out of bounds for 3 classes (expected 0 <= target < 3)",
    ),
    "binary_cross_entropy": (
        lambda x, t: F.binary_cross_entropy(t, x),
        np.full((2, 2), 0.5),
        [[0.1, 0.9], [0.0, 1.0]],
        [[0.1, 1.5], [0.0, 1.0]],
        RuntimeError,
        "binary_cross_entropy: all elements of input should be between 0 and 1",
    ),
    "gaussian_nll_loss": (
        lambda x, t: F.gaussian_nll_loss(x, x * 0.5, t),
        np.ones((2, 2)),
        [[1.0, 2.0], [0.0, 1.0]],
        [[1.0, -2.0], [0.0, 1.0]],
        ValueError,
        "gaussian_nll_loss: var has negative entry/entries",
    ),
    "embedding": (
        lambda x, t: F.embedding(t, x),
        np.random.default_rng(3).standard_normal((5, 2)),
        [0, 4],
        [0, 5],
        IndexError,
        "embedding: index out of range in self (indices must be in [0, 5), got 5)",
    ),
    "embedding max_norm": (
        lambda x, t: F.embedding(t, x.clone(), max_norm=1.0),
        np.random.default_rng(4).standard_normal((5, 2)),
        [0, 4],
        [-1, 4],
        IndexError,
        "embedding: index out of range in self (indices must be in [0, 5), got -1)",
    ),
    "one_hot negative": (
        lambda x, t: F.one_hot(t, 3) * x,
        np.ones(()),
        [0, 2],
        [-2, 1],
        RuntimeError,
        "one_hot: class values must be non-negative, got -2",
    ),
    "one_hot too large": (
        lambda x, t: F.one_hot(t, 3) * x,
        np.ones(()),
        [0, 2],
        [0, 3],
        RuntimeError,
        "one_hot: class values must be smaller than num_classes (3), got 3",
    ),
}


def _inputs(x, t, device):
    t = np.asarray(t)
    t = munet.tensor(t.astype(np.float32) if t.dtype.kind == "f" else t, device=device)
    return munet.tensor(np.asarray(x, np.float32), device=device), t


def _raised(fn, x, t):
    """(type, message) of what computing ``fn(x, t)`` and reading the result raises."""
    with pytest.raises(Exception) as info:
        fn(x, t).sum().item()  # vulkan raises a device-side fault at this synchronization
    return type(info.value), str(info.value)


def _check(name, device):
    fn, x, good, bad, error, message = CASES[name]
    x, good_t = _inputs(x, good, device)
    _, bad_t = _inputs(x.cpu().numpy(), bad, device)
    fn(x, good_t).sum().item()
    eager = _raised(fn, x, bad_t)
    assert issubclass(eager[0], error) and message in eager[1]
    compiled = munet.compile(fn)
    compiled(x, good_t).sum().item()  # traced with valid values, replayed with bad ones
    assert _raised(compiled, x, bad_t) == eager
    assert compiled.stats()["traces"] == 1


@pytest.mark.parametrize("name", CASES)
def test_bad_values_raise_the_same_error_in_eager_and_compiled_steps(name):
    _check(name, "cpu")


@pytest.mark.parametrize("name", CASES)
def test_bad_values_raise_the_same_error_on_vulkan(name, vulkan):
    _check(name, vulkan)


def test_a_failed_check_in_a_compiled_step_names_the_user_line_and_writes_no_state():
    w = munet.nn.Parameter(munet.ones(3, 2))
    opt = munet.optim.SGD([w], lr=0.1)

    def step(t):
        opt.zero_grad()
        loss = F.cross_entropy(w * 2, t)
        loss.backward()
        opt.step()
        return loss

    compiled = munet.compile(step)
    compiled(munet.tensor([0, 1, 1]))
    before = w.tolist()
    with pytest.raises(IndexError, match="cross_entropy: target 2 is out of bounds") as info:
        compiled(munet.tensor([0, 2, 1]))
    assert w.tolist() == before
    note = "\n".join(getattr(info.value, "__notes__", []))
    assert "'check' node" in note and "test_checks.py" in note and "cross_entropy(" in note


def test_check_nodes_survive_the_compiler_passes():
    compiled = munet.compile(lambda x, t: F.nll_loss(x, t))
    compiled(munet.randn(2, 3), munet.tensor([0, 1]))
    assert "check" in compiled.describe()


def test_check_values_refuses_a_float_value_tensor():
    from munet.ops.checks import check_values

    with pytest.raises(RuntimeError, match="check: expected value of integer dtype"):
        check_values(munet.tensor([True]), "x", value=munet.tensor([1.0]))


def test_a_saved_program_keeps_its_checks(tmp_path):
    w = munet.randn(3, 4)
    compiled = munet.compile(lambda x, t: F.cross_entropy(x @ w, t))
    x = munet.randn(2, 3)
    compiled(x, munet.tensor([0, 1]))
    munet.save(compiled, tmp_path / "step.munet")
    program = munet.load(tmp_path / "step.munet", map_location=x.device)  # a program loads where it is asked
    program(x, munet.tensor([0, 3]))
    with pytest.raises(IndexError, match=r"cross_entropy: target 7 is out of bounds for 4 classes"):
        program(x, munet.tensor([0, 7])).item()  # a device raises at the next host read (docs/vulkan.md)

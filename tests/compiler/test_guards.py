"""munet.compile guards on the Python values a trace read (munet/compiler/guards.py): a change
retraces, with its reason in stats() and describe(); values the trace did not read do not."""

from types import SimpleNamespace

import numpy as np
import pytest

import munet
from munet import nn

SCALE = [2.0]
CONFIG = SimpleNamespace(scale=2.0, table=np.array([1.0, 2.0], dtype=np.float32))
WEIGHT = munet.ones(3)


def _scaled(x):
    return x * SCALE[0]


def _values(t) -> list:
    return t.numpy().tolist()


def test_a_global_list_changed_in_place_retraces_and_says_why():
    SCALE[0] = 2.0
    f = munet.compile(_scaled)
    x = munet.ones(3)
    assert _values(f(x)) == [2.0] * 3
    SCALE[0] = 5.0
    try:
        assert _values(f(x)) == [5.0] * 3
        stats = f.stats()
        assert stats["traces"] == 2
        assert stats["last_retrace_reason"] == "retrace: global 'SCALE' changed"
        text = f.describe()
        assert "global 'SCALE' == [5.0]" in text and "retrace: global 'SCALE' changed" in text
        assert _values(f(x)) == [5.0] * 3 and f.stats()["traces"] == 2  # guards hold again: a replay
    finally:
        SCALE[0] = 2.0


def test_specializations_for_earlier_values_stay_cached_and_the_cache_stays_bounded():
    scale = {"k": 1.0}
    f = munet.compile(lambda x: x * scale["k"], cache_size=2)
    x = munet.ones(2)
    for k in (1.0, 2.0, 1.0, 2.0):
        scale["k"] = k
        assert _values(f(x)) == [k, k]
    assert f.stats()["traces"] == 2 and f.stats()["cache_hits"] == 2
    scale["k"] = 3.0
    assert _values(f(x)) == [3.0, 3.0]
    assert f.stats()["evictions"] == 1 and f.stats()["cache_entries"] == 2


def test_closure_cells_rebound_or_mutated_retrace():
    factor = 2.0
    options = {"offset": 0.0}

    def fn(x):
        return x * factor + options["offset"]

    f = munet.compile(fn)
    x = munet.ones(2)
    assert _values(f(x)) == [2.0, 2.0]
    factor = 3.0  # noqa: F841 (read by fn through its closure)
    assert _values(f(x)) == [3.0, 3.0]
    assert "closure variable 'factor'" in f.stats()["last_retrace_reason"]
    options["offset"] = 1.0
    assert _values(f(x)) == [4.0, 4.0]
    assert f.stats()["last_retrace_reason"] == "retrace: closure variable 'options' changed"


class _Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0
        self.calls_outside = 0  # never read by forward

    def forward(self, x):
        return self.helper(x) + 0.0

    def helper(self, x):
        return x * self.scale


def test_module_attributes_read_by_forward_and_its_methods_are_guarded():
    m = _Scale()
    f = munet.compile(m)
    x = munet.ones(2)
    with munet.no_grad():
        assert _values(f(x)) == [2.0, 2.0]
        m.scale = 4.0
        assert _values(f(x)) == [4.0, 4.0]
        assert f.stats()["last_retrace_reason"] == "retrace: attribute '_Scale.scale' changed"
        traces = f.stats()["traces"]
        m.calls_outside += 1  # not read while tracing: no retrace
        f(x)
        assert f.stats()["traces"] == traces


def test_attributes_of_library_modules_are_guarded():
    act = nn.Sequential(nn.Linear(2, 2), nn.LeakyReLU(0.5))
    f = munet.compile(act)
    x = -munet.ones(1, 2) * 10
    with munet.no_grad():
        f(x)
        act[1].negative_slope = 0.1
        np.testing.assert_allclose(f(x).numpy(), act(x).numpy(), rtol=1e-6)
        assert "negative_slope" in f.stats()["last_retrace_reason"]
        act[0] = nn.Linear(2, 2)  # a replaced submodule
        np.testing.assert_allclose(f(x).numpy(), act(x).numpy(), rtol=1e-6)
        act[0].weight = nn.Parameter(munet.zeros(2, 2))  # a replaced parameter
        np.testing.assert_allclose(f(x).numpy(), act(x).numpy(), rtol=1e-6)


class _Doubler:
    def __init__(self):
        self.factor = 2.0

    def apply(self, x):
        return x * self.factor


DOUBLER = _Doubler()


def _through_helpers(x):
    return DOUBLER.apply(x) + _config_scaled(x)


def _config_scaled(x):
    return x * CONFIG.scale + munet.tensor(CONFIG.table)


def test_attribute_chains_helpers_and_methods_of_user_objects_are_guarded():
    f = munet.compile(_through_helpers)
    x = munet.ones(2)
    assert _values(f(x)) == [5.0, 6.0]
    try:
        DOUBLER.factor = 3.0
        assert _values(f(x)) == [6.0, 7.0]
        assert f.stats()["last_retrace_reason"] == "retrace: attribute 'DOUBLER.factor' changed"
        CONFIG.scale = 1.0
        assert _values(f(x)) == [5.0, 6.0]
        assert f.stats()["last_retrace_reason"] == "retrace: global 'CONFIG.scale' changed"
        CONFIG.table[1] = 9.0  # a small NumPy array the trace made a constant: compared by content
        assert _values(f(x)) == [5.0, 13.0]
    finally:
        DOUBLER.factor, CONFIG.scale = 2.0, 2.0
        CONFIG.table[1] = 2.0


def test_tensors_rebound_or_read_on_the_host_are_not_silently_stale():
    global WEIGHT
    f = munet.compile(lambda x: x * WEIGHT)
    x = munet.ones(3)
    assert _values(f(x)) == [1.0] * 3
    WEIGHT.fill_(2.0)  # used by ops: read at every call, no retrace
    assert _values(f(x)) == [2.0] * 3 and f.stats()["traces"] == 1
    saved = WEIGHT
    try:
        WEIGHT = munet.full((3,), 3.0)  # rebound: retraces
        assert _values(f(x)) == [3.0] * 3
        assert f.stats()["last_retrace_reason"] == "retrace: global 'WEIGHT' changed"
    finally:
        WEIGHT = saved.fill_(1.0)

    level = munet.tensor(2.0)
    g = munet.compile(lambda x: x * level.item())  # the trace bakes the value it read
    assert _values(g(x)) == [2.0] * 3
    level.fill_(7.0)
    assert _values(g(x)) == [7.0] * 3
    assert "tensor read on the host at" in g.stats()["last_retrace_reason"]
    assert "level.item()" in g.stats()["last_retrace_reason"]


def test_a_training_step_keeps_its_trace_count_with_guards():
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Dropout(0.1), nn.Linear(8, 3))
    opt = munet.optim.AdamW(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)

    @munet.compile
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    x, y = munet.randn(6, 4), munet.randint(0, 3, (6,))
    for _ in range(4):
        step(x, y)
    assert step.stats()["traces"] == 2  # the first step creates optimizer state
    assert step.stats()["guards"] > 0
    loss_fn.label_smoothing = 0.0
    step(x, y)
    assert step.stats()["last_retrace_reason"] == "retrace: attribute 'loss_fn.label_smoothing' changed"


@pytest.mark.parametrize("value", [float("nan"), (1, 2.0, "a"), None])
def test_guards_on_nan_tuples_and_none_hold_while_unchanged(value):
    box = [value]
    f = munet.compile(lambda x: x + (0.0 if box[0] is None else 1.0))
    x = munet.ones(1)
    f(x)
    f(x)
    assert f.stats()["traces"] == 1


def test_equal_values_of_another_type_and_large_containers():
    box = [2.0]
    f = munet.compile(lambda x: x * box[0])
    x = munet.ones(1)
    f(x)
    box[0] = 2  # == 2.0, but an int: the trace may differ (integer arithmetic), so it retraces
    f(x)
    assert f.stats()["traces"] == 2
    big = list(range(5000))  # over the bound: compared by identity, so an in-place change is not seen
    g = munet.compile(lambda x: x * big[0])
    g(x)
    assert "is the same list object" in g.describe()


class _Trainer:
    def __init__(self):
        self.k = 2.0

    def run(self, x):
        return x * self.k


def test_a_compiled_bound_method_guards_its_object_attributes():
    trainer = _Trainer()
    f = munet.compile(trainer.run)
    x = munet.ones(1)
    assert _values(f(x)) == [2.0]
    trainer.k = 3.0
    assert _values(f(x)) == [3.0]
    assert f.stats()["last_retrace_reason"] == "retrace: attribute '_Trainer.k' changed"


class _Settings:
    scale = 2.0  # a class attribute, read through the class and through instances


class _ClassScaled(nn.Module):
    offset = 0.0

    def forward(self, x):
        return x * _Settings.scale + self.offset


def test_class_attributes_are_guarded_through_the_class_and_instances():
    m = _ClassScaled()
    f = munet.compile(m)
    x = munet.ones(1)
    with munet.no_grad():
        assert _values(f(x)) == [2.0]
        try:
            _Settings.scale = 3.0
            assert _values(f(x)) == [3.0]
            assert f.stats()["last_retrace_reason"] == "retrace: global '_Settings.scale' changed"
            m.offset = 1.0  # an instance attribute now shadows the class one
            assert _values(f(x)) == [4.0]
            _ClassScaled.offset = 5.0  # shadowed: no change seen, and none needed
            assert _values(f(x)) == [4.0]
        finally:
            _Settings.scale = 2.0

"""munet.profiler: per-op times from the dispatcher, record_function ranges, key_averages().table()."""

import time

import pytest

import munet
from munet.ops._registry import OP_OBSERVER
from munet.profiler import ProfilerActivity, profile, record_function


def test_profile_counts_ops_and_nests_record_function():
    x = munet.randn(8, 8, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("my_block"):
            y = (x @ x).relu()
            time.sleep(0.01)
        y.sum().backward()
    assert OP_OBSERVER.observe is None  # the hook is gone after the block
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["matmul"].count >= 2  # forward and the backward's matmuls
    block = rows["my_block"]
    assert block.count == 1 and block.cpu_time_total >= 1e4  # the 10 ms sleep, in microseconds
    assert block.self_cpu_time_total < block.cpu_time_total  # the ops inside are its children
    for r in rows.values():
        assert 0 <= r.self_cpu_time_total <= r.cpu_time_total + 1e-6
    by_shape = prof.key_averages(group_by_input_shape=True)
    assert any(r.key == "matmul" and r.input_shapes == [[8, 8], [8, 8]] for r in by_shape)


def test_table_sorts_and_limits():
    x = munet.randn(64, 64)
    with profile() as prof:
        for _ in range(3):
            x = (x @ x).tanh()
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=2)
    lines = table.splitlines()
    assert "Name" in lines[1] and "Self CPU %" in lines[1] and "# of Calls" in lines[1]
    assert len(lines) == 7 and lines[-1].startswith("Self CPU time total:")
    totals = sorted(prof.key_averages(), key=lambda r: r.cpu_time_total, reverse=True)
    assert lines[3].split()[0] == totals[0].key and lines[4].split()[0] == totals[1].key
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="nope")


def test_record_function_outside_a_profile_and_as_decorator():
    @record_function("decorated")
    def f(a):
        return a + 1

    assert f(munet.ones(1)).tolist() == [2.0]  # no profile: nothing recorded, nothing raised
    with profile() as prof:
        f(munet.ones(1))
    assert [e.name for e in prof.events()] == ["decorated", "add"]

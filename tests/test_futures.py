"""munet.futures.Future against torch.futures.Future: completion, then-chains, callbacks, errors."""

import pytest

import munet

torch_futures = pytest.importorskip("torch.futures")


@pytest.mark.parametrize("module", [munet.futures, torch_futures], ids=["munet", "torch"])
def test_future_completion_then_and_callbacks(module):
    future = module.Future()
    chained = future.then(lambda f: f.value() * 2)
    seen = []
    future.add_done_callback(lambda f: seen.append(f.value()))
    assert not future.done()
    future.set_result(21)
    assert future.done() and future.wait() == 21 and seen == [21]
    assert chained.wait() == 42
    with pytest.raises(RuntimeError, match="can only be marked completed once"):
        future.set_result(1)
    failing = module.Future()
    failing.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        failing.wait()
    assert [f.wait() for f in module.collect_all([future, chained]).wait()] == [21, 42]
    assert module.wait_all([future, chained]) == [21, 42]


def test_waiting_on_a_future_nothing_completes_raises_instead_of_hanging():
    with pytest.raises(RuntimeError, match="nothing will complete this future"):
        munet.futures.Future().wait()


def test_work_future_holds_the_outputs():
    import munet.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), world_size=1, rank=0)
    try:
        t = munet.ones(2)
        future = dist.all_reduce(t, async_op=True).get_future()
        assert future.wait()[0] is t and future.then(lambda f: f.value()[0].sum().item()).wait() == 2.0
    finally:
        dist.destroy_process_group()

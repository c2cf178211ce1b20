"""munet/backends/vulkan/runtime.py and memory.py under threads: one device, many callers."""

import threading

import numpy as np

import munet

THREADS = 4
ROUNDS = 8


def _compiled(device):
    """A compiled function traced here, before the threads start, and replayed by all of them."""
    fn = munet.compile(lambda a, b: ((a @ b).tanh() * 2).sum(0))
    fn(munet.ones(24, 40, device=device), munet.ones(40, 16, device=device))
    return fn


def _work(device, seed: int, fn) -> list:
    """Private work on ``device``: elementwise chains, matmul, reductions, host reads in between,
    calls of a compiled function (one command buffer per call, while other threads record), the
    allocator's statistics and cache release."""
    rng = np.random.default_rng(seed)
    a = munet.tensor(rng.standard_normal((24, 40)).astype(np.float32), device=device)
    b = munet.tensor(rng.standard_normal((40, 16)).astype(np.float32), device=device)
    results = []
    for step in range(ROUNDS):
        h = ((a * 0.5 + step).relu() - a.exp().clamp(max=3.0)) @ b
        results.append(h.sum(1).cpu().numpy())
        results.append(np.array([h.amax().item(), (h > 0).sum().item()]))
        mask = munet.tensor(rng.random(24) > 0.5, device=device)
        results.append(munet.nonzero(mask).cpu().numpy())  # reads a count back in the middle of a kernel
        a = a + h.mean() * 1e-3
        results.append(fn(a, b).cpu().numpy())
        munet.vulkan.memory_stats(device)
        if step == ROUNDS // 2:
            munet.vulkan.empty_cache(device)  # destroys free blocks while other threads record
    results.append(a.cpu().numpy())
    return results


def test_threads_on_private_tensors_match_one_thread(vulkan):
    """Regression: threads sharing the runtime's encoder raised 'Encoding must not have ended' and
    could leave the device unusable for the rest of the process."""
    compiled = _compiled(vulkan)
    expected = [_work(vulkan, seed, compiled) for seed in range(THREADS)]
    for _ in range(2):
        got, errors = {}, []
        barrier = threading.Barrier(THREADS)

        def run(seed):
            try:
                barrier.wait()
                got[seed] = _work(vulkan, seed, compiled)
            except Exception as exc:  # reported below, with the thread's seed
                errors.append(f"thread {seed}: {type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=run, args=(seed,)) for seed in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[0]
        for seed in range(THREADS):
            for want, have in zip(expected[seed], got[seed]):
                np.testing.assert_array_equal(have, want)
    assert (munet.ones(3, device=vulkan) * 2).cpu().tolist() == [2.0, 2.0, 2.0]


def test_garbage_collected_buffers_are_filed_by_the_next_call(vulkan):
    """A buffer's finalizer only queues its block (it may run in any thread, inside another's lock);
    the next allocator call files it and the freed bytes show in memory_stats()."""
    import gc

    munet.vulkan.synchronize(vulkan)
    before = munet.vulkan.memory_stats(vulkan)
    x = munet.zeros(1 << 16, device=vulkan)
    held = munet.vulkan.memory_stats(vulkan)["allocated_bytes"]
    assert held >= before["allocated_bytes"] + (1 << 18)
    del x
    gc.collect()
    after = munet.vulkan.memory_stats(vulkan)
    assert after["allocated_bytes"] <= held - (1 << 18)
    assert after["frees"] >= before["frees"] + 1

"""On a real GPU (marker ``cuda``; scripts/gpu_check.sh runs these): pinned host memory and
``non_blocking`` transfers through CuPy's pinned pool, the compaction kernels (``nonzero``,
``masked_select``, ``unique`` of values and of slices) and fused integer chains, each against the cpu. Without a GPU they
skip; ``test_cuda_pinned_emulated.py``, ``test_cuda_compaction_emulated.py`` and
``test_cuda_fused_integers_emulated.py`` check the same code on the fake devices."""

import numpy as np
import pytest

import munet
from tests.compiler.integer_chains import assert_bit_identical, cases, fused_exact_ops

pytestmark = pytest.mark.cuda


def test_pinned_round_trips_overlap_and_give_the_values_back():
    x = munet.tensor(np.random.default_rng(0).standard_normal((1 << 20,)).astype(np.float32))
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned()
    stream = munet.cuda.Stream()
    with munet.cuda.stream(stream):
        device = pinned.to("cuda", non_blocking=True)
        back = (device * 2).to("cpu", non_blocking=True)
    stream.synchronize()
    assert back.is_pinned()
    np.testing.assert_array_equal(back.numpy(), x.numpy() * 2)
    np.testing.assert_array_equal(x.to("cuda", non_blocking=True).cpu().numpy(), x.numpy())  # pageable


def test_compaction_kernels_equal_the_cpu():
    rng = np.random.default_rng(1)
    x = (rng.integers(-2, 3, size=(300, 70)) * (rng.random((300, 70)) < 0.2)).astype(np.float32)
    host, device = munet.tensor(x), munet.tensor(x).cuda()
    np.testing.assert_array_equal(munet.nonzero(device).cpu().numpy(), munet.nonzero(host).numpy())
    np.testing.assert_array_equal(munet.masked_select(device, device > 0).cpu().numpy(), x[x > 0])
    for fn in (munet.unique, munet.unique_consecutive):
        for dim in (None, 0, 1):  # values, slices along dim 0 (rows) and dim 1 (a strided copy)
            got = fn(device[:20, :3], return_inverse=True, return_counts=True, dim=dim)
            want = fn(host[:20, :3], return_inverse=True, return_counts=True, dim=dim)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g.cpu().numpy(), w.numpy())


@pytest.mark.parametrize("name, fn, arrays", cases(seed=2), ids=[c[0] for c in cases(seed=2)])
def test_fused_integer_chains_equal_the_cpu(name, fn, arrays):
    host = [munet.tensor(a) for a in arrays]
    compiled = munet.compile(lambda *a: fn(munet, *a))
    got = compiled(*[t.cuda() for t in host])
    got = tuple(t.cpu().numpy() for t in (got if isinstance(got, tuple) else (got,)))
    want = fn(munet, *host)
    assert_bit_identical(got, tuple(t.numpy() for t in (want if isinstance(want, tuple) else (want,))), name)
    assert fused_exact_ops(compiled), compiled.describe()

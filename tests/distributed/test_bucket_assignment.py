"""DDP's bucket layout is PyTorch's: ``assign_buckets`` against ``torch.distributed``'s own assignment
(``_compute_bucket_assignment_by_size``) on random parameter lists; the rebuild after the first
backward is checked on ranks by worker_ddp.py."""

import numpy as np
import pytest
import torch
import torch.distributed as tdist

import munet
from munet.nn.parallel.reducer import assign_buckets


def _parameters(rng, n, mixed):
    sizes = rng.integers(1, 400, n)
    wide = rng.random(n) < 0.3 if mixed else np.zeros(n, bool)
    ours = [munet.zeros(int(s), dtype=munet.float64 if w else munet.float32) for s, w in zip(sizes, wide)]
    theirs = [torch.zeros(int(s), dtype=torch.float64 if w else torch.float32) for s, w in zip(sizes, wide)]
    return ours, theirs


def _limits(rng):
    limits = [int(rng.integers(100, 2000))]
    if rng.random() < 0.5:
        limits.append(int(rng.integers(100, 4000)))
    return limits


@pytest.mark.parametrize("seed", range(4))
def test_registration_order_layout_is_pytorchs(seed):
    """The layout before a rebuild (and with find_unused_parameters): registration order, sorted by
    first parameter, mixed dtypes in buckets of their own."""
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n = int(rng.integers(1, 9))
        ours, theirs = _parameters(rng, n, mixed=True)
        limits = _limits(rng)
        want, _ = tdist._compute_bucket_assignment_by_size(theirs, limits)
        got = sorted(assign_buckets(list(range(n)), ours, limits, lambda p: "cpu"))
        assert got == [list(b) for b in want], f"limits {limits}, sizes {[p.numel() for p in ours]}"


@pytest.mark.parametrize("seed", range(4))
def test_ready_order_layout_is_pytorchs(seed):
    """The rebuilt layout: parameters in the order their gradients became ready, buckets in the order
    they closed (PyTorch orders the buckets still open at the end by its hash map, so one dtype here)."""
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n = int(rng.integers(1, 9))
        ours, theirs = _parameters(rng, n, mixed=False)
        limits = _limits(rng)
        order = [int(i) for i in rng.permutation(n)]
        want, _ = tdist._compute_bucket_assignment_by_size([theirs[i] for i in order], limits, [], order)
        got = assign_buckets(order, ours, limits, lambda p: "cpu")
        assert got == [list(b) for b in want], f"order {order}, limits {limits}"


def test_first_bucket_is_one_mib_by_default():
    """PyTorch's MLP example: 1 MiB first, then the rest (its logged ``rebuilt_bucket_sizes`` for
    256-512-512-10 are 1071144 and 526336 bytes)."""
    from munet.nn.parallel.reducer import FIRST_BUCKET_BYTES

    shapes = [(512, 256), (512,), (512, 512), (512,), (10, 512), (10,)]
    params = [munet.zeros(s) for s in shapes]
    buckets = assign_buckets([5, 4, 3, 2, 1, 0], params, [FIRST_BUCKET_BYTES, 25 * 2**20], lambda p: "cpu")
    assert buckets == [[5, 4, 3, 2], [1, 0]]
    assert [sum(params[i].numel() * 4 for i in b) for b in buckets] == [1071144, 526336]

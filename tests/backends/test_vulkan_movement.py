"""Movement, embedding and scatter-add kernels on vulkan against the cpu backend: forward and
gradients (through ``loss = (f(x) * r).sum()`` with a fixed random ``r``).

Tolerances: movement ops copy elements, so they match exactly; the scatter-adds
(``strided_scatter_add``, ``embedding_backward``) sum in float32 in a fixed order where cpu
sums in float64, so they agree to rtol/atol 1e-5.
"""

import numpy as np
import pytest

import munet
import munet.nn.functional as F

EXACT = dict(rtol=0, atol=0)
SUMS = dict(rtol=1e-5, atol=1e-5)


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def run(fn, arrays, device, grad):
    tensors = [munet.tensor(a, device=device, requires_grad=grad and a.dtype == np.float32) for a in arrays]
    out = fn(*tensors)
    grads = []
    if grad:
        (out * munet.tensor(rand(*out.shape, seed=5), device=device)).sum().backward()
        grads = [t.grad.cpu().numpy() for t in tensors if t.requires_grad]
    return out.detach().cpu().numpy(), grads


def check(fn, *arrays, vulkan, grad=True, tol=EXACT, grad_tol=SUMS):
    cpu_out, cpu_grads = run(fn, arrays, "cpu", grad)
    gpu_out, gpu_grads = run(fn, arrays, vulkan, grad)
    assert gpu_out.shape == cpu_out.shape and gpu_out.dtype == cpu_out.dtype
    np.testing.assert_allclose(gpu_out, cpu_out, equal_nan=True, **tol)
    assert len(gpu_grads) == len(cpu_grads)
    for g, c in zip(gpu_grads, cpu_grads):
        np.testing.assert_allclose(g, c, **grad_tol)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_modes(vulkan, mode):
    x = rand(2, 3, 7, 5)
    check(lambda a: F.pad(a, (1, 2, 3, 1), mode=mode), x, vulkan=vulkan)
    check(lambda a: F.pad(a.transpose(2, 3), (2, 0, 0, 3), mode=mode), x, vulkan=vulkan)  # strided input
    check(lambda a: F.pad(a, (2, 3), mode=mode), rand(2, 3, 6), vulkan=vulkan)


def test_constant_pad_values_negative_and_dtypes(vulkan):
    check(lambda a: F.pad(a, (1, 1, 0, 2), value=-1.5), rand(3, 4), vulkan=vulkan)
    check(lambda a: F.pad(a, (-1, 2, 1, -2)), rand(5, 6), vulkan=vulkan)  # negative pads crop
    check(
        lambda a: F.pad(a, (2, 1), value=7), np.arange(-6, 6).reshape(3, 4).astype(np.int64), vulkan=vulkan, grad=False
    )
    check(lambda a: F.pad(a, (1, 0)), np.zeros((0, 3), np.float32), vulkan=vulkan, grad=False)


def test_flip_roll(vulkan):
    x = rand(3, 4, 5)
    check(lambda a: a.flip(0, 2), x, vulkan=vulkan)
    check(lambda a: a.transpose(0, 2).flip(-1), x, vulkan=vulkan)
    check(lambda a: a.roll(2, 1), x, vulkan=vulkan)
    check(lambda a: a.roll((-7, 3), (0, 2)), x, vulkan=vulkan)
    check(lambda a: a.transpose(1, 2).roll(11), x, vulkan=vulkan)  # flattened roll of a strided view
    check(lambda a: a.flip(0), np.array([True, False, False]), vulkan=vulkan, grad=False)
    check(lambda a: a.roll(1, 0), np.array(2.5, np.float32).reshape(1), vulkan=vulkan)


def test_tril_triu(vulkan):
    x = rand(2, 5, 7)
    for k in (-2, 0, 3, 9):
        check(lambda a, k=k: a.tril(k), x, vulkan=vulkan)
        check(lambda a, k=k: a.triu(k), x, vulkan=vulkan)
    check(lambda a: a.mT.triu(1), x, vulkan=vulkan)
    check(lambda a: a.clone().tril_(-1), x, vulkan=vulkan)
    check(lambda a: a.clone().triu_(2), x, vulkan=vulkan)
    check(lambda a: a.tril(), np.arange(12).reshape(3, 4).astype(np.int64), vulkan=vulkan, grad=False)


def test_cat(vulkan):
    a, b, c = rand(2, 3, 4), rand(2, 5, 4), rand(2, 1, 4)
    check(lambda x, y, z: munet.cat([x, y, z], 1), a, b, c, vulkan=vulkan)
    check(lambda x, y: munet.cat([x.transpose(0, 2), y.transpose(0, 2)], 1), a, b, vulkan=vulkan)
    check(lambda x, y: munet.cat([x, y], -1), rand(3, 0), rand(3, 4), vulkan=vulkan)
    check(lambda x, y: munet.cat([x, y]), np.zeros(0, np.float32), rand(2, 3), vulkan=vulkan)  # legacy empty
    check(lambda x: munet.stack([x, x * 2, x + 1], 1), rand(4, 3), vulkan=vulkan)
    ints = np.arange(6).reshape(2, 3).astype(np.int64)
    check(lambda x: munet.cat([x, -x], 0), ints, vulkan=vulkan, grad=False)


def test_one_hot(vulkan):
    i = np.random.default_rng(0).integers(0, 9, (4, 37)).astype(np.int64)
    check(lambda t: F.one_hot(t, 9), i, vulkan=vulkan, grad=False)
    check(lambda t: F.one_hot(t.T, 12), i, vulkan=vulkan, grad=False)


@pytest.mark.parametrize("padding_idx,scale", [(None, False), (3, False), (None, True), (-1, True)])
def test_embedding_forward_and_gradient(vulkan, padding_idx, scale):
    rng = np.random.default_rng(1)
    weight, idx = rand(11, 6), rng.integers(0, 11, (7, 9)).astype(np.int64)
    idx[0, :] = 3  # a row used many times: its gradient sums 9+ rows
    fn = lambda i, w: F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=scale)  # noqa: E731
    check(lambda w: fn(munet.tensor(idx, device=w.device), w), weight, vulkan=vulkan)
    check(lambda w: fn(munet.tensor(idx, device=w.device).T, w.T.contiguous().T), weight, vulkan=vulkan)


def test_embedding_backward_large(vulkan):
    # 5000 lookups into 300 rows: a multi-stage bitonic sort and long runs per row
    rng = np.random.default_rng(2)
    weight, idx = rand(300, 33), rng.integers(0, 300, 5000).astype(np.int32)
    idx[:1000] = 17
    check(
        lambda w: F.embedding(munet.tensor(idx, device=w.device), w),
        weight,
        vulkan=vulkan,
        grad_tol=dict(rtol=2e-5, atol=2e-5),
    )


def test_strided_scatter_add_through_overlapping_views(vulkan):
    x = rand(2, 3, 50)
    check(lambda a: a.unfold(2, 7, 3), x, vulkan=vulkan)  # overlapping windows
    check(lambda a: a.unfold(2, 2, 5), x, vulkan=vulkan)  # gaps between windows
    check(lambda a: a.as_strided((4, 5, 6), (3, 2, 1), 2), rand(40), vulkan=vulkan)
    check(lambda a: a.as_strided((3, 4), (0, 1)), rand(10), vulkan=vulkan)  # zero stride: the same elements 3 times
    check(lambda a: a.transpose(0, 1).unfold(0, 2, 1), rand(4, 5), vulkan=vulkan)
    check(lambda a: a.unfold(0, 1, 1), rand(1), vulkan=vulkan)


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=(2, 3), stride=2, padding=1, dilation=(2, 1))])
def test_unfold_fold(vulkan, kw):
    x = rand(2, 3, 9, 8)
    check(lambda a: F.unfold(a, **kw), x, vulkan=vulkan)
    cols = F.unfold(munet.tensor(x), **kw).numpy()
    check(lambda c: F.fold(c, (9, 8), **kw), cols, vulkan=vulkan, tol=SUMS)


def test_as_strided_is_bounds_checked_against_the_storage(vulkan):
    x = munet.zeros(2, 3, 4, device=vulkan)
    with pytest.raises(RuntimeError, match=r"out of bounds for storage of size 24"):
        x.as_strided((5, 5), (5, 1))
    assert x.as_strided((4, 6), (6, 1)).shape == (4, 6)

"""Indexing and sorting kernels on vulkan against the cpu backend: forward and gradients, and the
device-side index checks (an out-of-range index raises the cpu's error at the next synchronization).

Exact equality for index results (gathers, sorts, integer outputs); float accumulation
(scatter add, index_put with accumulate) uses float atomics whose order varies, so those
compare with rtol 1e-5 / atol 1e-5.
"""

import numpy as np
import pytest

import munet
import munet.nn.functional as F

RTOL, ATOL = 1e-5, 1e-5


def to(v, *items):
    return [t.to(v) if isinstance(t, munet.Tensor) else t for t in items]


def same(gpu, cpu, rtol=0.0, atol=0.0):
    assert gpu.device.type == "vulkan"
    assert gpu.dtype is cpu.dtype and tuple(gpu.shape) == tuple(cpu.shape), (gpu.dtype, gpu.shape, cpu.shape)
    np.testing.assert_allclose(gpu.detach().cpu().numpy(), cpu.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True)


def rand(*shape, seed=0):
    return munet.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def ints(high, *shape, seed=1, low=0):
    return munet.tensor(np.random.default_rng(seed).integers(low, high, shape))


def grads(fn, *inputs, vulkan):
    """Forward and input gradients of ``fn(*inputs).sum()``-style scalar graphs on cpu and vulkan."""
    results = []
    for dev in ("cpu", vulkan):
        leaves = [t.to(dev).detach().requires_grad_(True) if t.dtype.is_floating_point else t.to(dev) for t in inputs]
        out = fn(*leaves)
        (out * munet.arange(out.numel(), dtype=munet.float32).reshape(out.shape).to(dev)).sum().backward()
        results.append((out, [t.grad for t in leaves if t.dtype.is_floating_point]))
    (c_out, c_grads), (g_out, g_grads) = results
    same(g_out, c_out, RTOL, ATOL)
    for g, c in zip(g_grads, c_grads):
        same(g, c, RTOL, ATOL)


# gather / scatter ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_strided_with_grad(vulkan, dim):
    x = rand(7, 9, 5)
    index = ints(5, 7, 9, 3, seed=2) if dim == -1 else ints(7 if dim == 0 else 9, 4, 9, 5, seed=3)
    xt = x.transpose(0, 1).contiguous().transpose(0, 1)  # strided input
    grads(lambda a, i: munet.gather(a, dim, i), xt, index, vulkan=vulkan)


def test_gather_edge_sizes(vulkan):
    x, i0 = rand(5, 3), ints(5, 0, 3)
    same(munet.gather(*to(vulkan, x, 0, i0)), munet.gather(x, 0, i0))
    s, i1 = rand(1), ints(1, 1)
    same(munet.gather(*to(vulkan, s, 0, i1)), munet.gather(s, 0, i1))


@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
def test_scatter(vulkan, reduce):
    x, src = rand(6, 300), rand(4, 301, seed=5)  # src larger than index: its leading block is used
    if reduce is None:  # unique targets per column, so the result does not depend on write order
        index = munet.tensor(np.stack([np.random.default_rng(k).permutation(6)[:4] for k in range(300)], 1))
    else:
        index = ints(6, 4, 300)
    same(
        munet.scatter(*to(vulkan, x, 0, index, src), reduce=reduce),
        munet.scatter(x, 0, index, src, reduce=reduce),
        RTOL,
        ATOL,
    )
    same(munet.scatter(*to(vulkan, x, 1, index, 2.5)), munet.scatter(x, 1, index, 2.5))


def test_scatter_add_grad_and_int(vulkan):
    index = ints(5, 8, 3)
    grads(lambda a, s: munet.scatter_add(a, 0, index.to(a.device), s), rand(5, 3), rand(8, 3, seed=4), vulkan=vulkan)
    xi, si = ints(100, 5, 3), ints(100, 8, 3, seed=7)
    same(munet.scatter_add(*to(vulkan, xi, 0, index, si)), munet.scatter_add(xi, 0, index, si))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(vulkan, reduce, include_self):
    x, src, index = rand(5, 4), rand(9, 4, seed=3), ints(5, 9, 4)
    grads(
        lambda a, s: munet.scatter_reduce(a, 0, index.to(a.device), s, reduce, include_self=include_self),
        x,
        src,
        vulkan=vulkan,
    )
    xi, si = ints(20, 5, 4, low=-20), ints(20, 9, 4, seed=8, low=-20)
    cpu = munet.scatter_reduce(xi, 0, index, si, reduce, include_self=include_self)
    same(munet.scatter_reduce(*to(vulkan, xi, 0, index, si), reduce, include_self=include_self), cpu)


# advanced indexing ---------------------------------------------------------------------------------


INDEXES = {
    "int tensor": lambda v: (munet.tensor([0, 4, -1, 2, 4]).to(v),),
    "two adjacent": lambda v: (slice(None), munet.tensor([[0], [2]]).to(v), munet.tensor([1, 0, 3]).to(v)),
    "separated": lambda v: (munet.tensor([1, 0]).to(v), slice(1, 3), munet.tensor([3, -4]).to(v)),
    "bool mask": lambda v: (munet.tensor([True, False, True, True, False]).to(v),),
    "mask + slice": lambda v: (slice(None), munet.tensor([True, False, True]).to(v)),
}


@pytest.mark.parametrize("name", sorted(INDEXES))
def test_getitem_setitem_with_grad(vulkan, name):
    x = rand(5, 3, 4)

    def get(a):
        return a[INDEXES[name](a.device)]

    grads(get, x, vulkan=vulkan)

    def put(a, v):
        b = a * 1.0
        b[INDEXES[name](a.device)] = v
        return b

    shape = tuple(get(x).shape)
    grads(put, x, rand(*shape[-1:], seed=6), vulkan=vulkan)  # values broadcast over the indexed region


def test_index_put_accumulate_duplicates(vulkan):
    x, values = rand(6, 4), rand(50, 4, seed=2)
    index = ints(6, 50)
    cpu = munet.index_put(x, (index,), values, accumulate=True)
    same(munet.index_put(*to(vulkan, x), (index.to(vulkan),), values.to(vulkan), accumulate=True), cpu, RTOL, ATOL)
    xi = ints(9, 6, 4)
    cpu = munet.index_put(xi, (index,), ints(9, 50, 4, seed=4), accumulate=True)
    gpu = munet.index_put(xi.to(vulkan), (index.to(vulkan),), ints(9, 50, 4, seed=4).to(vulkan), accumulate=True)
    same(gpu, cpu)


def test_index_select_embedding_and_take(vulkan):
    weight, idx = rand(11, 6), ints(11, 4, 7)
    grads(lambda w: F.embedding(idx.to(w.device), w), weight, vulkan=vulkan)
    grads(lambda w: munet.index_select(w, 1, ints(6, 9).to(w.device)), weight, vulkan=vulkan)
    grads(lambda w: munet.take(w, ints(66, 3, 3).to(w.device)), weight, vulkan=vulkan)


def test_cross_entropy_ignore_index(vulkan):
    logits = rand(7, 5)
    target = munet.tensor([0, 4, -100, 2, 2, -100, 1])
    grads(lambda z: F.cross_entropy(z, target.to(z.device), ignore_index=-100).reshape(1), logits, vulkan=vulkan)


# masks -------------------------------------------------------------------------------------------------


def test_masked_fill_broadcast_and_grad(vulkan):
    x = rand(4, 1, 6)
    mask = munet.tensor(np.random.default_rng(3).random((3, 6)) > 0.5)
    same(munet.masked_fill(*to(vulkan, x, mask), -np.inf), munet.masked_fill(x, mask, -np.inf))
    grads(lambda a, val: munet.masked_fill(a, mask.to(a.device), val), x, munet.tensor(2.0), vulkan=vulkan)
    xi = ints(5, 3, 6)
    same(munet.masked_fill(*to(vulkan, xi, mask), 7), munet.masked_fill(xi, mask, 7))
    xt = x.expand(4, 3, 6).transpose(0, 2)
    same(munet.masked_select(*to(vulkan, xt, mask.t().unsqueeze(-1))), munet.masked_select(xt, mask.t().unsqueeze(-1)))


@pytest.mark.parametrize("shape", [(), (0, 3), (1,), (7, 1, 5), (70001,)])
def test_nonzero(vulkan, shape):
    x = munet.tensor((np.random.default_rng(0).random(shape) > 0.6).astype(np.float32))
    same(munet.nonzero(x.to(vulkan)), munet.nonzero(x))
    if len(shape) == 3:
        xt = x.transpose(0, 2)
        same(munet.nonzero(xt.to(vulkan).bool()), munet.nonzero(xt.bool()))


# sort / topk / kthvalue / unique / searchsorted ------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 5, 300, 513, 2500])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_with_ties(vulkan, n, descending):
    rng = np.random.default_rng(n)
    x = rng.integers(0, 7, (3, n)).astype(np.float32)
    x[0, rng.integers(0, n, 2)] = np.nan
    t = munet.tensor(x)
    for dim, src in ((1, t), (0, t.t())):  # the transposed case sorts strided columns
        c, g = (
            munet.sort(src, dim=dim, descending=descending, stable=True),
            munet.sort(src.to(vulkan), dim=dim, descending=descending, stable=True),
        )
        same(g.values, c.values)
        same(g.indices, c.indices)
    ti = munet.tensor(rng.integers(-50, 50, (4, n)))
    same(munet.sort(ti.to(vulkan), descending=descending).indices, munet.sort(ti, descending=descending).indices)


def test_sort_topk_kthvalue_grads(vulkan):
    x = rand(4, 9, 6)
    grads(lambda a: munet.sort(a, dim=1).values, x, vulkan=vulkan)
    grads(lambda a: munet.topk(a, 3, dim=-1).values, x, vulkan=vulkan)
    grads(lambda a: munet.topk(a, 2, dim=0, largest=False).values, x, vulkan=vulkan)
    grads(lambda a: munet.kthvalue(a, 4, dim=1).values, x, vulkan=vulkan)
    grads(lambda a: munet.kthvalue(a, 1, dim=2, keepdim=True).values, x, vulkan=vulkan)
    for fn in (lambda a: munet.topk(a, 5, dim=1), lambda a: munet.kthvalue(a, 2, 0), lambda a: munet.sort(a, 2)):
        c, g = fn(x), fn(x.to(vulkan))
        same(g.indices, c.indices)
    same(munet.sort(munet.tensor(3.0).to(vulkan)).values, munet.sort(munet.tensor(3.0)).values)
    same(munet.topk(rand(3, 0).to(vulkan), 0).values, munet.topk(rand(3, 0), 0).values)


@pytest.mark.parametrize("consecutive", [False, True])
def test_unique(vulkan, consecutive):
    fn = munet.unique_consecutive if consecutive else munet.unique
    for x in (ints(6, 5, 7), munet.tensor([1.0, np.nan, 1.0, -2.0, np.nan, 0.5]), ints(4, 3000, seed=9), ints(3, 0)):
        c = fn(x, return_inverse=True, return_counts=True)
        g = fn(x.to(vulkan), return_inverse=True, return_counts=True)
        for gv, cv in zip(g, c):
            same(gv, cv)
    xt = ints(4, 6, 5).t()
    same(fn(xt.to(vulkan)), fn(xt))


@pytest.mark.parametrize("consecutive", [False, True])
def test_unique_slices(vulkan, consecutive):
    """Rows (dim 0), columns (dim 1, -1) and a middle dim of 3-d tensors, read through strides; float rows
    with NaNs (no row holding one equals another) and a -0.0 against 0.0; int64; empty and single rows."""
    fn = munet.unique_consecutive if consecutive else munet.unique
    rng = np.random.default_rng(5)
    patterns = rng.integers(-2, 3, size=(5, 3, 2)).astype(np.float32)
    floats = np.moveaxis(patterns[np.repeat(rng.integers(0, 5, size=70), 2)], 0, 1)  # 3 x 140 x 2
    floats[0, 5, 1] = floats[0, 40, 1] = np.nan
    floats[2, 7, 0], floats[2, 8, 0] = -0.0, 0.0
    cases = [(munet.tensor(floats), 1), (munet.tensor(floats).transpose(0, 2), -1), (munet.tensor(floats), 0)]
    cases += [(munet.tensor(floats[:, :, 0]).to(munet.int64).t(), 0), (munet.zeros(0, 3), 0), (munet.ones(1, 4), 0)]
    for x, dim in cases:
        c = fn(x, return_inverse=True, return_counts=True, dim=dim)
        g = fn(x.to(vulkan), return_inverse=True, return_counts=True, dim=dim)
        for gv, cv in zip(g, c):
            same(gv, cv)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted(vulkan, right):
    seq = munet.tensor(np.sort(np.random.default_rng(0).integers(0, 20, 33)).astype(np.float32))
    values = munet.tensor(np.random.default_rng(1).integers(-2, 22, (4, 5)).astype(np.float32))
    same(munet.searchsorted(*to(vulkan, seq, values), right=right), munet.searchsorted(seq, values, right=right))
    rows = munet.sort(rand(3, 17), dim=1).values
    q = rand(3, 6, seed=3)
    same(munet.searchsorted(*to(vulkan, rows, q), right=right), munet.searchsorted(rows, q, right=right))
    perm = munet.argsort(rand(17))
    unsorted = munet.sort(rand(17)).values[munet.argsort(perm)]
    cpu = munet.searchsorted(unsorted, q[0], sorter=perm, right=right, out_int32=True)
    same(munet.searchsorted(*to(vulkan, unsorted, q[0]), sorter=perm.to(vulkan), right=right, out_int32=True), cpu)
    same(munet.bucketize(*to(vulkan, values, seq), right=right), munet.bucketize(values, seq, right=right))


# index bounds: a fault recorded on the device, raised at the next synchronization ----------------------


def _x(dev):
    return munet.arange(12.0).reshape(3, 4).to(dev)


def _i(dev, *values, shape=None):
    t = munet.tensor(list(values)).to(dev)
    return t if shape is None else t.reshape(shape)


def _gather_backward(dev):
    x = _x(dev).requires_grad_(True)
    x.gather(0, _i(dev, 3, shape=(1, 1))).sum().backward()
    return x.grad


def _setitem(dev):
    x = _x(dev)
    x[_i(dev, 3)] = 1.0
    return x


# Each op with an index out of range; negative ones where the op does not wrap them (as PyTorch).
OUT_OF_RANGE = {
    "index_select": lambda d: _x(d).index_select(0, _i(d, 3)),
    "index_select-negative": lambda d: _x(d).index_select(0, _i(d, -1)),
    "gather": lambda d: _x(d).gather(1, _i(d, 4, shape=(1, 1))),
    "gather-negative": lambda d: _x(d).gather(0, _i(d, -1, shape=(1, 1))),
    "gather-backward": _gather_backward,
    "index_add_-negative": lambda d: _x(d).index_add_(0, _i(d, -1), munet.ones(1, 4).to(d)),
    "index_copy_-negative": lambda d: _x(d).index_copy_(0, _i(d, -1), munet.ones(1, 4).to(d)),
    "index_fill_": lambda d: _x(d).index_fill_(1, _i(d, 4), 5.0),
    "getitem": lambda d: _x(d)[_i(d, 0, 3)],
    "getitem-negative": lambda d: _x(d)[:, _i(d, -5)],
    "setitem": _setitem,
    "index_put_-accumulate": lambda d: _x(d).index_put_((_i(d, 7),), munet.tensor(1.0).to(d), accumulate=True),
    "scatter_": lambda d: _x(d).scatter_(0, _i(d, -1, shape=(1, 1)), 1.0),
    "scatter_add": lambda d: _x(d).scatter_add(0, _i(d, 3, shape=(1, 1)), munet.ones(1, 1).to(d)),
    "scatter_reduce": lambda d: _x(d).scatter_reduce(0, _i(d, 3, shape=(1, 1)), munet.ones(1, 1).to(d), "amax"),
    "take": lambda d: _x(d).take(_i(d, -13)),
    "take_along_dim": lambda d: _x(d).take_along_dim(_i(d, 3, shape=(1, 1)), 0),
    "searchsorted-sorter": lambda d: munet.searchsorted(_x(d), _x(d)[:, :1], sorter=_i(d, 0, 1, 2, 4).expand(3, 4)),
}


def _cpu_error(fn) -> Exception:
    with pytest.raises(IndexError) as info:
        fn("cpu")
    return info.value


@pytest.mark.parametrize("name", sorted(OUT_OF_RANGE))
def test_out_of_range_index_raises_at_the_next_synchronization(vulkan, name):
    expected = _cpu_error(OUT_OF_RANGE[name])
    out = OUT_OF_RANGE[name](vulkan)  # recorded, not yet run: no error here
    with pytest.raises(type(expected)) as info:
        munet.vulkan.synchronize()
    message = str(info.value)
    assert message.startswith(str(expected)) and "at the first synchronization" in message, (message, expected)
    assert out.cpu().shape == out.shape  # the fault was cleared: the next read succeeds


@pytest.mark.parametrize("name", ["gather", "setitem", "take"])
def test_out_of_range_index_raises_at_a_host_read(vulkan, name):
    expected = str(_cpu_error(OUT_OF_RANGE[name]))
    with pytest.raises(IndexError, match=expected):
        OUT_OF_RANGE[name](vulkan).cpu()


def test_launch_blocking_raises_at_the_op(vulkan, monkeypatch):
    from munet._device import get_backend

    monkeypatch.setattr(get_backend(vulkan).runtime.asserts, "blocking", True)
    with pytest.raises(RuntimeError, match=r"^gather: index 4 is out of bounds for dimension 1 with size 4$"):
        OUT_OF_RANGE["gather"](vulkan)


def test_the_first_fault_is_reported_and_nothing_is_written_out_of_range(vulkan):
    base = munet.zeros(5, 4).to(vulkan)
    x = base[:3]  # the storage goes on past the view: an unchecked write would land in base[3]
    x.index_put_((_i(vulkan, 3, 0),), munet.ones(2, 4).to(vulkan))
    x.scatter_(0, _i(vulkan, 4, shape=(1, 1)), 7.0)
    x.index_add_(0, _i(vulkan, -2), munet.ones(1, 4).to(vulkan))
    with pytest.raises(IndexError, match="^index_put_: index 3 is out of bounds for dimension 0 with size 3"):
        base.cpu()
    expected = np.zeros((5, 4), np.float32)
    expected[0] = 1.0  # the in-range row of index_put_ was written; nothing outside the view
    np.testing.assert_array_equal(base.cpu().numpy(), expected)


# Negative indices that PyTorch wraps (and in-range ones) give the cpu results.
WRAPPED = {
    "getitem": lambda d: _x(d)[_i(d, -1, 0, -3)],
    "setitem": lambda d: _x(d).index_put_((slice(None), _i(d, -4)), munet.tensor(9.0).to(d)),
    "index_put_-accumulate": lambda d: _x(d).index_put_((_i(d, -1, -1),), munet.ones(4).to(d), accumulate=True),
    "index_fill_": lambda d: _x(d).index_fill_(1, _i(d, -1, 0), -2.0),
    "take": lambda d: _x(d).take(_i(d, -12, -1, 5)),
    "index_select": lambda d: _x(d).index_select(1, _i(d, 3, 0)),
}


def test_negative_indices_wrap_only_where_pytorch_wraps_them(vulkan):
    for fn in WRAPPED.values():
        same(fn(vulkan), fn("cpu"))
    munet.vulkan.synchronize()
    for name in ("index_select-negative", "gather-negative", "index_add_-negative", "index_copy_-negative"):
        OUT_OF_RANGE[name](vulkan)
        with pytest.raises(IndexError, match=f"^{name.split('-')[0]}: index -1 is out of bounds"):
            munet.vulkan.synchronize()


def test_compiled_program_raises_for_an_out_of_range_index(vulkan):
    step = munet.compile(lambda x, i: (x.gather(1, i) * 2.0).sum())
    x = _x(vulkan)
    assert step(x, _i(vulkan, 3, 0, 1, 2, shape=(1, 4))).item() == 2.0 * (3 + 0 + 1 + 2)
    with pytest.raises(RuntimeError, match="^gather: index 4 is out of bounds for dimension 1 with size 4"):
        step(x, _i(vulkan, 3, 0, 4, 2, shape=(1, 4))).item()
    embed = munet.compile(lambda w, i: F.embedding(i, w))
    with pytest.raises(
        IndexError, match=r"^embedding: index out of range in self \(indices must be in \[0, 3\), got 5"
    ):
        embed(_x(vulkan), _i(vulkan, 0, 5)).cpu()

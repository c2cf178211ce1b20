"""munet.vmap / munet.func.vmap against torch.func.vmap: results, gradients, structures and errors."""

import numpy as np
import pytest
import torch
import torch.func as tfunc

import munet
import munet.func as mfunc
from munet.func.pytree import tree_flatten
from tests.reference import assert_close

rng = np.random.default_rng(7)


def pair(*shape, grad=False):
    a = rng.standard_normal(shape).astype(np.float32)
    return munet.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


CASES = [
    # (function of the module, argument shapes, in_dims, out_dims)
    (lambda m: lambda x: m.sin(x) * 2 + 1, [(4, 3)], 0, 0),
    (lambda m: m.dot, [(5, 3), (5, 3)], 0, 0),
    (lambda m: m.mv, [(4, 3), (5, 3)], (None, 0), 0),
    (lambda m: lambda a, b: a @ b, [(2, 3, 4), (4, 5)], (0, None), 0),
    (lambda m: lambda x: x.sum(0), [(3, 4, 6)], 2, 1),
    (lambda m: lambda x: (x.max(), x.softmax(-1)), [(2, 5, 3)], -1, (0, -1)),
    (lambda m: lambda x, y: {"s": x + y, "p": [x * y]}, [(3, 2), (2, 3)], (0, 1), {"s": 1, "p": [0]}),
    (lambda m: lambda x: x.reshape(-1)[:3], [(1, 2, 2)], 0, 0),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_vmap_matches_torch_with_gradients(case):
    fn, shapes, in_dims, out_dims = CASES[case]
    pairs = [pair(*s, grad=True) for s in shapes]
    got = munet.vmap(fn(munet), in_dims, out_dims)(*[m for m, _ in pairs])
    want = tfunc.vmap(fn(torch), in_dims, out_dims)(*[t for _, t in pairs])
    gl, wl = tree_flatten(got)[0], tree_flatten(want)[0]
    assert len(gl) == len(wl)
    for g, w in zip(gl, wl):
        assert_close(g, w)
    weights = [rng.standard_normal(tuple(w.shape)).astype(np.float32) for w in wl]
    sum((g * munet.tensor(c)).sum() for g, c in zip(gl, weights)).backward()
    sum((w * torch.tensor(c)).sum() for w, c in zip(wl, weights)).backward()
    for m, t in pairs:
        assert_close(m.grad, t.grad)


def test_nested_vmap_is_an_outer_product_of_maps():
    (am, at), (bm, bt) = pair(3, 4), pair(5, 4)

    def f(mod):
        return mod.vmap(mod.vmap(mod.dot, in_dims=(None, 0)), in_dims=(0, None))

    assert_close(f(munet)(am, bm), f(torch)(at, bt))
    assert_close(f(munet)(am, bm), at @ bt.t())


def test_per_sample_gradients_through_func_grad():
    (wm, wt), (xm, xt), (ym, yt) = pair(3), pair(6, 3), pair(6)

    def loss(mod):
        return lambda w, x, y: (mod.tanh(x @ w) - y) ** 2

    got = munet.vmap(mfunc.grad(loss(munet)), in_dims=(None, 0, 0))(wm, xm, ym)
    want = tfunc.vmap(tfunc.grad(loss(torch)), in_dims=(None, 0, 0))(wt, xt, yt)
    assert_close(got, want)


def test_non_contiguous_inputs_keyword_arguments_and_unbatched_outputs():
    xm, xt = pair(4, 6)
    xm, xt = xm.t(), xt.t()  # (6, 4), strided
    got = munet.vmap(lambda x, scale: x * scale, in_dims=1)(xm, scale=3.0)
    assert_close(got, tfunc.vmap(lambda x, scale: x * scale, in_dims=1)(xt, scale=3.0))
    ones = munet.vmap(lambda x: munet.ones(2), out_dims=None)(xm)
    assert ones.shape == (2,)
    assert munet.vmap(lambda x: 1.5, out_dims=None)(xm) == 1.5
    # an output that does not depend on the input is broadcast along the mapped dim, as in torch
    assert_close(munet.vmap(lambda x: munet.ones(2))(xm), tfunc.vmap(lambda x: torch.ones(2))(xt))


def test_empty_batch_gives_empty_outputs_of_the_sample_shape():
    got = munet.vmap(lambda x: x.sum(-1, keepdim=True) * 2, out_dims=1)(munet.ones(0, 3, 2))
    want = tfunc.vmap(lambda x: x.sum(-1, keepdim=True) * 2, out_dims=1)(torch.ones(0, 3, 2))
    assert tuple(got.shape) == tuple(want.shape) == (3, 0, 1)


def test_randomness_modes():
    x = munet.ones(4, 3)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        munet.vmap(lambda v: v + munet.rand(3))(x)
    same = munet.vmap(lambda v: v + munet.rand(3), randomness="same")(x)
    assert all(munet.equal(same[0], same[i]) for i in range(1, 4))
    g = munet.Generator().manual_seed(3)
    same_g = munet.vmap(lambda v: v * munet.rand(3, generator=g), randomness="same")(x)
    assert munet.equal(same_g[0], same_g[3])
    different = munet.vmap(lambda v: v + munet.rand(3), randomness="different")(x)
    assert not munet.equal(different[0], different[1])
    with pytest.raises(RuntimeError, match="randomness error mode"):  # an outer "error" holds inside
        munet.vmap(munet.vmap(lambda v: munet.rand(()), randomness="different"))(x)
    munet.rand(2)  # the watchers are gone after vmap returns or raises


ERRORS = [
    (lambda m: m.vmap(lambda x, y: x + y)(m.ones(2, 3), m.ones(3, 3)), "same size in the mapped dimension"),
    (lambda m: m.vmap(lambda x, y: x + y, in_dims=(0, 0))(m.ones(2, 3), 1.0), "non-Tensor arguments"),
    (lambda m: m.vmap(lambda x: x.sum(), out_dims=None)(m.arange(6.0).reshape(2, 3)), "can not return a BatchedTensor"),
    (lambda m: m.vmap(lambda x: 1.0)(m.ones(2, 3)), "must only return Tensors"),
    (lambda m: m.vmap(lambda x: x, in_dims=(0,))(m.ones(2, 3), m.ones(2)), "not compatible with the structure"),
    (lambda m: m.vmap(lambda x: x, in_dims=5)(m.ones(2, 3)), "expected in_dim to satisfy -2 <= in_dim < 2"),
    (lambda m: m.vmap(lambda x: x, in_dims=None)(m.ones(2)), "expected `in_dims` to be int"),
    (lambda m: m.vmap(lambda x: x, in_dims=[0])(m.ones(2)), "expected `in_dims` to be int"),
    (lambda m: m.vmap(lambda x: x, in_dims=(None,))(m.ones(2)), "at least one Tensor"),
    (lambda m: m.vmap(lambda x: x)(), "got no inputs"),
    (lambda m: m.vmap(lambda x: (x, x), out_dims=(0,))(m.ones(2, 3)), "out_dims is not compatible"),
    (lambda m: m.vmap(lambda x: x, out_dims=1.0)(m.ones(2, 3)), "`out_dims` must be an int"),
    (lambda m: m.vmap(lambda x: x, randomness="foo")(m.ones(2, 3)), "Only allowed values for randomness"),
    (lambda m: m.vmap(lambda x: x, chunk_size=0)(m.ones(2, 3)), "chunk_size should be None or greater than 0"),
    (
        lambda m: m.vmap(lambda x: x, in_dims=({"a": 0},))({"a": m.ones(2), "b": m.ones(2)}),
        "not compatible with the structure",
    ),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_are_torchs(case):
    make, message = ERRORS[case]
    with pytest.raises(Exception, match=message) as want:
        make(torch)
    with pytest.raises(type(want.value), match=message):
        make(munet)


def test_out_dims_out_of_range_raises_index_error():
    with pytest.raises(IndexError):
        munet.vmap(lambda x: x, out_dims=3)(munet.ones(2, 3))
    assert munet.vmap(lambda x: x, out_dims=-1)(munet.ones(2, 3)).shape == (3, 2)


def test_names():
    assert munet.vmap is mfunc.vmap

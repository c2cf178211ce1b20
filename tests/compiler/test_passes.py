"""Each pass on small hand-built graphs; every test fails if its pass does nothing or breaks SSA."""

import numpy as np
import pytest

import munet
from munet.compiler.executable import Executable
from munet.compiler.ir import Graph, VerificationError, verify
from munet.compiler.passes import (
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_constants,
    simplify_algebra,
)
from munet.ops._registry import OPS

F32 = munet.float32


def _node(g, name, args, attrs=None, shape=(2, 3)):
    return g.add_node(OPS[name], args, attrs or {}, [(shape, F32, munet.device("cpu"), "tensor")]).outputs[0]


def _graph():
    g = Graph()
    x = g.add_input((2, 3), F32, munet.device("cpu"), label="x")
    return g, x


def _run(g, *inputs):
    return Executable(g, "cpu").run(list(inputs))


def test_verify_rejects_use_before_definition_and_undefined_outputs():
    g, x = _graph()
    y = _node(g, "exp", [x])
    z = _node(g, "neg", [y])
    g.nodes.reverse()
    with pytest.raises(VerificationError, match="before it is defined"):
        verify(g)
    g2, x2 = _graph()
    g2.outputs = [g.new_value((1,), F32)]
    with pytest.raises(VerificationError, match="never defined"):
        verify(g2)
    assert z is not None


def test_printer_shows_types_and_attrs():
    g, x = _graph()
    y = _node(g, "sum", [x], {"dims": (1,), "keepdim": False}, shape=(2,))
    g.outputs = [y]
    text = str(g)
    assert "%1: f32[2] = sum(%0, dims=(1,), keepdim=False)" in text and "return %1" in text


def test_dce_removes_unused_chain_but_keeps_random_draws():
    g, x = _graph()
    used = _node(g, "exp", [x])
    dead = _node(g, "neg", [x])
    _node(g, "exp", [dead])
    gen = munet.Generator()
    _node(g, "uniform", [], {"shape": (2, 3), "dtype": F32, "low": 0.0, "high": 1.0, "generator": gen})
    g.outputs = [used]
    assert eliminate_dead_code(g) == 2
    assert [n.name for n in g.nodes] == ["exp", "uniform"]
    verify(g)


def test_cse_merges_identical_nodes_and_rewires_users():
    g, x = _graph()
    a = _node(g, "exp", [x])
    b = _node(g, "exp", [x])
    c = _node(g, "add", [a, b])
    d = _node(g, "mul", [x, 2.0])
    e = _node(g, "mul", [x, 2])  # int 2 differs from 2.0 in promotion: must not merge by hash equality
    g.outputs = [c, d, e]
    assert eliminate_common_subexpressions(g) == 1
    verify(g)
    assert g.nodes[1].name == "add" and g.nodes[1].args == (a, a)
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = _run(g, arr)[0]
    np.testing.assert_allclose(out, 2 * np.exp(arr), rtol=1e-6)


def test_fold_evaluates_constant_subgraphs():
    g, x = _graph()
    ones = _node(g, "full", [], {"shape": (2, 3), "value": 1.0, "dtype": F32})
    twos = _node(g, "add", [ones, ones])
    y = _node(g, "mul", [x, twos])
    g.outputs = [y]
    assert fold_constants(g) == 2
    eliminate_dead_code(g)
    assert [n.name for n in g.nodes] == ["constant", "mul"]
    np.testing.assert_array_equal(_run(g, np.ones((2, 3), np.float32))[0], np.full((2, 3), 2.0))


@pytest.mark.parametrize(
    "name, args",
    [
        ("mul", ["x", 1]),
        ("mul", [1.0, "x"]),
        ("add", ["x", 0]),
        ("add", [0.0, "x"]),
        ("sub", ["x", 0]),
        ("div", ["x", 1]),
    ],
)
def test_simplify_neutral_scalars(name, args):
    g, x = _graph()
    y = _node(g, name, [x if a == "x" else a for a in args])
    g.outputs = [_node(g, "exp", [y])]
    assert simplify_algebra(g) == 1
    assert [n.name for n in g.nodes] == ["exp"] and g.nodes[0].args == (x,)


def test_simplify_keeps_non_neutral_and_dtype_changing_ops():
    g, x = _graph()
    y = _node(g, "mul", [x, 2])
    z = _node(g, "add", [x, 0], {"alpha": 3})
    g.outputs = [y, z]
    assert simplify_algebra(g) == 0


def test_simplify_double_transpose_and_identity_views():
    g, x = _graph()
    t = _node(g, "permute", [x], {"dims": (1, 0)}, shape=(3, 2))
    tt = _node(g, "permute", [t], {"dims": (1, 0)})
    v = _node(g, "view", [tt], {"shape_out": (2, 3)})
    g.outputs = [_node(g, "exp", [v])]
    assert simplify_algebra(g) >= 3
    eliminate_dead_code(g)
    assert [n.name for n in g.nodes] == ["exp"] and g.nodes[0].args == (x,)


def test_simplify_reshape_chain_into_one_view():
    g, x = _graph()
    a = _node(g, "view", [x], {"shape_out": (6,)}, shape=(6,))
    b = _node(g, "view", [a], {"shape_out": (3, 2)}, shape=(3, 2))
    g.outputs = [b]
    simplify_algebra(g)
    eliminate_dead_code(g)
    assert len(g.nodes) == 1 and g.nodes[0].args == (x,)
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_run(g, arr)[0], arr.reshape(3, 2))


def _zeros(g, shape):
    return g.add_constant(np.zeros(shape, np.float32), F32, munet.device("cpu"))


def _scatter(g, base, src, shape, start, n, dim=1):
    size = tuple(n if d == dim else s for d, s in enumerate(shape))
    strides = (shape[1], 1)
    region = {"size": size, "stride": strides, "storage_offset": start * strides[dim]}
    return _node(g, "as_strided_scatter", [base, src], region, shape=shape)


def _slabs(g, shape, starts_sizes, dim=1):
    """Sources of slabs ``[start, start + n)`` along ``dim``, each scattered into zeros; returns (sources, sum)."""
    sources, total = [], None
    for k, (start, n) in enumerate(starts_sizes):
        src_shape = tuple(n if d == dim else s for d, s in enumerate(shape))
        src = g.add_input(src_shape, F32, munet.device("cpu"), label=f"src{k}")
        scattered = _scatter(g, _zeros(g, shape), src, shape, start, n, dim)
        total = scattered if total is None else _node(g, "add", [total, scattered], shape=shape)
        sources.append(src)
    return sources, total


def test_simplify_split_gradient_scatters_into_one_cat():
    g = Graph()
    shape = (2, 9)
    sources, total = _slabs(g, shape, [(6, 3), (0, 4), (4, 2)])  # out of order, as autograd accumulates
    g.outputs = [total]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(tuple(v.shape)).astype(np.float32) for v in sources]
    expected = _run(g, *arrays)[0]
    assert simplify_algebra(g) == 1
    eliminate_dead_code(g)
    assert [n.name for n in g.nodes] == ["cat"]
    assert g.nodes[0].args == ([sources[1], sources[2], sources[0]],) and g.nodes[0].attrs == {
        "dim": 1,
        "sizes": (4, 2, 3),
    }
    verify(g)
    np.testing.assert_array_equal(_run(g, *arrays)[0], expected)


@pytest.mark.parametrize("slabs", [[(0, 4), (3, 6)], [(0, 4), (5, 4)], [(0, 4)]], ids=["overlapping", "gap", "partial"])
def test_simplify_keeps_scatters_that_do_not_tile(slabs):
    g = Graph()
    _, total = _slabs(g, (2, 9), slabs)
    g.outputs = [total]
    before = [n.name for n in g.nodes]
    assert simplify_algebra(g) == 0 and [n.name for n in g.nodes] == before


def test_simplify_keeps_scatters_into_a_nonzero_base():
    g = Graph()
    shape = (2, 4)
    a, b = (g.add_input((2, 2), F32, munet.device("cpu"), label=n) for n in "ab")
    base = g.add_constant(np.ones(shape, np.float32), F32, munet.device("cpu"))
    total = _node(
        g, "add", [_scatter(g, base, a, shape, 0, 2), _scatter(g, _zeros(g, shape), b, shape, 2, 2)], shape=shape
    )
    g.outputs = [total]
    assert simplify_algebra(g) == 0


def test_simplify_scatter_over_the_whole_base_is_its_source():
    g = Graph()
    shape = (2, 4)
    src = g.add_input(shape, F32, munet.device("cpu"), label="src")
    g.outputs = [_node(g, "exp", [_scatter(g, _zeros(g, shape), src, shape, 0, 4)], shape=shape)]
    assert simplify_algebra(g) == 1
    eliminate_dead_code(g)
    assert [n.name for n in g.nodes] == ["exp"] and g.nodes[0].args == (src,)

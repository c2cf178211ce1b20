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

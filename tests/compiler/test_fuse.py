"""passes/fuse.py: which nodes form fused groups, on small compiled functions."""

import numpy as np
import pytest

import munet
from munet.compiler.ir import verify


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))


def _fused(graph):
    return [n for n in graph.nodes if n.name == "fused"]


def _ops(node):
    return [m.name for m in node.attrs["group"].members if m.op.view is None]


def _run(fn, *arrays, fuse=True):
    compiled = munet.compile(fn, fuse=fuse)
    out = compiled(*[munet.tensor(a) for a in arrays])
    verify(compiled.graph)
    return compiled, out


def test_an_elementwise_chain_with_broadcasting_is_one_group():
    rng = np.random.default_rng(0)
    x, b = rng.standard_normal((4, 5), np.float32), rng.standard_normal(5, np.float32)
    compiled, out = _run(lambda x, b: ((x * b + x) - 2.0).relu() / 3.0, x, b)
    (node,) = _fused(compiled.graph)
    assert _ops(node) == ["mul", "add", "sub", "relu", "div"]
    assert len(compiled.graph.nodes) == 1 and compiled.stats()["fused_groups"] == 1
    np.testing.assert_array_equal(out.numpy(), np.maximum((x * b + x) - np.float32(2), 0) / np.float32(3))


def test_a_matmul_splits_chains_into_two_groups():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((3, 4), np.float32), rng.standard_normal((4, 2), np.float32)
    compiled, _ = _run(lambda x, w: ((x * 2 + 1) @ w + 1).relu(), x, w)
    names = [n.name for n in compiled.graph.nodes]
    assert names == ["fused", "matmul", "fused"]


def test_a_transpose_is_folded_into_the_kernels_index_expression():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((5, 3), np.float32), rng.standard_normal((3, 5), np.float32)
    compiled, out = _run(lambda x, y: x.t() * y + 1, x, y)
    (node,) = _fused(compiled.graph)
    assert all(n.name != "permute" for n in compiled.graph.nodes)  # no view left outside the group
    assert node.attrs["group"].folded_views == 1 and node.args[0] is compiled.graph.inputs[0]
    np.testing.assert_array_equal(out.numpy(), x.T * y + np.float32(1))


def test_no_group_reads_its_own_output_through_another_node():
    # a feeds the matmul and the final product: c may not join a's group (that would be a cycle)
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((4, 4), np.float32), rng.standard_normal((4, 4), np.float32)

    def fn(x, w):
        a = x * 2 + 1
        return (a * (a @ w)) - 1

    compiled, out = _run(fn, x, w)
    assert [n.name for n in compiled.graph.nodes] == ["fused", "matmul", "fused"]
    a = x * np.float32(2) + np.float32(1)
    np.testing.assert_array_equal(out.numpy(), a * (a @ w) - np.float32(1))


def test_single_ops_and_fuse_false_form_no_group():
    x = np.ones((2, 3), np.float32)
    compiled, _ = _run(lambda x: x * 2, x)
    assert not _fused(compiled.graph)
    compiled, _ = _run(lambda x: (x * 2 + 1).exp(), x, fuse=False)
    assert not _fused(compiled.graph) and compiled.stats()["fused_groups"] == 0


def test_a_large_lone_op_reading_a_broadcast_operand_is_a_group(monkeypatch):
    from munet.compiler.passes import fuse

    monkeypatch.setattr(fuse, "LONE_MIN_ELEMENTS", 12)
    rng = np.random.default_rng(5)
    x, b, s = (
        rng.standard_normal((3, 4), np.float32),
        rng.standard_normal(4, np.float32),
        np.float32(rng.random((3, 1)) + 1),
    )
    compiled, out = _run(lambda x, b: x + b, x, b)  # a bias added to a matmul's output
    (node,) = _fused(compiled.graph)
    assert _ops(node) == ["add"] and compiled.stats()["fused_groups"] == 1
    np.testing.assert_array_equal(out.numpy(), x + b)
    compiled, out = _run(lambda x, s: x / s, x, s)  # a softmax's division by its row sums
    assert [_ops(n) for n in _fused(compiled.graph)] == [["div"]]
    np.testing.assert_array_equal(out.numpy(), x / s)
    compiled, out = _run(lambda x, b: x * b.expand(3, 4), x, b)  # broadcast through a view
    assert [_ops(n) for n in _fused(compiled.graph)] == [["mul"]]
    np.testing.assert_array_equal(out.numpy(), x * b)
    for fn, args in ((lambda x, y: x + y, (x, x)), (lambda x, b: x[:2] + b, (x, b))):  # same shapes; too small
        compiled, _ = _run(fn, *args)
        assert not _fused(compiled.graph)


def test_groups_of_different_shapes_stay_apart(monkeypatch):
    from munet.compiler.codegen import kernel as kernel_ir

    monkeypatch.delitem(kernel_ir.REDUCTIONS, "sum")  # a reduction joins both (test_fuse_reduce.py)
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((3, 4), np.float32), rng.standard_normal((3, 4), np.float32)
    compiled, out = _run(lambda x, y: (x * y + 1).sum(1) * 2 + 1, x, y)
    assert [n.name for n in compiled.graph.nodes] == ["fused", "sum", "fused"]
    expected = (x * y + np.float32(1)).sum(1) * np.float32(2) + np.float32(1)
    np.testing.assert_array_equal(out.numpy(), expected)


def test_a_group_does_not_join_one_that_reads_it_through_a_reduction():
    # b's group reads the mean m; m's gradient chain reads sum(b-group output): merging them,
    # or letting each take the other's nodes, would make a cycle (found by the property test)
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((3, 4), np.float32), rng.standard_normal((3, 4), np.float32)

    def fn(x, w):
        m = w.mean(0, keepdim=True)
        b = (w - w) * m
        return ((b * x).sum(0, keepdim=True) + m.relu() * 2 + m).sum() + b.sum()

    compiled, out = _run(fn, x, w)
    eager = fn(munet.tensor(x), munet.tensor(w))
    np.testing.assert_allclose(out.numpy(), eager.numpy(), rtol=1e-6)


def test_a_matmul_read_only_transposed_is_computed_in_the_readers_layout():
    # (x^T @ g)^T, the layout of a weight gradient, becomes g^T @ x: the group reads it contiguously
    rng = np.random.default_rng(6)
    x, g = rng.standard_normal((8, 5), np.float32), rng.standard_normal((8, 3), np.float32)
    compiled, out = _run(lambda x, g: (x.t() @ g).t() * 2 + 1, x, g)
    names = [n.name for n in compiled.graph.nodes]
    assert names.count("matmul") == 1 and names[-1] == "fused"
    (mm,) = [n for n in compiled.graph.nodes if n.name == "matmul"]
    assert mm.outputs[0].shape == (3, 5) and mm.args[1] is compiled.graph.inputs[0]
    assert compiled.graph.nodes[-1].attrs["group"].folded_views == 0
    np.testing.assert_allclose(out.numpy(), (x.T @ g).T * np.float32(2) + np.float32(1), rtol=1e-6, atol=1e-6)
    # a product also read untransposed keeps its layout
    compiled, _ = _run(lambda x, g: (x.t() @ g).t() * 2 + (x.t() @ g).sum(), x, g)
    (mm,) = [n for n in compiled.graph.nodes if n.name == "matmul"]
    assert mm.outputs[0].shape == (5, 3)

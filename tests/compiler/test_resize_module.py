"""``compiler/resize.py`` for ``munet.compile(module)`` with ``loss.backward()`` outside: a new size of
a dynamic dim reuses the cached joint program, its forward and its backward after the partition.

The forward's outputs and every parameter's gradient are the same bits as ``dynamic=False``, which
optimizes and partitions each shape on its own; the values the forward saves for the backward are
copied at the new sizes.
"""

import numpy as np
import pytest

import munet
import munet.nn as nn
import munet.nn.functional as F
from munet.compiler.codegen import build
from munet.compiler.ir import Graph, Node
from munet.compiler.resize import Program, literals
from munet.ops._registry import OPS
from tests.compiler.models import GPT

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _mlp(seed):
    munet.manual_seed(seed)
    model = nn.Sequential(nn.Linear(20, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5))
    return model, munet.optim.AdamW(model.parameters(), lr=1e-2)


def _gpt(seed):
    munet.manual_seed(seed)
    model = GPT(vocab=13, context=12, width=16, heads=2, layers=2)
    return model, munet.optim.AdamW(model.parameters(), lr=1e-2)


def _mlp_batch(rng, batch):
    return rng.standard_normal((batch, 20)).astype(np.float32), rng.integers(0, 5, batch)


def _gpt_batch(rng, shape):
    batch, time = shape
    return rng.integers(0, 13, (batch, time)), rng.integers(0, 13, batch * time)


def _saved_shapes(compiled) -> list:
    """The shapes of the values the latest forward saved for its backward, as the forward returns
    them and as the backward reads them."""
    last = compiled._compiled._last
    returned = [v.shape for v in last.graph.outputs[last.n_forward :]]
    assert returned == [v.shape for v in last.backward_graph.inputs[: last.n_saved]]
    return returned


def _train_both(build_model, make_batch, shapes, after_step=None, count=lambda: 0):
    """Train a compiled module (``dynamic=None``) and a ``dynamic=False`` copy side by side, the loss's
    backward and the optimizer step outside; asserts the same forward and gradient bits at each step.
    ``after_step(shape, dynamic, static, grown[0])`` runs after each step, ``grown`` how much ``count()``
    grew during the forward and backward of the dynamic copy."""
    rng = np.random.default_rng(4)
    (a, opt_a), (b, opt_b) = build_model(), build_model()
    dynamic, static = munet.compile(a), munet.compile(b, dynamic=False)
    for shape in shapes:
        x, y = make_batch(rng, shape)
        results, grown = [], []
        for compiled, opt in ((dynamic, opt_a), (static, opt_b)):
            opt.zero_grad()
            before = count()
            out = compiled(munet.tensor(x))
            F.cross_entropy(out, munet.tensor(y)).backward()
            grown.append(count() - before)
            results.append((out.detach().numpy().copy(), [p.grad.numpy().copy() for p in compiled.parameters()]))
            opt.step()
        (out, grads), (want, want_grads) = results
        np.testing.assert_array_equal(out, want, err_msg=str(shape))
        assert len(grads) == len(want_grads) > 0
        for got, expected in zip(grads, want_grads):
            np.testing.assert_array_equal(got, expected, err_msg=str(shape))
        if after_step is not None:
            after_step(shape, dynamic, static, grown[0])
    return dynamic


@needs_cc
def test_new_batch_sizes_reuse_the_joint_program_and_its_kernels(record_calls):
    compiles = record_calls(build, "_compile")
    steps = []

    def after_step(batch, dynamic, static, compiled):
        steps.append((dynamic.stats(), compiled, _saved_shapes(dynamic), _saved_shapes(static)))

    batches = [16, 16, 9, 25, 9, 40]
    _train_both(lambda: _mlp(3), _mlp_batch, batches, after_step, lambda: len(compiles))
    # 16 is optimized as it is; 9 makes the batch dim dynamic (its program is cached); 25 and 40 copy it
    stats = steps[-1][0]
    assert stats["traces"] == 4 and stats["reused"] == 2 and stats["programs"] == 1
    assert stats["last_reuse_refusal"] is None
    assert stats["kernels_reused"] == stats["fused_groups"] > 0
    assert stats["backward_kernels_reused"] == stats["backward_fused_groups"] > 0
    assert [step[0]["reused"] for step in steps] == [0, 0, 0, 1, 1, 2]
    assert [step[1] > 0 for step in steps] == [True, False, True, False, False, False]  # the copies compiled no C
    for batch, (_, _, shapes, static_shapes) in zip(batches[3:], steps[3:]):
        # the saved values at the new batch, as the static partition saves them
        assert shapes == static_shapes and (batch, 32) in shapes, shapes


@needs_cc
def test_a_batch_equal_to_another_dim_is_optimized_on_its_own():
    seen = {}
    # batch 32 is the hidden width: not a renaming of 9; 48 renames from 9's program
    _train_both(lambda: _mlp(5), _mlp_batch, [16, 9, 32, 48], lambda n, d, s, _: seen.setdefault(n, d.stats()))
    assert seen[32]["reused"] == 0 and "rename one to one" in seen[32]["last_reuse_refusal"]
    assert seen[32]["programs"] == 2
    assert seen[48]["reused"] == 1 and seen[48]["last_reuse_refusal"] is None


@needs_cc
def test_sizes_zero_and_one_have_joint_programs_of_their_own():
    seen = {}
    _train_both(lambda: _mlp(6), _mlp_batch, [16, 9, 1, 0, 7], lambda n, d, s, _: seen.setdefault(n, d.stats()))
    assert seen[1]["reused"] == seen[0]["reused"] == 0 and seen[0]["programs"] == 3
    assert seen[7]["reused"] == 1  # 9's program


@needs_cc
def test_new_batch_sizes_and_sequence_lengths_of_a_compiled_gpt_reuse_its_joint_program():
    seen = {}

    def after_step(shape, dynamic, static, _):
        seen[shape] = (dynamic.stats(), _saved_shapes(dynamic), _saved_shapes(static))

    # attention over (batch, heads, time, time) and a causal mask of (time, time), LayerNorm, GELU;
    # (6, 6): the batch equals the length, not a renaming of (5, 7)
    shapes = [(5, 9), (5, 9), (5, 7), (6, 9), (7, 11), (5, 10), (6, 6)]
    _train_both(lambda: _gpt(1), _gpt_batch, shapes, after_step)
    assert [seen[s][0]["reused"] for s in shapes[2:]] == [0, 1, 2, 3, 3]
    assert seen[(5, 10)][0]["last_reuse_refusal"] is None
    assert seen[(5, 10)][0]["kernels_reused"] > 0 and seen[(5, 10)][0]["backward_kernels_reused"] > 0
    assert "rename one to one" in seen[(6, 6)][0]["last_reuse_refusal"]
    for shape in [(6, 9), (7, 11), (5, 10)]:
        shapes_saved, static_shapes = seen[shape][1], seen[shape][2]
        batch, time = shape
        assert shapes_saved == static_shapes
        # the attention's probabilities, a layer's input, a LayerNorm's statistics at the new shape
        for saved in ((batch, 2, time, time), (batch * time, 16), (batch, time, 1)):
            assert saved in shapes_saved, (saved, shapes_saved)


def _view(graph, x, shape):
    node = graph.add_node(OPS["view"], (x, list(shape)), {}, [(shape, munet.float32, "cpu", "tensor")])
    return node.outputs[0]


def test_a_joint_program_refuses_ints_its_passes_wrote_not_the_copies_the_backward_recomputes():
    traced = Graph()
    x = traced.add_input((6, 4), munet.float32, "cpu")
    cotangent = traced.add_input((24,), munet.float32, "cpu")
    traced.outputs = [_view(traced, x, (24,)), _view(traced, cotangent, (6, 4))]
    forward, backward = Graph(), Graph()
    forward.inputs = [x]
    forward.outputs = [_view(forward, x, (24,))]
    backward.inputs = [cotangent]
    copy = _view(backward, x, (24,))  # the backward recomputes the forward's view: the same literals
    backward.outputs = [_view(backward, cotangent, (6, 4)), copy]
    renaming = {6: 7, 24: 28}
    program = Program([x, cotangent], [], literals(traced), forward, {}, backward, 1)
    assert program.refusal(renaming) is None
    # a pass that wrote the int 24 into a node of its own: 24 is a size that changes, so it is refused
    made = backward.outputs[0]
    divided = Node(OPS["div"], (made, 24), {})
    divided.outputs = [backward.new_value(made.shape, made.dtype, made.device)]
    divided.outputs[0].producer = divided
    backward.nodes.append(divided)
    program = Program([x, cotangent], [], literals(traced), forward, {}, backward, 1)
    assert program.refusal(renaming) == "the passes wrote the int 24 where the trace did not, and that size changed"
    assert program.refusal({6: 7}) is None  # 24 does not change

"""Compiled training steps of whole workloads equal eager ones (issue 5 Tests), and what their graphs hold.

The MLP and BatchNorm CNN pairs live in test_compile.py; here: a GPT-style transformer (token
and position embeddings, LayerNorm, causal ``scaled_dot_product_attention``, GELU MLP, tied or
untied head, cross-entropy, AdamW) and the digits demo's model and step (``munet/demo.py``:
conv/BatchNorm/ReLU, dropout, label smoothing, AdamW with weight decay, OneCycleLR). After each
step the losses agree to relative 1e-5; after N steps every parameter and optimizer moment of an
unfused program equals eager's bit for bit, and a fused program's are as close to a float64 eager
run as float32 eager's are (``tests.reference.assert_close_to_reference``).
"""

import math

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn
from munet.compiler.codegen import build
from munet.compiler.codegen.kernel import view_geometry
from munet.compiler.ir import format_node
from tests.compiler.models import GPT
from tests.reference import AdamWErrorBudget, adamw_training_state, assert_training_close_to_reference

RTOL = 1e-5


def _assert_same_training_state(eager, compiled, reference, budget):
    """Unfused (``reference`` None): bit for bit. Fused: as close to the float64 ``reference`` run as eager.

    Fused kernels round differently from NumPy (float64-accumulated sums, the C library's
    ``exp``), so how far they may be from eager depends on the CPU's BLAS kernels; eager's own
    distance from the float64 run measures it. AdamW's first steps turn the rounding of a gradient
    that cancels to almost nothing into a full-size update, where two float32 runs sharing no
    kernels differ by more than that; ``budget`` (``tests.reference.AdamWErrorBudget``) adds, per
    element, the drift that gradients within the forward/gradient bound can cause through AdamW.
    """
    if reference is not None:
        assert_training_close_to_reference(eager, compiled, reference, budget)
        return
    for (name, want), (_, got) in zip(adamw_training_state(*eager), adamw_training_state(*compiled), strict=True):
        np.testing.assert_array_equal(got, want, err_msg=name)


def _gpt_step(model, opt, idx, targets):
    opt.zero_grad()
    loss = F.cross_entropy(model(idx), targets)
    loss.backward()
    opt.step()
    return loss


def _make_gpt(tied, dtype=munet.float32):
    munet.manual_seed(0)
    model = GPT(tied=tied).to(dtype)
    return model, munet.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_gpt_adamw_steps_match_eager(tied, fuse):
    """Fused: losses to relative 1e-5, the state as close to float64 as eager's; unfused (the same NumPy
    kernels as eager): bit for bit."""
    m1, o1 = _make_gpt(tied)
    m2, o2 = _make_gpt(tied)
    m64, o64 = _make_gpt(tied, munet.float64)
    compiled = munet.compile(_gpt_step, fuse=fuse)
    gen = np.random.default_rng(3)
    batches = [(munet.tensor(gen.integers(0, 13, (3, 8))), munet.tensor(gen.integers(0, 13, 24))) for _ in range(3)]
    budget = AdamWErrorBudget(m1, m2, m64, o64)
    losses = []
    for step in range(6):
        idx, targets = batches[step % len(batches)]
        eager = _gpt_step(m1, o1, idx, targets).item()
        got = compiled(m2, o2, idx, targets).item()
        assert got == eager if not fuse else abs(got - eager) <= RTOL * abs(eager), (step, got, eager)
        losses.append(got)
        if fuse:
            _gpt_step(m64, o64, idx, targets)
            budget.step()
    assert losses[-1] < losses[0]  # it trains
    _assert_same_training_state((m1, o1), (m2, o2), (m64, o64) if fuse else None, budget)
    if tied:
        assert m2.head.weight is m2.tok.weight and len(o2.state) == len(list(m2.parameters()))
    stats = compiled.stats()
    assert stats["traces"] == 2 and stats["cache_hits"] == 4 and (stats["fused_groups"] > 0) == fuse


def _demo_batches(n_batches: int, batch_size: int):
    from munet.demo import split_digits

    (images, labels), _, _ = split_digits(seed=0)
    return [
        (images[k * batch_size : (k + 1) * batch_size], labels[k * batch_size : (k + 1) * batch_size])
        for k in range(n_batches)
    ]


def _make_demo(total_steps: int, dtype=munet.float32):
    from munet.demo import build_model

    munet.manual_seed(0)
    model = build_model().to(dtype)
    optimizer = munet.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=1e-4)
    scheduler = munet.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=4e-3, total_steps=total_steps)
    return model, optimizer, scheduler


def _demo_step(model, optimizer, images, labels):
    """The loop body of ``munet.demo.train`` (the scheduler steps outside the compiled function)."""
    loss = F.cross_entropy(model(images), labels, label_smoothing=0.05)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_digits_demo_model_and_step_match_eager(fuse):
    """Fused: losses to relative 1e-5, the state as close to float64 as eager's; unfused: bit for bit."""
    steps = 5
    batches = _demo_batches(3, 32)
    m1, o1, s1 = _make_demo(steps)
    m2, o2, s2 = _make_demo(steps)
    m64, o64, s64 = _make_demo(steps, munet.float64)
    compiled = munet.compile(_demo_step, fuse=fuse)
    budget = AdamWErrorBudget(m1, m2, m64, o64)
    for step in range(steps):
        images, labels = batches[step % len(batches)]
        munet.manual_seed(100 + step)  # the same dropout masks for both
        eager = _demo_step(m1, o1, images, labels).item()
        munet.manual_seed(100 + step)
        got = compiled(m2, o2, images, labels).item()
        assert got == eager if not fuse else abs(got - eager) <= RTOL * abs(eager), (step, got, eager)
        if fuse:
            munet.manual_seed(100 + step)
            _demo_step(m64, o64, images.double(), labels)
            budget.step()
        s1.step()
        s2.step()
        s64.step()
    assert o2.param_groups[0]["lr"] == o1.param_groups[0]["lr"]
    # BatchNorm running stats are in the state dict
    _assert_same_training_state((m1, o1), (m2, o2), (m64, o64) if fuse else None, budget)
    assert compiled.stats()["traces"] == 2


@pytest.mark.skipif(build.find_compiler() is None, reason="needs a C compiler (the fused erf is generated C)")
def test_fused_float32_erf_is_within_one_ulp_of_exact_erf():
    x = np.concatenate(
        [
            np.linspace(-6, 6, 100001, dtype=np.float32),
            np.geomspace(1e-30, 4.5, 4000).astype(np.float32),
            np.array([np.inf, -np.inf, 0.0, -0.0, 3.9999998, 4.0, -4.0], np.float32),
        ]
    )
    compiled = munet.compile(lambda z: munet.erf(z * 2.0))
    got = compiled(munet.tensor(x)).numpy()
    assert compiled.stats()["fused_groups"] == 1 and compiled.stats()["generated_code"]
    exact = np.array([math.erf(2.0 * float(v)) for v in x])
    ulps = np.abs(got - exact) / np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 1.0, f"erf({x[ulps.argmax()] * 2}) is {ulps.max():.2f} ulp off"
    assert np.signbit(got[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()  # erf(-0) = -0
    assert np.isnan(compiled(munet.tensor(np.array([np.nan], np.float32))).numpy()).all()


def test_gelu_compiled_matches_eager_in_both_dtypes():
    gen = np.random.default_rng(0)
    # float32: both erfs are within an ulp; GELU's tail (1 + erf(x) for x << 0) magnifies that ulp
    for dtype, rtol in ((np.float32, 1e-6), (np.float64, 1e-14)):
        x = munet.tensor(gen.standard_normal(4096).astype(dtype) * 3)
        compiled = munet.compile(lambda z: F.gelu(z * 1.5 + 0.25))
        got, want = compiled(x).numpy(), F.gelu(x * 1.5 + 0.25).numpy()
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 4, err_msg=dtype.__name__)


# views feeding matmul --------------------------------------------------------------------------------
_COPIES = ("clone", "contiguous", "copy")


def _view_chain(v):
    """``(value, [view nodes from value to v])``: ``v`` seen through the views it is made of."""
    chain = []
    while v.producer is not None and getattr(v.producer.op, "view", None) is not None:
        chain.append(v.producer)
        v = v.producer.args[0]
    return v, chain[::-1]


def _copies_a_view_would_serve(graph) -> list:
    """Copies feeding a matmul (through views) whose source, seen through the same views, needs no copy."""
    found = []
    for node in graph.nodes:
        if node.op.name != "matmul":
            continue
        for operand in node.args:
            copied, after = _view_chain(operand)
            copy = copied.producer
            if copy is None or copy.op.name not in _COPIES:
                continue
            base, before = _view_chain(copy.args[-1])
            geometry = view_geometry(before + after, base)  # None when a view rule refuses the layout
            if geometry is not None:
                found.append(format_node(copy))
    return found


def _users(graph, node):
    out = node.outputs[0]
    return [n for n in graph.nodes if out in n.inputs()]


def _step_graph(make, x, y, step):
    model, opt = make()
    compiled = munet.compile(step)
    for _ in range(2):
        compiled(model, opt, x, y)
    return compiled.graph


def test_matmul_operands_are_views_not_copies():
    """Transposes (Linear's W.T, its weight gradient's X.T, attention's K.T) reach matmul as views; the
    one copy left per attention layer, ``y.transpose(1, 2).reshape(b, t, c)``, is a layout no view has."""
    gen = np.random.default_rng(0)
    idx, targets = munet.tensor(gen.integers(0, 13, (3, 8))), munet.tensor(gen.integers(0, 13, 24))
    gpt = _step_graph(lambda: _make_gpt(False), idx, targets, _gpt_step)

    def mlp():
        munet.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 5))
        return model, munet.optim.AdamW(model.parameters())

    mlp_graph = _step_graph(mlp, munet.randn(16, 12), munet.randint(0, 5, (16,)), _gpt_step)
    for graph in (gpt, mlp_graph):
        assert sum(n.op.name == "matmul" for n in graph.nodes) > 0
        assert _copies_a_view_would_serve(graph) == []
        transposed = [n for n in graph.nodes if n.op.name == "matmul" and any(_view_chain(a)[1] for a in n.args)]
        assert transposed  # the transposes are there, as views
        assert _operands_blas_cannot_take(graph) == []
    copies = [n for n in gpt.nodes if n.op.name in _COPIES and any(u.op.name == "view" for u in _users(gpt, n))]
    assert len(copies) == 2 * 3  # per layer: the forward head merge and two head merges of the backward


def _operands_blas_cannot_take(graph) -> list:
    """matmul operands whose matrices have neither a unit row nor a unit column stride: NumPy would run its
    slow non-BLAS loop on them (operands are views of contiguous buffers in the cpu plan)."""
    found = []
    for node in graph.nodes:
        if node.op.name != "matmul":
            continue
        for operand in node.args:
            base, chain = _view_chain(operand)
            shape, strides, _ = view_geometry(chain, base)
            if len(shape) < 2 or 1 in shape[-2:]:
                continue
            rows, cols = shape[-2:]
            if not ((strides[-1] == 1 and strides[-2] >= cols) or (strides[-2] == 1 and strides[-1] >= rows)):
                found.append(f"{format_node(node)}: operand strides {strides}")
    return found


def test_attention_softmax_fuses_with_the_scale_and_causal_mask():
    """sdpa's softmax (max, exp, sum, divide) runs in fused reduction kernels, with the scaling and the mask
    as the max's prologue: no softmax or max kernel of its own over the (B, H, L, S) scores."""
    gen = np.random.default_rng(0)
    idx, targets = munet.tensor(gen.integers(0, 13, (3, 8))), munet.tensor(gen.integers(0, 13, 24))
    graph = _step_graph(lambda: _make_gpt(False), idx, targets, _gpt_step)
    on_scores = [n for n in graph.nodes if n.outputs and len(n.outputs[0].shape or ()) == 4]
    assert not [n for n in on_scores if n.op.name in ("softmax", "amax", "where", "exp", "sum")]
    groups = [repr(n.attrs["group"]) for n in graph.nodes if n.op.name == "fused"]
    assert sum("mul where amax" in g for g in groups) == 2  # one per layer


def test_copy_detector_flags_a_copy_of_a_transpose():
    """The checks above fail when a copy a view would serve feeds matmul (x.t().clone() @ w), or an operand
    BLAS cannot take does."""
    compiled = munet.compile(lambda x, w: x.t().clone() @ w + x.t() @ w)
    compiled(munet.randn(4, 3), munet.randn(4, 2))
    assert len(_copies_a_view_would_serve(compiled.graph)) == 1
    strided = munet.compile(lambda x, w: x[:, ::2] @ w)  # a column step of 2: BLAS cannot take it
    strided(munet.randn(4, 6), munet.randn(3, 2))
    assert len(_operands_blas_cannot_take(strided.graph)) == 1

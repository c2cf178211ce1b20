"""Memory planning (passes/memory.py) and the cpu arena (compiler/arena.py).

Arena sizes are exact: a broken liveness or reuse rule changes them, and the alias tests fail
when a buffer is handed out while a view (or a possibly aliasing kernel result) still reads it.
"""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn
from munet.compiler.arena import OUT_KERNELS, Arena, overwrites, writes_into
from munet.compiler.executable import Executable
from munet.compiler.ir import Graph
from munet.compiler.passes.memory import ALIGNMENT, plan_memory
from munet.ops._registry import OPS

F32 = munet.float32
CPU = munet.device("cpu")
BLOCK = ALIGNMENT  # a (2, 3) float32 value (24 bytes) takes one aligned block


def _node(g, name, args, attrs=None, shape=(2, 3)):
    return g.add_node(OPS[name], args, attrs or {}, [(shape, F32, CPU, "tensor")]).outputs[0]


def _graph():
    g = Graph()
    return g, g.add_input((2, 3), F32, CPU, label="x")


def _plan(g, donors=None):
    return plan_memory(g, writes_into, donors, overwrites)


def test_chain_reuses_two_blocks():
    g, x = _graph()
    v = x
    for name in ("exp", "neg", "exp", "neg", "exp", "neg"):
        v = _node(g, name, [v])
    g.outputs = [v]
    plan = _plan(g)
    assert len(plan.offsets) == 6
    assert plan.arena_bytes == {"float32": 2 * BLOCK}  # without reuse: 6 blocks
    assert plan.reused == 4
    assert plan.naive_bytes == 6 * 24


def test_value_read_later_keeps_its_block():
    g, x = _graph()
    a = _node(g, "exp", [x])
    b = _node(g, "neg", [a])
    c = _node(g, "exp", [b])
    d = _node(g, "add", [a, c])
    g.outputs = [d]
    plan = _plan(g)
    offsets = {v: plan.offsets[v][1] for v in (a, b, c, d)}
    assert len({offsets[a], offsets[b], offsets[c]}) == 3  # all live at once while c is computed
    assert offsets[d] == offsets[b]  # b died after c: d takes its block
    assert plan.arena_bytes["float32"] == 3 * BLOCK


def test_view_keeps_its_source_alive():
    g, x = _graph()
    a = _node(g, "exp", [x])
    view = _node(g, "view", [a], {"shape_out": (3, 2)}, shape=(3, 2))
    b = _node(g, "neg", [x])
    c = _node(g, "neg", [b])
    out = _node(g, "mul", [view, view], shape=(3, 2))
    g.outputs = [c, out]
    plan = _plan(g)
    assert view not in plan.offsets
    assert plan.offsets[b][1] != plan.offsets[a][1] and plan.offsets[c][1] != plan.offsets[a][1]


def test_unplanned_kernel_result_may_alias_its_inputs():
    g, x = _graph()
    a = _node(g, "exp", [x])
    s = _node(g, "cumsum", [a], {"dim": 1})  # not an OUT_KERNELS op: its result might be ``a`` itself
    b = _node(g, "neg", [x])
    g.outputs = [s, b]
    plan = _plan(g)
    assert s not in plan.offsets
    assert plan.offsets[b][1] != plan.offsets[a][1]


def test_outputs_live_to_the_end():
    g, x = _graph()
    a = _node(g, "exp", [x])
    b = _node(g, "neg", [x])
    c = _node(g, "exp", [b])
    g.outputs = [a, c]
    plan = _plan(g)
    assert len({plan.offsets[v][1] for v in (a, b, c)}) == 3


def _state_graph(read_after: bool):
    g = Graph()
    p = g.add_input((2, 3), F32, CPU, label="state parameter tensor")
    grad = g.add_input((2, 3), F32, CPU, label="grad")
    step = _node(g, "mul", [grad, 0.1])
    new_p = _node(g, "sub", [p, step])
    g.outputs = [new_p]
    if read_after:
        g.outputs.append(_node(g, "exp", [p]))
    return g, p, new_p


def test_state_update_writes_into_the_state_input_when_nobody_reads_it_after():
    g, p, new_p = _state_graph(read_after=False)
    plan = _plan(g, {new_p: p})
    assert plan.inplace == {new_p: p} and new_p not in plan.offsets
    g2, p2, new_p2 = _state_graph(read_after=True)
    plan2 = _plan(g2, {new_p2: p2})
    assert plan2.inplace == {} and new_p2 in plan2.offsets


def test_executable_writes_arena_and_state_memory_and_matches_unplanned():
    g, p, new_p = _state_graph(read_after=False)
    param = np.arange(6, dtype=np.float32).reshape(2, 3)
    grad = np.full((2, 3), 0.5, np.float32)
    expected = Executable(g, "cpu", plan_memory=False).run([param.copy(), grad])[0]
    ex = Executable(g, "cpu", donors={new_p: p})
    (result,) = ex.run([param, grad])
    assert np.shares_memory(result, param)
    np.testing.assert_array_equal(param, expected)
    step = g.nodes[0].outputs[0]
    assert np.shares_memory(ex.arena.buffer(step), ex.arena.storage["float32"])


def _convolution_cases(rng):
    """Forward (whole rows, windows, strided), output smaller than the kernel, transposed
    (stride 1 cropped by padding, strided with output padding)."""

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def case(x, w, stride=(1, 1), padding=((0, 0), (0, 0)), transposed=False, output_padding=(0, 0)):
        attrs = {"stride": stride, "padding": padding, "dilation": (1, 1), "groups": 1}
        return (x, w, {**attrs, "transposed": transposed, "output_padding": output_padding})

    return [
        case(f32(2, 3, 7, 6), f32(4, 3, 3, 2)),
        case(f32(2, 1, 7, 6), f32(8, 1, 3, 3)),
        case(f32(2, 3, 7, 6), f32(4, 3, 3, 2), stride=(2, 1), padding=((1, 1), (0, 1))),
        case(f32(3, 2, 7, 6), f32(4, 2, 6, 5)),
        case(f32(2, 4, 5, 4), f32(4, 3, 3, 2), padding=((1, 1), (0, 0)), transposed=True),
        case(f32(2, 4, 5, 4), f32(4, 3, 3, 2), stride=(2, 2), transposed=True, output_padding=(1, 0)),
    ]


def _max_pool_cases(rng):
    """Tiling windows, overlapping padded and dilated ones, and NaN / -inf windows."""
    x = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    x[0, 0, :2, :2] = np.nan
    x[0, 1, :2, :2] = -np.inf
    x[1, 2, 4:6, 2:4] = 1.0  # ties: the first maximum wins

    def case(kernel_size, stride, padding, dilation, output_size):
        attrs = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "dilation": dilation}
        return (x, {**attrs, "output_size": output_size})

    return [case((2, 2), (2, 2), (0, 0), (1, 1), (4, 3)), case((3, 2), (2, 1), (1, 1), (2, 1), (3, 8))]


@pytest.mark.parametrize("name", sorted(OUT_KERNELS))
def test_out_kernels_match_the_eager_kernels_bit_for_bit(name):
    kernels = munet._device.get_backend(CPU).kernels
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32) + 2
    a[0, 0], b[1, 1], a[2, 2] = np.nan, np.inf, -0.0
    index = rng.integers(0, 4, (4, 5))
    cases = {
        "matmul": [(a, b.T.copy())],
        "where": [(a > 0, a, b), (a > 0, a, 0.5)],
        "threshold_backward": [(a, b - 2, {"threshold": 0.0})],
        "lerp": [(a, b, 0.1), (a, b, 0.9)],
        "add": [(a, b), (a, 2.5), (a, b[0])],
        "cat": [([a, b.T.copy().T[:, :3]], {"dim": 1, "sizes": (5, 3)}), ([a, a[:1]], {"dim": 0, "sizes": (4, 1)})],
        "convolution": _convolution_cases(rng),
        "max_pool": _max_pool_cases(rng),
        "adam_second_moment": [(a, b, 0.999, 0.001)],
        "adam_param_update": [(a, b, np.abs(b), np.float32(0.75), 1e-8, np.float32(0.01))],
        "standardize_input_grad": [(a, b, a[:, :1], b[:, :1], np.abs(b[:, :1])), (a, b, a[:, :1], 0.0, np.abs(b))],
        "index": [
            (a, [index[0]], {"positions": (0,), "wrap": True}),  # an embedding's lookup, repeated rows
            (a, [np.array([-1, 0, 2]), np.array([4, -5, 0])], {"positions": (0, 1), "wrap": True}),
            (a, [np.array([[4, 0], [1, 1]])], {"positions": (1,), "wrap": False}),
        ],
        "as_strided_scatter": [
            (a, b[:2, :3], {"size": (2, 3), "stride": (5, 1), "storage_offset": 6}),
            (np.broadcast_to(b[0], (4, 5)), a[:, :2].T, {"size": (2, 4), "stride": (1, 5), "storage_offset": 2}),
        ],
        "scatter": [
            (a, index, b, {"dim": 1, "reduce": "add"}),  # repeated indices accumulate
            (a, index[:3, :2], b, {"dim": 0, "reduce": None}),
            (a, index, b, {"dim": 1, "reduce": "multiply"}),
            (a, index, 1.5, {"dim": 1, "reduce": None}),
        ],
    }
    ints = (rng.integers(-9, 9, (4, 5)), rng.integers(0, 6, (4, 5)))
    attrs = {  # the attrs of the ops that take some
        "threshold": {"threshold": 0.1, "value": -3.0},
        "hardtanh": {"min_val": -0.5, "max_val": 0.75},
        "hardtanh_backward": {"min_val": -0.5, "max_val": 0.75},
        "leaky_relu": {"negative_slope": 0.1},
        "leaky_relu_backward": {"negative_slope": 0.1},
        "elu": {"alpha": 1.0, "scale": 1.5, "input_scale": 0.5},
        "softplus": {"beta": 2.0, "threshold": 5.0},
        "gelu": {"approximate": "none"},
        "gelu_backward": {"approximate": "tanh"},
        "round": {"decimals": 1},
        "nan_to_num": {"nan": 1.0, "posinf": 2.0, "neginf": -2.0},
    }
    op = OPS.get(name)
    arity = len(op.inputs) if op is not None else 2
    operands = ints if name.startswith("bitwise") else (a, b)
    if name == "clamp":
        default = [(a, -0.5, 1.0), (a, None, b), (a, b - 2, None)]
    elif arity == 1:
        default = [
            (operands[1] if name.startswith("bitwise") else np.abs(b), *([attrs[name]] if name in attrs else []))
        ]
    else:
        default = [(*operands[:arity], *([attrs[name]] if name in attrs else []))]
    for args in cases.get(name, default):
        attrs = args[-1] if isinstance(args[-1], dict) else {}
        args = args[:-1] if attrs else args
        expected = kernels[name](*args, **attrs)
        if isinstance(expected, tuple):  # values and int64 indices
            out = tuple(np.full(e.shape, 7, e.dtype) for e in expected)
            OUT_KERNELS[name][0](out, *args, **attrs)
            np.testing.assert_array_equal(out[0].view(np.int32), expected[0].view(np.int32))
            np.testing.assert_array_equal(out[1], expected[1])
            continue
        expected = np.asarray(expected)
        out = np.empty(expected.shape, expected.dtype)
        OUT_KERNELS[name][0](out, *args, **attrs)
        np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))


def _mlp_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def test_compiled_adamw_step_updates_state_in_place_and_matches_eager():
    def make():
        munet.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        return model, munet.optim.AdamW(model.parameters(), lr=1e-2)

    munet.manual_seed(1)
    x, y = munet.randn(5, 8), munet.randint(0, 4, (5,))
    eager_model, eager_opt = make()
    model, opt = make()
    step = munet.compile(_mlp_step, fuse=False)  # generated kernels round differently; this test is about memory
    addresses = [p._data.__array_interface__["data"][0] for p in model.parameters()]
    for _ in range(4):
        expected = _mlp_step(eager_model, eager_opt, x, y).item()
        assert step(model, opt, x, y).item() == expected
    for p, q in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    assert [p._data.__array_interface__["data"][0] for p in model.parameters()] == addresses
    memory = step.stats()["memory"]
    # every parameter, both moments and the step count of 4 parameters are updated in place
    assert memory["inplace_updates"] == 16
    assert 0 < step.stats()["arena_bytes"] < memory["naive_bytes"]
    assert isinstance(step._last.executable.arena, Arena)


class _OptedInOp:
    """Stands for a lowering (fused kernels) that writes every output into ``Arena.target``."""

    name = "opted_in"
    view = None
    writes_planned_outputs = True

    @staticmethod
    def reads_at_write_index(node, source):
        return True


def test_opted_in_multi_output_op_is_planned_and_may_update_state_in_place():
    g = Graph()
    p = g.add_input((2, 3), F32, CPU, label="state parameter tensor")
    grad = g.add_input((2, 3), F32, CPU, label="grad")
    node = g.add_node(_OptedInOp(), [p, grad], {}, [((2, 3), F32, CPU, "tensor")] * 2)
    new_p, extra = node.outputs
    g.outputs = [new_p, _node(g, "exp", [extra])]
    arena = Arena(g, {new_p: p}, {p: 0, grad: 1})
    assert arena.plan.inplace == {new_p: p} and extra in arena.plan.offsets
    param = np.zeros((2, 3), np.float32)
    assert arena.target(new_p)([param, None]) is param
    assert np.shares_memory(arena.target(extra)([param, None]), arena.storage["float32"])
    assert arena.target(g.outputs[1]) is not None and arena.target(p) is None


def test_compiled_conv_pool_step_plans_max_pool_and_its_scatter_and_matches_eager():
    def make():
        munet.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(36, 3))
        return model, munet.optim.SGD(model.parameters(), lr=0.1)

    munet.manual_seed(1)
    x, y = munet.randn(5, 2, 8, 8), munet.randint(0, 3, (5,))
    eager_model, eager_opt = make()
    model, opt = make()
    step = munet.compile(_mlp_step, fuse=False)
    for _ in range(3):
        assert step(model, opt, x, y).item() == _mlp_step(eager_model, eager_opt, x, y).item()
    for p, q in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    executable = step._last.executable
    planned = executable.arena.plan.offsets
    nodes = [n for n in executable.graph.nodes if n.name in ("max_pool", "scatter")]
    assert {n.name for n in nodes} == {"max_pool", "scatter"}
    assert all(v in planned for n in nodes for v in n.outputs)
    assert planned[[n for n in nodes if n.name == "max_pool"][0].outputs[1]][0] == "int64"


@pytest.mark.parametrize("fuse", [False, True])
def test_a_state_restored_from_its_own_input_keeps_it(fuse):
    # where(flag, s, s + 1) written into s's own memory: the out= kernel must read s before writing
    # (the GradScaler's skipped first step restores a step count this way)
    s = munet.zeros(5)
    flag = munet.tensor([True, False, True, False, True])

    def step(flag):
        s.copy_(munet.where(flag, s, s + 1))
        return flag.sum()

    compiled = munet.compile(step, fuse=fuse)
    for _ in range(3):
        compiled(flag)
    assert compiled.stats()["memory"]["inplace_updates"] == 1
    np.testing.assert_array_equal(s.numpy(), [0, 3, 0, 3, 0])

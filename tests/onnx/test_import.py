"""munet.onnx.load: imported programs reproduce onnxruntime on MuNet exports (round trips), on models
exported by torch.onnx.export, and on hand-built graphs; they train, save, compile, and refuse what
they cannot run by naming the operator, its domain and opset."""

from __future__ import annotations

import io
import subprocess
import sys
import warnings

import numpy as np
import pytest

import munet
import munet.nn as nn
from munet.onnx import UnsupportedError
from tests.onnx.ort import assert_matches, onnx, run_ort
from tests.onnx.test_export import Block
from tests.reference import DEVICE_TOL

torch = pytest.importorskip("torch")
helper = onnx.helper
TP = onnx.TensorProto


def torch_export(module, args, *, dynamo: bool, **kwargs):
    """``torch.onnx.export`` at opset 18 into memory. The TorchScript exporter (``dynamo=False``) fails
    on nn.TransformerEncoderLayer in torch 2.13 (scaled_dot_product_attention's is_causal), so the
    transformer uses the dynamo exporter (which needs onnxscript)."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, buffer, opset_version=18, dynamo=dynamo, verbose=False, **kwargs)
    return onnx.load_from_string(buffer.getvalue())


def compare_with_ort(model, *arrays, program=None):
    program = program or munet.onnx.load(model)
    got = program(*arrays)
    got = got if isinstance(got, tuple) else (got,)
    assert_matches(got, run_ort(model, dict(zip(program.input_names, arrays))))
    return program


# round trips -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mlp", "cnn", "block", "embedding"])
def test_round_trip(name):
    x = munet.randn(2, 6, 16)
    if name == "mlp":
        model, x = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 3)), munet.randn(4, 16)
    elif name == "cnn":
        model = nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 2)
        )
        x = munet.randn(2, 3, 8, 8)
    elif name == "block":
        model = Block()
    else:
        model, x = nn.Embedding(30, 8), munet.randint(0, 30, (3, 5))
    model.eval()
    exported = munet.onnx.export(model, (x,), None)
    program = compare_with_ort(exported, x.numpy())
    with munet.no_grad():
        assert_matches([program(x)], [model(x).numpy()])


def test_called_by_position_name_and_dict_with_tensors_or_arrays():
    exported = munet.onnx.export(lambda a, b: a * 2 + b, (munet.randn(3), munet.randn(3)), None, input_names=["a", "b"])
    program = munet.onnx.load(exported)
    a, b = munet.randn(3), munet.randn(3)
    expected = (a * 2 + b).numpy()
    for result in (
        program(a, b),
        program(a.numpy(), b=b),
        program(b=b, a=a),
        program({"a": a.numpy(), "b": b.numpy()}),
    ):
        assert isinstance(result, munet.Tensor)
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)
    with pytest.raises(TypeError, match="no input named 'c'"):
        program(a, c=b)
    with pytest.raises(TypeError, match="missing inputs \\['b'\\]"):
        program(a)
    with pytest.raises(TypeError, match="input 'a' must be munet.float32, got munet.int64"):
        program(munet.tensor([1, 2, 3]), b)


def test_integer_and_bool_outputs_keep_their_declared_types():
    def fn(x):
        return x.argmax(1), x > 0, (x * 10).to(munet.int32), x.sum(1)

    x = munet.randn(3, 4)
    program = munet.onnx.load(munet.onnx.export(fn, (x,), None))
    outs = program(x)
    assert [o.dtype for o in outs] == [munet.int64, munet.bool, munet.int32, munet.float32]
    assert_matches(outs, [o.numpy() for o in fn(x)])


# models exported by PyTorch -------------------------------------------------------------------------


class TorchCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.c2, self.b2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2), torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.b1(self.c1(x))), 2, ceil_mode=True)
        y = torch.nn.functional.avg_pool2d(torch.nn.functional.hardswish(self.b2(self.c2(y))), 2)
        y = torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return torch.log_softmax(self.fc(y), -1)


class TorchShapes(torch.nn.Module):
    """Shape arithmetic the exporters write as Shape/Gather/Concat/Reshape, masks, casts, slicing."""

    def forward(self, x):
        b = x.shape[0]
        y = x.reshape(b, -1)[:, 1:-1:2]
        mask = y > 0
        z = torch.where(mask, y, torch.zeros_like(y)) + mask.float()
        z = torch.cat([z, z.flip(1)], dim=1).unsqueeze(1).expand(b, 2, -1)
        return z.sum(-1).to(torch.int32), torch.topk(y, 2).values, torch.clamp(y, -0.5, 0.5).cumsum(1)


class TorchRecurrent(torch.nn.Module):
    """A stacked LSTM feeding a bidirectional GRU."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, num_layers=2, batch_first=True)
        self.gru = torch.nn.GRU(8, 5, bidirectional=True, batch_first=True)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, h = self.gru(y)
        return y, h


def torch_models():
    torch.manual_seed(0)
    return {
        "mlp": (
            torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4), torch.nn.Tanh()),
            (3, 8),
        ),
        "cnn": (TorchCNN(), (2, 3, 17, 17)),
        "encoder": (torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), (2, 5, 16)),
        "shapes": (TorchShapes(), (3, 4, 5)),
        "recurrent": (TorchRecurrent(), (2, 7, 6)),
    }


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("name", ["mlp", "cnn", "encoder", "shapes", "recurrent"])
def test_models_exported_by_torch(name, dynamo):
    if name == "encoder" and not dynamo:
        pytest.skip("torch 2.13's TorchScript exporter fails on TransformerEncoderLayer (is_causal must be bool)")
    module, shape = torch_models()[name]
    x = torch.randn(*shape)
    kwargs = {} if dynamo else {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch"}}}
    model = torch_export(module, (x,), dynamo=dynamo, **kwargs)
    program = compare_with_ort(model, x.numpy())
    with torch.no_grad():
        expected = module(x)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert_matches(
        program(x.numpy()) if len(expected) > 1 else [program(x.numpy())], [e.numpy() for e in expected], atol=1e-5
    )
    if not dynamo:  # the batch axis is symbolic: another batch size runs too
        x2 = np.random.default_rng(0).standard_normal((5, *shape[1:])).astype(np.float32)
        compare_with_ort(model, x2, program=program)


# optimizations ----------------------------------------------------------------------------------------


def conv_bn_model(rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    stats = [rng.random(4).astype(np.float32) + 0.5, rng.standard_normal(4).astype(np.float32)]
    stats += [rng.standard_normal(4).astype(np.float32), rng.random(4).astype(np.float32) + 0.1]
    inits = [
        onnx.numpy_helper.from_array(a, n) for a, n in zip([w, b, *stats], ["w", "b", "scale", "beta", "mean", "var"])
    ]
    shape = helper.make_node("Shape", ["y"], ["shape"])
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["bn"], epsilon=1e-3, name="bn"),
        helper.make_node("Relu", ["bn"], ["y"]),
        shape,
        helper.make_node("Constant", [], ["two"], value=onnx.numpy_helper.from_array(np.asarray([2], np.int64))),
        helper.make_node("Mul", ["two", "two"], ["four"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TP.FLOAT, [2, 3, 6, 6])],
        [
            helper.make_tensor_value_info("y", TP.FLOAT, [2, 4, 6, 6]),
            helper.make_tensor_value_info("four", TP.INT64, [1]),
        ],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_batch_norm_folded_into_conv_and_constants_folded():
    model = conv_bn_model(np.random.default_rng(0))
    x = np.random.default_rng(1).standard_normal((2, 3, 6, 6)).astype(np.float32)
    program = compare_with_ort(model, x)
    assert program.optimizations == [
        "BatchNormalization 'bn' folded into Conv 'conv'",
        "constant folding: 2 nodes evaluated at import",
    ]
    unoptimized = compare_with_ort(model, x, program=munet.onnx.load(model, optimize=False))
    assert unoptimized.optimizations == []
    assert len(list(unoptimized.parameters())) == 6 and len(list(program.parameters())) == 2


class QKV(torch.nn.Module):
    """An attention block's three projections of one input, and a Conv pair reading one feature map."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(8, n) for n in (8, 8, 4))

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        return torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, -1) @ v


@pytest.mark.parametrize("shape", [(5, 8), (2, 5, 8)], ids=["gemm", "matmul"])
def test_sibling_projections_merge(shape):
    torch.manual_seed(0)
    module = QKV()
    x = torch.randn(*shape)
    model = torch_export(module, (x,), dynamo=False)
    program = compare_with_ort(model, x.numpy())
    merged = [line for line in program.optimizations if "merged into one" in line]
    assert len(merged) == 1 and "output features [8, 8, 4]" in merged[0], program.optimizations
    op = "Gemm" if len(shape) == 2 else "MatMul"
    assert merged[0].startswith(op)
    plain = munet.onnx.load(model, optimize=False)
    assert not any("merged" in line for line in plain.optimizations)
    assert len(list(program.parameters())) < len(list(plain.parameters()))
    with munet.no_grad():
        np.testing.assert_allclose(program(x.numpy()).numpy(), plain(x.numpy()).numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(program(x.numpy()).numpy(), module(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def _sibling_graph(rng, op, attrs, weight_shapes, bias: bool, x_shape, y_shapes):
    nodes, inits = [], []
    for i, w_shape in enumerate(weight_shapes):
        inits.append(onnx.numpy_helper.from_array(rng.standard_normal(w_shape).astype(np.float32), f"w{i}"))
        inputs = ["x", f"w{i}"]
        if bias:
            n = w_shape[0] if op == "Conv" or attrs.get("transB") else w_shape[1]
            inits.append(onnx.numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), f"b{i}"))
            inputs.append(f"b{i}")
        nodes.append(helper.make_node(op, inputs, [f"y{i}"], name=f"n{i}", **attrs))
    outputs = [helper.make_tensor_value_info(f"y{i}", TP.FLOAT, s) for i, s in enumerate(y_shapes)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, x_shape)], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize(
    "op, attrs, weights, bias, x_shape, y_shapes",
    [
        ("Gemm", {"transB": 1, "alpha": 0.5, "beta": 2.0}, [(3, 6), (5, 6)], True, [4, 6], [[4, 3], [4, 5]]),
        (
            "Conv",
            {"pads": [1, 1, 1, 1]},
            [(2, 3, 3, 3), (4, 3, 3, 3)],
            True,
            [2, 3, 5, 5],
            [[2, 2, 5, 5], [2, 4, 5, 5]],
        ),
        (
            "Conv",
            {},
            [(2, 3, 1, 1), (3, 3, 1, 1), (1, 3, 1, 1)],
            False,
            [1, 3, 4, 4],
            [[1, n, 4, 4] for n in (2, 3, 1)],
        ),
    ],
    ids=["gemm-transB", "conv-bias", "conv-three"],
)
def test_sibling_gemm_and_conv_merge(op, attrs, weights, bias, x_shape, y_shapes):
    model = _sibling_graph(np.random.default_rng(0), op, attrs, weights, bias, x_shape, y_shapes)
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    program = compare_with_ort(model, x)
    assert program.optimizations == [
        f"{op} nodes {[f'n{i}' for i in range(len(weights))]} reading 'x' merged into one "
        f"(output features {[w[1] if op == 'Gemm' and not attrs.get('transB') else w[0] for w in weights]})"
    ]
    assert len(list(program.parameters())) == (2 if bias else 1)


def test_siblings_that_differ_are_not_merged():
    rng = np.random.default_rng(0)
    model = _sibling_graph(
        rng, "Conv", {}, [(2, 3, 1, 1), (2, 3, 3, 3)], False, [1, 3, 4, 4], [[1, 2, 4, 4], [1, 2, 2, 2]]
    )
    assert munet.onnx.load(model).optimizations == []  # different kernel sizes


# training, saving, compiling ---------------------------------------------------------------------------


def test_program_fine_tunes_and_saves(tmp_path):
    module = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model = torch_export(module, (torch.randn(2, 4),), dynamo=False)
    program = munet.onnx.load(model)
    params = list(program.parameters())
    assert len(params) == 4 and all(p.requires_grad for p in params)
    program.train()
    optimizer = munet.optim.SGD(program.parameters(), lr=0.05)
    x, y = munet.randn(16, 4), munet.randn(16, 1)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = ((program(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.9
    munet.save(program.state_dict(), tmp_path / "p.safetensors")
    fresh = munet.onnx.load(model)
    fresh.load_state_dict(munet.load(tmp_path / "p.safetensors"))
    with munet.no_grad():
        np.testing.assert_array_equal(fresh(x).numpy(), program(x).numpy())


def test_program_runs_under_munet_compile():
    module = TorchShapes()
    model = torch_export(module, (torch.randn(3, 4, 5),), dynamo=False, input_names=["x"], dynamic_axes={"x": {0: "b"}})
    program = munet.onnx.load(model)
    compiled = munet.compile(program)
    for batch in (3, 6):
        x = munet.randn(batch, 4, 5)
        with munet.no_grad():
            assert_matches(compiled(x), [o.numpy() for o in program(x)])


# refusals ---------------------------------------------------------------------------------------------


def single_node_model(node, inputs, outputs, opset=18, domains=()):
    graph = helper.make_graph([node], "g", inputs, outputs)
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=opsets)


def test_unsupported_operator_domain_and_type_are_named():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [2])
    custom = single_node_model(
        helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft", name="g"), [x], [y], domains=["com.microsoft"]
    )
    with pytest.raises(
        UnsupportedError, match="node 'g': operator Gelu \\(domain 'com.microsoft', opset 18\\) is not supported"
    ):
        munet.onnx.load(custom)
    unknown = single_node_model(
        helper.make_node("MaxRoiPool", ["x", "x"], ["y"], pooled_shape=[1, 1], name="d"),
        [helper.make_tensor_value_info("x", TP.FLOAT, [1, 2, 1])],
        [y],
    )
    with pytest.raises(UnsupportedError, match="operator MaxRoiPool \\(domain 'ai.onnx', opset 18\\) is not supported"):
        munet.onnx.load(unknown)
    complex_out = helper.make_tensor_value_info("y", TP.COMPLEX64, [2])
    cast = single_node_model(helper.make_node("Cast", ["x"], ["y"], to=TP.COMPLEX64, name="c"), [x], [complex_out])
    with pytest.raises(
        UnsupportedError, match="operator Cast .* produces 'y': element type COMPLEX64 is not supported"
    ):
        munet.onnx.load(cast)


def test_unsupported_attribute_is_named():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [1, 1, 4, 4])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [1, 1, 2, 2])
    scales = helper.make_tensor("scales", TP.FLOAT, [4], [1, 1, 0.5, 0.5])
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], antialias=1, mode="nearest", name="p")
    graph = helper.make_graph([node], "g", [x], [y], initializer=[scales])
    program = munet.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    with pytest.raises(
        UnsupportedError, match="node 'p': operator Resize \\(domain 'ai.onnx', opset 18\\): antialias=1 with mode"
    ):
        program(np.zeros((1, 1, 4, 4), np.float32))


def test_malformed_files_are_refused(tmp_path):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\x08\x07\x12\xff\xff\xff")
    with pytest.raises(ValueError, match="broken.onnx"):
        munet.onnx.load(path)
    with pytest.raises(TypeError, match="expected a path, bytes"):
        munet.onnx.load(12)


def test_import_munet_works_without_onnx():
    code = (
        "import sys; sys.modules['onnx'] = None\n"
        "import munet\n"
        "try:\n    munet.onnx.export(munet.nn.Linear(2, 2), (munet.randn(1, 2),), None)\n"
        "except ImportError as e:\n    print('refused:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".")
    assert "refused: munet.onnx needs the onnx package" in out.stdout


def test_program_on_vulkan(vulkan):
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(64, 5)).eval()
    x = munet.randn(2, 3, 4, 4)
    exported = munet.onnx.export(model, (x,), None, input_names=["x"], dynamic_axes={"x": [0]})
    program = munet.onnx.load(exported, device=vulkan)
    assert all(p.device == vulkan for p in program.parameters())
    y = program(x.to(vulkan))
    assert y.device == vulkan
    rtol, atol = DEVICE_TOL["float32"]  # a GPU's summation order differs by a few ulps
    np.testing.assert_allclose(y.detach().cpu().numpy(), run_ort(exported, {"x": x.numpy()})[0], rtol=rtol, atol=atol)


def test_benchmark_models_round_trip():
    """MuNet -> ONNX -> MuNet for the benchmark models' shapes (benchmarks/compare_pytorch.py), the GPT
    at a small width (tests/compiler/models.py): the same outputs, and onnxruntime agrees."""
    from benchmarks.compare_pytorch import cnn, mlp
    from tests.compiler.models import GPT

    cases = [
        (mlp(nn), munet.randn(3, 784)),
        (cnn(nn), munet.randn(2, 1, 28, 28)),
        (GPT(vocab=13, context=8, width=16, heads=2, layers=2), munet.randint(0, 13, (2, 8))),
    ]
    for model, x in cases:
        model.eval()
        exported = munet.onnx.export(model, (x,), None)
        onnx.checker.check_model(exported, full_check=True)
        program = compare_with_ort(exported, x.numpy())
        with munet.no_grad():
            assert_matches([program(x)], [model(x).numpy()])


@pytest.mark.parametrize("condition", [True, False])
def test_if_with_a_constant_condition_resolves_at_import(condition):
    x = helper.make_tensor_value_info("x", TP.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [3])
    then_out = helper.make_tensor_value_info("t", TP.FLOAT, [3])
    else_out = helper.make_tensor_value_info("e", TP.FLOAT, [3])
    then_branch = helper.make_graph([helper.make_node("Exp", ["x"], ["t"])], "then", [], [then_out])
    else_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [else_out])
    nodes = [
        helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TP.BOOL, [], [condition])),
        helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch, name="if"),
    ]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 18)])
    data = np.array([0.5, -1.0, 2.0], np.float32)
    program = compare_with_ort(model, data)
    assert f"If 'if' resolved at import: its condition is constant ({condition})" in program.optimizations
    unresolved = munet.onnx.load(model, optimize=False)
    assert unresolved.optimizations == []
    assert_matches([unresolved(data)], [program(data).numpy()])


def _accumulating_loop(trip_count, condition_out="cond_in", body_cond_const=None):
    """y = x + 0 + 1 + ... + (trip_count - 1) (a carried sum) with the per-iteration sums as a scan output."""
    iteration = helper.make_tensor_value_info("i", TP.INT64, [])
    cond_in = helper.make_tensor_value_info("cond_in", TP.BOOL, [])
    carried_in = helper.make_tensor_value_info("acc_in", TP.FLOAT, [3])
    outputs = [
        helper.make_tensor_value_info("cond_out", TP.BOOL, []),
        helper.make_tensor_value_info("acc_out", TP.FLOAT, [3]),
        helper.make_tensor_value_info("scan_out", TP.FLOAT, [3]),
    ]
    body_nodes = [
        helper.make_node("Cast", ["i"], ["i_float"], to=TP.FLOAT),
        helper.make_node("Add", ["acc_in", "i_float"], ["acc_out"]),
        helper.make_node("Mul", ["acc_out", "acc_out"], ["scan_out"]),
        helper.make_node("Identity", [condition_out], ["cond_out"]),
    ]
    body = helper.make_graph(body_nodes, "body", [iteration, cond_in, carried_in], outputs)
    x = helper.make_tensor_value_info("x", TP.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [3])
    scans = helper.make_tensor_value_info("scans", TP.FLOAT, [trip_count, 3])
    nodes = [
        helper.make_node("Constant", [], ["trip"], value=helper.make_tensor("t", TP.INT64, [], [trip_count])),
        helper.make_node("Constant", [], ["go"], value=helper.make_tensor("g", TP.BOOL, [], [True])),
        helper.make_node("Loop", ["trip", "go", "x"], ["y", "scans"], body=body, name="loop"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y, scans])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("trip_count", [0, 1, 5])
def test_loop_with_a_constant_trip_count_unrolls_at_import(trip_count):
    model = _accumulating_loop(trip_count)
    data = np.array([0.5, -1.0, 2.0], np.float32)
    if trip_count == 0:  # no iteration, so no scan output: carried values pass through
        model.graph.output.pop()
        model.graph.node[-1].output.pop()
        model.graph.node[-1].attribute[0].g.output.pop()
    program = compare_with_ort(model, data)
    assert f"Loop 'loop' unrolled at import: {trip_count} iterations (a constant trip count)" in program.optimizations
    assert all(node.op_type != "Loop" for node in program._nodes)
    host_loop = munet.onnx.load(model, optimize=False)
    got = host_loop(data)
    assert_matches([got] if trip_count == 0 else list(got), run_ort(model, {"x": data}))
    # unrolled, the loop compiles as one graph: no host read of a trip count or condition
    report = munet.compiler.explain(program)(munet.from_numpy(data))
    assert report.graph_break_count == 0


def test_loop_whose_condition_is_computed_stays_a_host_loop():
    model = _accumulating_loop(4)
    body = model.graph.node[-1].attribute[0].g
    body.node[-1].CopyFrom(helper.make_node("Less", ["i", "i"], ["cond_out"]))  # false after the first step
    data = np.array([0.5, -1.0, 2.0], np.float32)
    model.graph.output[1].type.tensor_type.shape.dim[0].dim_value = 1
    program = compare_with_ort(model, data)
    assert not any(line.startswith("Loop") for line in program.optimizations)
    assert any(node.op_type == "Loop" for node in program._nodes)

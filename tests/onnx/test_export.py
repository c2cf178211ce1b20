"""munet.onnx.export: the written model passes onnx's full checker and onnxruntime reproduces MuNet."""

from __future__ import annotations

import io

import numpy as np
import pytest

import munet
import munet.nn as nn
import munet.nn.functional as F
from munet.onnx import ExportError
from munet.onnx.export_ops import CREATION, NOT_EXPORTED, RULES
from tests.onnx.ort import assert_matches, onnx, run_ort


def export_and_compare(fn, *args, opset=18, **kwargs):
    """Export ``fn(*args)``, check it fully, run it in onnxruntime, compare with MuNet; returns the model."""
    model = munet.onnx.export(fn, args, None, opset_version=opset, **kwargs)
    onnx.checker.check_model(model, full_check=True)
    feeds = {i.name: a.numpy() for i, a in zip(model.graph.input, args)}
    with munet.no_grad():
        expected = fn(*args)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    assert_matches(expected, run_ort(model, feeds))
    return model


def op_types(model) -> set:
    return {n.op_type for n in model.graph.node}


class Block(nn.Module):
    """A pre-norm transformer block: layer norm, attention (matmul, softmax), a GELU MLP."""

    def __init__(self, d=16, heads=2, approximate="none"):
        super().__init__()
        self.heads, self.approximate = heads, approximate
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        mask = munet.ones(t, t).tril().bool()
        scores = (q @ k.transpose(-1, -2)) / (d // self.heads) ** 0.5
        attn = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate=self.approximate))


def test_mlp():
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, 4), nn.Sigmoid())
    exported = export_and_compare(model, munet.randn(5, 8))
    names = {i.name for i in exported.graph.initializer}
    assert {"0.weight", "0.bias", "4.weight"} <= names  # initializers carry the state_dict names


def test_cnn_in_eval_mode():
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, stride=2, groups=2, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU6(),
        nn.MaxPool2d(2, ceil_mode=True),
        nn.AvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 3),
    )
    x = munet.randn(4, 3, 11, 11)
    model.train()
    model(x)  # running statistics that are not the initial ones
    model.eval()
    exported = export_and_compare(model, x)
    assert {"Conv", "MaxPool"} <= op_types(exported)


def test_avg_pool_and_adaptive_pool():
    model = nn.Sequential(
        nn.Conv2d(2, 4, 3), nn.AvgPool2d(2, padding=1), nn.AdaptiveMaxPool2d(2), nn.AdaptiveAvgPool2d(1)
    )
    export_and_compare(model.eval(), munet.randn(2, 2, 9, 9))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_transformer_block(approximate):
    exported = export_and_compare(Block(approximate=approximate).eval(), munet.randn(2, 6, 16))
    assert {"LayerNormalization", "Softmax", "MatMul"} <= op_types(exported)


@pytest.mark.parametrize("opset", [13, 17])
def test_transformer_block_older_opsets(opset):
    exported = export_and_compare(Block().eval(), munet.randn(2, 6, 16), opset=opset)
    assert exported.opset_import[0].version == opset
    assert ("LayerNormalization" in op_types(exported)) == (opset >= 17)


def test_embedding():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8)
            self.out = nn.Linear(8, 20)

        def forward(self, idx):
            return F.log_softmax(self.out(self.emb(idx)), dim=-1)

    export_and_compare(Model(), munet.randint(0, 20, (3, 7)))


def test_dynamic_batch_axis():
    model = Block().eval()
    exported = munet.onnx.export(
        model,
        (munet.randn(2, 6, 16),),
        None,
        input_names=["x"],
        output_names=["y"],
        dynamic_axes={"x": {0: "batch"}, "y": [0]},
    )
    onnx.checker.check_model(exported, full_check=True)
    assert exported.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert exported.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "y_dim0"
    for batch in (1, 5):
        x = munet.randn(batch, 6, 16)
        with munet.no_grad():
            expected = model(x)
        assert_matches([expected], run_ort(exported, {"x": x.numpy()}))


def test_dynamic_axis_that_changes_a_constant_is_refused():
    def fn(x):
        return x.sum(0) / x.shape[0]  # a Python number computed from the shape

    with pytest.raises(ExportError, match="div: its arguments change with the dynamic axes"):
        munet.onnx.export(fn, (munet.randn(3, 4),), None, dynamic_axes={"input_0": [0]})


ELEMENTWISE = {
    "arith": lambda x, y: (x + y * 2 - 1) / (y.abs() + 1) ** 2,
    "unary": lambda x, y: x.exp() + x.sin() + x.cos() + x.tanh() + x.sigmoid() + x.neg() + x.abs().sqrt() + x.erf(),
    "logs": lambda x, y: x.abs().log1p() + (x.abs() + 1).log2() + (x.abs() + 1).log10() + x.expm1() + x.exp2(),
    "rounding": lambda x, y: (x * 3).floor() + (x * 3).ceil() + (x * 3).round() + (x * 3).trunc() + (x * 3).frac(),
    "rsqrt": lambda x, y: (x.abs() + 0.5).rsqrt() + (x.abs() + 0.5).reciprocal() + x.sign(),
    "compare": lambda x, y: munet.where(x > y, x, y) + (x <= y).float() + (x == x).float() + (x != y).float(),
    "logical": lambda x, y: (
        ((x > 0) & (y > 0)).float() + ((x > 0) | (y < 0)).float() + ((x > 0) ^ (y > 0)).float() + (~(x > 0)).float()
    ),
    "clamp": lambda x, y: x.clamp(-0.5, 0.5) + x.clamp(min=y) + munet.maximum(x, y) + munet.minimum(x, y),
    "activations": lambda x, y: (
        F.leaky_relu(x, 0.1)
        + F.elu(x)
        + F.selu(x)
        + F.softplus(x)
        + F.hardtanh(x)
        + F.silu(x)
        + F.mish(x)
        + F.hardswish(x)
        + F.hardsigmoid(x)
        + F.threshold(x, 0.1, -2.0)
    ),
    "division": lambda x, y: (
        munet.remainder(x, y + 3)
        + munet.fmod(x, y + 3)
        + munet.floor_divide(x * 4, y + 3)
        + munet.div(x * 4, y + 3, rounding_mode="trunc")
    ),
    "special": lambda x, y: (
        munet.lerp(x, y, 0.3)
        + munet.hypot(x, y)
        + munet.copysign(x, y)
        + munet.xlogy(x.abs(), y.abs() + 1)
        + munet.fmax(x, y)
        + munet.heaviside(x, y)
    ),
    "nan_to_num": lambda x, y: munet.nan_to_num(x / (y * 0), nan=1.0, posinf=2.0, neginf=-3.0),
    "masks": lambda x, y: (
        x.masked_fill(y > 0, 7.0) + munet.isnan(x).float() + munet.isfinite(x).float() + munet.signbit(x).float()
    ),
    "integers": lambda x, y: (
        (x * 10).long() // 3 + (x * 10).long() % 3 + ((x * 10).long() & 6) + ((x * 10).long() | 1)
    ).float(),
    "reductions": lambda x, y: (
        x.sum(1, keepdim=True)
        + x.mean(0)
        + x.amax(1, keepdim=True)
        + x.amin(0)
        + x.prod(1, keepdim=True)
        + x.logsumexp(1, keepdim=True)
        + x.std(0)
        + x.var(1, keepdim=True)
    ),
    "argmax": lambda x, y: (
        x.argmax(1).float() + x.argmin(1).float() + x.max(1).values + x.min(1).values + x.max(1).indices.float()
    ),
    "all_any": lambda x, y: (x > 0).all(1).float() + (x > 0).any(1).float() + munet.count_nonzero(x > 0, 1).float(),
    "cumsum": lambda x, y: x.cumsum(1) + x.flip(0) + x.roll(1, 1) + x.roll(2) + x.tril() + x.triu(1),
    "softmax": lambda x, y: F.softmax(x, 0) + F.log_softmax(x, 1) + F.normalize(x, dim=1),
    "views": lambda x, y: x.t().reshape(3, 20).unsqueeze(1).expand(3, 2, 20).transpose(0, 2)[1:18:3, :, 0],
    "indexing": lambda x, y: (
        x[:, [0, 2, 2]] + x.gather(1, munet.tensor([[0, 1, 2]] * 5)) + x[2, 1:4] + x[..., None, 1].squeeze(-1)[:, None]
    ),
    "cat": lambda x, y: munet.cat([x, y, x[:, :1]], 1) + 0,
    "stack": lambda x, y: munet.stack([x, y], 0).sum(0),
    "pad": lambda x, y: F.pad(x, (1, 2, 0, 1), value=0.5),
    "topk": lambda x, y: x.topk(2, dim=1).values + x.sort(1, descending=True).values[:, :2],
    "unfold": lambda x, y: x.unfold(1, 4, 2).sum(-1) + x.diagonal().sum(),
    "factories": lambda x, y: (
        x + munet.arange(12).float() + munet.ones(5, 12) * munet.eye(5, 12) + munet.linspace(0, 1, 12)
    ),
    "one_hot": lambda x, y: F.one_hot((x.abs() * 3).long().clamp(0, 4), 5).float().sum(-1),
    "scatter": lambda x, y: (
        munet.zeros(5, 12).scatter(1, munet.tensor([[0, 3]] * 5), x[:, :2])
        + munet.zeros(5, 12).scatter_add(1, munet.tensor([[1, 1]] * 5), y[:, :2])
    ),
    "inplace": lambda x, y: _inplace(x, y),
}


def _inplace(x, y):
    z = x.clone()
    z[:, 1:3] = y[:, :2]
    z[0] += 1
    z.mul_(2)
    return z


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_op_families(name):
    fn = ELEMENTWISE[name]
    x, y = munet.randn(5, 12), munet.randn(5, 12)
    if name == "views":
        x = munet.randn(20, 3)
    export_and_compare(fn, x, y)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_exports_as_its_decomposition(right):
    """A composite without a gradient rule: it exports as its binary search's gathers, comparisons
    and selections (NaN sorting last, as ``sort`` orders it)."""
    seq = munet.tensor(np.array([[1.0, 2.0, 2.0, np.nan], [0.0, 3.0, 4.0, 9.0]], np.float32))
    values = munet.tensor(np.array([[2.0, np.nan, 0.5], [4.0, -1.0, 10.0]], np.float32))
    model = export_and_compare(lambda s, v: munet.searchsorted(s, v, right=right), seq, values)
    assert {"GatherElements", "Where"} <= op_types(model)


def test_random_ops_refuse_to_export():
    with pytest.raises(ExportError, match="op 'bernoulli' draws random numbers"):
        munet.onnx.export(lambda x: F.dropout(x, 0.5, training=True), (munet.randn(3, 4),), None)


def test_every_traceable_op_exports_or_is_refused_by_name():
    from munet.ops._registry import OPS

    # a composite without its own gradient rule is traced as its decomposition's ops, never as a
    # node of its own, so it exports through them (and needs no rule)
    decomposed = {name for name, op in OPS.items() if op.decomposition is not None and op.backward is None}
    assert set(OPS) == set(RULES) | set(NOT_EXPORTED) | CREATION | decomposed
    assert not set(RULES) & set(NOT_EXPORTED)
    assert not decomposed & (set(RULES) | set(NOT_EXPORTED))


def test_writes_paths_and_files(tmp_path):
    model = nn.Linear(3, 2)
    x = munet.randn(4, 3)
    munet.onnx.export(model, (x,), tmp_path / "m.onnx")
    buffer = io.BytesIO()
    munet.onnx.export(model, x, buffer)
    for loaded in (onnx.load(tmp_path / "m.onnx"), onnx.load_from_string(buffer.getvalue())):
        onnx.checker.check_model(loaded, full_check=True)
        with munet.no_grad():
            expected = model(x)
        assert_matches([expected], run_ort(loaded, {"input_0": x.numpy()}))


def test_bad_arguments():
    with pytest.raises(ValueError, match="opset_version must be between 13"):
        munet.onnx.export(nn.Linear(2, 2), (munet.randn(1, 2),), None, opset_version=12)
    with pytest.raises(ValueError, match="dynamic_axes names 'z'"):
        munet.onnx.export(nn.Linear(2, 2), (munet.randn(1, 2),), None, dynamic_axes={"z": [0]})
    with pytest.raises(ValueError, match="2 input_names given for 1 inputs"):
        munet.onnx.export(nn.Linear(2, 2), (munet.randn(1, 2),), None, input_names=["a", "b"])

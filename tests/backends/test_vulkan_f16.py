"""float16 on the vulkan backend (``shader-f16``): munet on vulkan against PyTorch float16 on CPU.

Buffers hold ``f16``; kernels load f32, compute in f32 and round to f16 once when they store,
which is also how PyTorch's CPU float16 kernels compute, so the CPU suite's float16 tolerances
apply: rtol = atol = 1e-2 (``tests.reference.TOL``) unless a case states its own. Each kernel
family is represented by a few ops, forward and gradient. A ``DeviceError`` here is a failure,
not a skip (``tests.reference.check`` skips on it for the parity suite). On an adapter without
``shader-f16`` the float16 tests skip with that reason; the error tests run everywhere.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from munet._device import get_backend
from munet.backends.vulkan.wgsl import half_storage
from tests import reference

F16 = "float16"


@pytest.fixture
def vulkan16(vulkan):
    """The device under test when its adapter has ``shader-f16``; a skip (with the reason) on one without."""
    if not get_backend(vulkan).runtime.has_f16:
        pytest.skip(f"{vulkan} lacks shader-f16: float16 raises DeviceError there (tested below)")
    return vulkan


def check16(munet_fn, torch_fn, *inputs, vulkan, **tolerances):
    try:
        return reference.check(munet_fn, torch_fn, *inputs, device=vulkan, **tolerances)
    except pytest.skip.Exception as exc:
        pytest.fail(f"float16 on vulkan skipped: {exc}")


def randn(*shape, seed=0):
    return reference.randn(*shape, dtype=F16, seed=seed)


def uniform(low, high, *shape, seed=0):
    return reference.rng(seed).uniform(low, high, shape).astype(np.float16)


# the source rewrite (no device needed) ---------------------------------------------------------------

_SOURCE = """@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read> IN0: array<f32>;
@group(0) @binding(3) var<storage, read> IN1: array<i32>;
fn main() {
  let v = IN0[IN1[P[1]]] * 2.0;
  OUT[u32(IN1[0])] = v + IN0[0];
  OUT[1] += OUT[2];
  if (OUT[3] == 0.0) { OUT[3] = 1.0; }
}"""


def test_half_storage_rewrites_loads_and_stores_of_float16_bindings():
    out = half_storage(_SOURCE, (1, 2))
    assert out.startswith("enable f16;")
    assert "var<storage, read_write> OUT: array<f16>;" in out and "IN0: array<f16>;" in out
    assert "IN1: array<i32>;" in out  # not a float16 binding
    assert "let v = f32(IN0[IN1[P[1]]]) * 2.0;" in out
    assert "OUT[u32(IN1[0])] = store_f16(v + f32(IN0[0]));" in out
    assert "OUT[1] = store_f16(f32(OUT[1]) + (f32(OUT[2])));" in out
    assert "if (f32(OUT[3]) == 0.0) { OUT[3] = store_f16(1.0); }" in out
    assert half_storage(_SOURCE, ()) == _SOURCE
    native = _SOURCE.replace("OUT: array<f32>", "OUT: array<f16>")
    assert half_storage(native, (1,)) == "enable f16;\n" + native  # written for f16: left alone


def test_half_storage_refuses_float16_buffers_bound_as_other_types():
    with pytest.raises(RuntimeError, match="binding 3 as array<i32>"):
        half_storage(_SOURCE, (3,))
    atomic = _SOURCE.replace("OUT: array<f32>", "OUT: array<atomic<u32>>")
    with pytest.raises(RuntimeError, match="array<atomic<u32>>"):
        half_storage(atomic, (1,))


# storage, transfers, casts, views ------------------------------------------------------------------


def test_round_trip_is_exact_including_odd_offsets(vulkan16):
    x = randn(7, 5)  # 35 elements: the buffer is padded to whole 4-byte words
    t = munet.tensor(x).to(vulkan16)
    assert t.dtype is munet.float16 and t.device.type == "vulkan"
    np.testing.assert_array_equal(t.cpu().numpy(), x)
    np.testing.assert_array_equal(t[1:, 1::2].cpu().numpy(), x[1:, 1::2])  # strided, odd offset
    np.testing.assert_array_equal(t.view(-1)[3:6].cpu().numpy(), x.reshape(-1)[3:6])  # contiguous, odd offset
    assert t.view(-1)[3].item() == float(x.reshape(-1)[3])
    assert t.view(-1)[4].item() == float(x.reshape(-1)[4])


def test_casts_round_to_nearest_even_with_overflow_and_subnormals(vulkan16):
    values = [1.0, 65504.0, 65519.0, 65520.0, 1e6, -1e6, np.inf, -np.inf, 1e-5, 6e-8, 2.9e-8, 1 + 2**-11]
    values += [1 + 3 * 2**-11, -0.0, 0.1, -2.5]
    x = np.array(values, np.float32)
    half = munet.tensor(x).to(vulkan16).half()
    assert half.dtype is munet.float16
    np.testing.assert_array_equal(half.cpu().numpy(), torch.from_numpy(x).half().numpy())
    assert np.signbit(half.cpu().numpy()[13])
    nan = munet.tensor(np.array([np.nan], np.float32)).to(vulkan16).half()
    assert np.isnan(nan.cpu().numpy()).all()


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "bool"])
def test_casts_to_and_from_every_dtype(vulkan16, dtype):
    x = uniform(-40, 40, 6, 5)
    x[0, :3] = [0.0, -0.0, 0.5]
    m = munet.tensor(x).to(vulkan16)
    target = getattr(munet, dtype)
    out = m.to(target)
    expected = torch.from_numpy(x).to(getattr(torch, dtype))
    assert out.dtype is target
    np.testing.assert_array_equal(out.cpu().numpy(), expected.numpy())
    back = out.to(munet.float16)
    np.testing.assert_array_equal(back.cpu().numpy(), expected.to(torch.float16).numpy())


def test_copy_into_strided_float16_view(vulkan16):
    base = munet.zeros(6, 8, dtype=munet.float16, device=vulkan16)
    src = np.arange(12, dtype=np.float32).reshape(3, 4) / 3
    base[1::2, 1::2].copy_(munet.tensor(src).to(vulkan16))  # float32 into a strided float16 view
    expected = np.zeros((6, 8), np.float16)
    expected[1::2, 1::2] = src
    np.testing.assert_array_equal(base.cpu().numpy(), expected)


def test_in_place_ops_on_float16_views_match_cpu(vulkan16):
    x = randn(6, 8)
    results = []
    for device in ("cpu", vulkan16):
        t = munet.tensor(x).to(device)
        t[1:, ::2].add_(1.5)
        t.mul_(2)
        t[0].copy_(munet.arange(8, dtype=munet.float32).to(device))
        t[2, 3] = 7.25
        results.append(t.cpu().numpy())
    np.testing.assert_array_equal(results[1], results[0])


def test_creation_ops(vulkan16):
    np.testing.assert_array_equal(munet.full((3, 3), 0.1, dtype=munet.float16, device=vulkan16).cpu().numpy(),
                                  np.full((3, 3), 0.1, np.float16))  # fmt: skip
    ar = munet.arange(0, 5, 0.5, dtype=munet.float16, device=vulkan16)
    np.testing.assert_array_equal(ar.cpu().numpy(), torch.arange(0, 5, 0.5, dtype=torch.float16).numpy())
    ls = munet.linspace(-1, 1, 7, dtype=munet.float16, device=vulkan16)  # computed in f32, rounded once:
    expected = torch.linspace(-1, 1, 7, dtype=torch.float16).numpy()  # within one float16 ulp of PyTorch's
    np.testing.assert_allclose(ls.cpu().numpy(), expected, rtol=1e-3, atol=0)


# elementwise -----------------------------------------------------------------------------------------

UNARY = {
    "exp": (munet.exp, torch.exp, (-4, 4)),
    "log": (munet.log, torch.log, (0.1, 8)),
    "sqrt": (munet.sqrt, torch.sqrt, (0.1, 8)),
    "tanh": (munet.tanh, torch.tanh, (-4, 4)),
    "sigmoid": (munet.sigmoid, torch.sigmoid, (-6, 6)),
    "sin": (munet.sin, torch.sin, (-3, 3)),
    "gelu": (F.gelu, TF.gelu, (-4, 4)),
    "silu": (F.silu, TF.silu, (-4, 4)),
    "softplus": (F.softplus, TF.softplus, (-4, 4)),
    "erf": (munet.erf, torch.erf, (-3, 3)),
    "relu": (munet.relu, torch.relu, (-3, 3)),
    "reciprocal": (munet.reciprocal, torch.reciprocal, (0.5, 4)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(vulkan16, name):
    m_fn, t_fn, (low, high) = UNARY[name]
    check16(m_fn, t_fn, uniform(low, high, 5, 9).T, vulkan=vulkan16)  # transposed: strided input


BINARY = {
    "add": (munet.add, torch.add),
    "mul": (munet.mul, torch.mul),
    "div": (munet.div, torch.div),
    "maximum": (munet.maximum, torch.maximum),
    "pow": (lambda a, b: munet.abs(a) ** b, lambda a, b: torch.abs(a) ** b),
    "atan2": (munet.atan2, torch.atan2),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting(vulkan16, name):
    m_fn, t_fn = BINARY[name]
    check16(m_fn, t_fn, uniform(0.5, 2, 3, 1, 5), uniform(-2, 2, 4, 1, seed=1), vulkan=vulkan16)


def test_scalars_comparisons_and_ternary(vulkan16):
    a, b = randn(4, 6), randn(4, 6, seed=1)
    check16(lambda x: x * 0.5 + 3, lambda x: x * 0.5 + 3, a, vulkan=vulkan16)
    check16(lambda x, y: x < y, lambda x, y: x < y, a, b, vulkan=vulkan16, grad=False)
    check16(lambda x, y: munet.where(x > 0, x, y), lambda x, y: torch.where(x > 0, x, y), a, b, vulkan=vulkan16)
    check16(lambda x: x.clamp(-0.5, 0.5), lambda x: x.clamp(-0.5, 0.5), a, vulkan=vulkan16)
    check16(lambda x, y: munet.lerp(x, y, 0.3), lambda x, y: torch.lerp(x, y, 0.3), a, b, vulkan=vulkan16)


def test_mixed_float16_float32_promotes(vulkan16):
    check16(lambda x, y: x + y, lambda x, y: x + y, randn(3, 4), reference.randn(3, 4, seed=2), vulkan=vulkan16)


# reductions, scans, rows ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["sum", "mean", "amax", "prod", "var", "std", "logsumexp", "norm"],
)
def test_reductions(vulkan16, name):
    x = uniform(0.5, 1.5, 6, 70) if name == "prod" else randn(6, 70)
    if name in ("sum", "mean", "amax", "var", "std", "logsumexp"):
        m_fn = lambda t: getattr(munet, name)(t, 1)  # noqa: E731
        t_fn = lambda t: getattr(torch, name)(t, 1)  # noqa: E731
    elif name == "prod":
        m_fn, t_fn = (lambda t: munet.prod(t[:, :8], 1)), (lambda t: torch.prod(t[:, :8], 1))
    else:
        m_fn, t_fn = (lambda t: munet.norm(t, dim=1)), (lambda t: torch.norm(t, dim=1))
    check16(m_fn, t_fn, x, vulkan=vulkan16)


def test_long_sum_two_passes_in_float32(vulkan16):
    x = np.full(100_000, 0.01, np.float16)  # chunked: float32 partials, then one rounding (a float16
    total = munet.tensor(x).to(vulkan16).sum()  # running sum would stall at 32)
    assert total.dtype is munet.float16
    assert total.item() == float(torch.from_numpy(x).sum())


def test_arg_and_index_reductions(vulkan16):
    x = randn(5, 33)
    check16(lambda t: t.argmax(1), lambda t: t.argmax(1), x, vulkan=vulkan16, grad=False)
    check16(lambda t: t.max(1), lambda t: t.max(1), x, vulkan=vulkan16)
    check16(lambda t: munet.median(t, 1), lambda t: torch.median(t, 1), x, vulkan=vulkan16)


def test_scans(vulkan16):
    x = uniform(0.5, 1.5, 4, 40)
    check16(lambda t: munet.cumsum(t, 1), lambda t: torch.cumsum(t, 1), x, vulkan=vulkan16)
    check16(lambda t: munet.cumprod(t[:, :10], 1), lambda t: torch.cumprod(t[:, :10], 1), x, vulkan=vulkan16)
    with_zeros = np.array([[1.5, 0, 2, 0.5, 0, 3]], np.float16)  # cumprod_backward's exact-zero path
    check16(lambda t: munet.cumprod(t, 1), lambda t: torch.cumprod(t, 1), with_zeros, vulkan=vulkan16)
    check16(lambda t: munet.cummax(t, 1), lambda t: torch.cummax(t, 1), x, vulkan=vulkan16)


def test_long_rows_take_the_multi_pass_kernels(vulkan16):
    x = uniform(-2, 2, 2, 70_000)  # rows beyond 65536: chunked row kernels and three-pass scans
    check16(lambda t: F.softmax(t, -1), lambda t: TF.softmax(t, -1), x, vulkan=vulkan16)
    check16(lambda t: t.std(-1), lambda t: t.std(-1), x, vulkan=vulkan16)
    small = uniform(0, 1e-3, 1, 70_000)
    check16(lambda t: munet.cumsum(t, -1), lambda t: torch.cumsum(t, -1), small, vulkan=vulkan16)


def test_softmax_family_and_norms(vulkan16):
    x = randn(6, 40) * np.float16(3)
    check16(lambda t: F.softmax(t, -1), lambda t: TF.softmax(t, -1), x, vulkan=vulkan16)
    check16(lambda t: F.log_softmax(t, 0), lambda t: TF.log_softmax(t, 0), x, vulkan=vulkan16)
    w, b = randn(40, seed=1), randn(40, seed=2)
    check16(lambda t, w, b: F.layer_norm(t, (40,), w, b), lambda t, w, b: TF.layer_norm(t, (40,), w, b),
            x, w, b, vulkan=vulkan16)  # fmt: skip
    img = randn(4, 6, 5, 5)
    g, h = randn(6, seed=3), randn(6, seed=4)
    check16(lambda t, g, h: F.group_norm(t, 3, g, h), lambda t, g, h: TF.group_norm(t, 3, g, h),
            img, g, h, vulkan=vulkan16)  # fmt: skip
    check16(lambda t, g, h: F.batch_norm(t, None, None, g, h, training=True),
            lambda t, g, h: TF.batch_norm(t, None, None, g, h, training=True), img, g, h, vulkan=vulkan16)  # fmt: skip
    q, k, v = randn(2, 3, 4, 8), randn(2, 3, 4, 8, seed=1), randn(2, 3, 4, 8, seed=2)
    check16(F.scaled_dot_product_attention, TF.scaled_dot_product_attention, q, k, v, vulkan=vulkan16)


def test_losses(vulkan16):
    logits, target = randn(8, 10), np.arange(8) % 10
    check16(F.cross_entropy, TF.cross_entropy, logits, target, vulkan=vulkan16)
    check16(F.mse_loss, TF.mse_loss, randn(5, 4), randn(5, 4, seed=1), vulkan=vulkan16)


# matmul, convolution, pooling -----------------------------------------------------------------------


@pytest.fixture(params=["tiled", "blocked"])
def variant(request, vulkan16, monkeypatch):
    """Run matmul/convolution with each kernel: tiled (GPUs) and register-blocked (CPU drivers)."""
    monkeypatch.setattr(get_backend(vulkan16).runtime, "cpu_driver", request.param == "blocked")
    return request.param


def test_matmul_and_linear(vulkan16, variant):
    check16(munet.matmul, torch.matmul, randn(2, 17, 33), randn(33, 9, seed=1), vulkan=vulkan16)
    check16(lambda a, b: a @ b.T, lambda a, b: a @ b.T, randn(20, 12), randn(7, 12, seed=1), vulkan=vulkan16)
    check16(F.linear, TF.linear, randn(5, 16), randn(8, 16, seed=1), randn(8, seed=2), vulkan=vulkan16)


def test_matmul_accumulates_in_float32(vulkan16):
    k = 4096
    a, b = np.full((2, k), 0.01, np.float16), np.ones((k, 3), np.float16)
    out = (munet.tensor(a).to(vulkan16) @ munet.tensor(b).to(vulkan16)).cpu().numpy()
    expected = (torch.from_numpy(a) @ torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(out.astype(np.float32), expected.astype(np.float32), rtol=1e-2)


def test_convolution(vulkan16, variant):
    x, w, b = randn(2, 4, 9, 9), randn(6, 4, 3, 3, seed=1), randn(6, seed=2)
    check16(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
            lambda x, w, b: TF.conv2d(x, w, b, stride=2, padding=1), x, w, b, vulkan=vulkan16)  # fmt: skip
    wt = randn(4, 3, 3, 3, seed=3)
    check16(lambda x, w: F.conv_transpose2d(x, w, stride=2), lambda x, w: TF.conv_transpose2d(x, w, stride=2),
            x, wt, vulkan=vulkan16)  # fmt: skip
    x1, w1 = randn(2, 3, 20), randn(5, 3, 4, seed=4)
    check16(F.conv1d, TF.conv1d, x1, w1, vulkan=vulkan16)


def test_pooling_and_interpolation(vulkan16):
    x = randn(2, 3, 8, 8)
    check16(lambda t: F.max_pool2d(t, 2, return_indices=True), lambda t: TF.max_pool2d(t, 2, return_indices=True),
            x, vulkan=vulkan16)  # fmt: skip
    check16(lambda t: F.adaptive_max_pool2d(t, 3), lambda t: TF.adaptive_max_pool2d(t, 3), x, vulkan=vulkan16)
    check16(lambda t: F.avg_pool2d(t, 3, 2, 1), lambda t: TF.avg_pool2d(t, 3, 2, 1), x, vulkan=vulkan16)
    check16(lambda t: F.adaptive_avg_pool2d(t, 3), lambda t: TF.adaptive_avg_pool2d(t, 3), x, vulkan=vulkan16)
    check16(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear", align_corners=False),
            lambda t: TF.interpolate(t, scale_factor=2, mode="bilinear", align_corners=False),
            x, vulkan=vulkan16)  # fmt: skip
    grid = uniform(-1.1, 1.1, 2, 5, 4, 2, seed=1)
    check16(lambda t, g: F.grid_sample(t, g, align_corners=False), lambda t, g: TF.grid_sample(t, g, align_corners=False),
            x, grid, vulkan=vulkan16)  # fmt: skip


# indexing, sorting, movement ---------------------------------------------------------------------------


def test_indexing(vulkan16):
    x = randn(6, 5)
    idx = np.array([4, 0, 4, 2])
    check16(lambda t, i: t[i], lambda t, i: t[i], x, idx, vulkan=vulkan16)  # gradient: index_put accumulate
    gidx = np.array([[0, 1, 1], [4, 0, 2]])
    check16(lambda t, i: munet.gather(t, 1, i), lambda t, i: torch.gather(t, 1, i), x[:2], gidx, vulkan=vulkan16)
    src = randn(2, 3, seed=1)
    check16(lambda t, i, s: t.scatter_add(1, i, s), lambda t, i, s: t.scatter_add(1, i, s),
            x[:2], gidx, src, vulkan=vulkan16)  # fmt: skip
    check16(lambda t, i, s: t.scatter_reduce(1, i, s, "amax"), lambda t, i, s: t.scatter_reduce(1, i, s, "amax"),
            x[:2], gidx, src, vulkan=vulkan16, grad=False)  # fmt: skip
    mask = x > 0
    check16(lambda t, m: t.masked_fill(m, -2.5), lambda t, m: t.masked_fill(m, -2.5), x, mask, vulkan=vulkan16)
    check16(lambda w, i: F.embedding(i, w), lambda w, i: TF.embedding(i, w), x, np.array([[1, 5, 1]]),
            vulkan=vulkan16)  # fmt: skip
    check16(lambda t: t[t > 0.5], lambda t: t[t > 0.5], x, vulkan=vulkan16)  # nonzero


def test_sorting(vulkan16):
    x = randn(3, 50)
    check16(lambda t: munet.sort(t, 1, descending=True), lambda t: torch.sort(t, dim=1, descending=True, stable=True),
            x, vulkan=vulkan16)  # fmt: skip
    check16(lambda t: munet.topk(t, 5, 1), lambda t: torch.topk(t, 5, 1), x, vulkan=vulkan16)
    check16(lambda t: munet.unique(t), lambda t: torch.unique(t), np.array([2, 1, 2, 0.5], np.float16),
            vulkan=vulkan16, grad=False)  # fmt: skip


def test_movement(vulkan16):
    x = randn(3, 4, 5)
    check16(lambda t: munet.cat([t, t * 2], 1), lambda t: torch.cat([t, t * 2], 1), x, vulkan=vulkan16)
    check16(lambda t: t.permute(2, 0, 1).contiguous(), lambda t: t.permute(2, 0, 1).contiguous(), x, vulkan=vulkan16)
    check16(lambda t: F.pad(t, (1, 2)), lambda t: TF.pad(t, (1, 2)), x, vulkan=vulkan16)
    check16(lambda t: munet.flip(t, (0, 2)), lambda t: torch.flip(t, (0, 2)), x, vulkan=vulkan16)
    check16(lambda t: munet.tril(t[0]), lambda t: torch.tril(t[0]), x, vulkan=vulkan16)


# random ------------------------------------------------------------------------------------------------


def test_uniform_and_bernoulli_are_the_cpu_stream(vulkan16):
    draws = []
    for device in ("cpu", vulkan16):
        munet.manual_seed(3)
        u = munet.rand(1000, dtype=munet.float16, device=device)  # the top 11 bits of each word
        v = munet.empty(500, dtype=munet.float16, device=device).uniform_(-1, 1)
        d = F.dropout(munet.ones(1000, dtype=munet.float16, device=device), 0.3)
        draws.append([t.cpu().numpy() for t in (u, v, d)])
    for g, c in zip(*draws):
        np.testing.assert_array_equal(g, c)


def test_random(vulkan16):
    munet.manual_seed(0)
    u = munet.rand(4000, dtype=munet.float16, device=vulkan16)
    n = munet.randn(4000, dtype=munet.float16, device=vulkan16)
    assert u.dtype is munet.float16 and n.dtype is munet.float16
    u, n = u.cpu().numpy().astype(np.float32), n.cpu().numpy().astype(np.float32)
    assert 0.0 <= u.min() and u.max() <= 1.0 and abs(u.mean() - 0.5) < 0.03
    assert abs(n.mean()) < 0.06 and abs(n.std() - 1.0) < 0.06
    x = munet.ones(2000, dtype=munet.float16, device=vulkan16)
    kept = F.dropout(x, 0.25, training=True).cpu().numpy()
    assert set(np.unique(kept).tolist()) <= {0.0, float(np.float16(1 / 0.75))}
    assert abs((kept == 0).mean() - 0.25) < 0.04


# mixed precision --------------------------------------------------------------------------------------


def _mlp_step(device, autocast_device):
    munet.manual_seed(0)
    model = munet.nn.Sequential(munet.nn.Linear(12, 32), munet.nn.GELU(), munet.nn.Linear(32, 5)).to(device)
    opt = munet.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = munet.amp.GradScaler(autocast_device)
    x = munet.tensor(reference.randn(16, 12, seed=5)).to(device)
    y = munet.tensor(np.arange(16) % 5).to(device)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        with munet.amp.autocast(autocast_device, dtype=munet.float16):
            assert munet.matmul(x, x.T).dtype is munet.float16
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses, [p.detach().cpu().numpy() for p in model.parameters()]


def test_autocast_float16_mlp_training_with_grad_scaler_matches_cpu(vulkan16):
    gpu_losses, gpu_params = _mlp_step(vulkan16, "vulkan")
    cpu_losses, cpu_params = _mlp_step("cpu", "cpu")
    assert gpu_losses[-1] < gpu_losses[0]
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-2, atol=1e-2)
    for g, c in zip(gpu_params, cpu_params):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, c, rtol=1e-2, atol=1e-2)


def test_compiled_autocast_step_equals_eager(vulkan16):
    x = munet.tensor(reference.randn(16, 12, seed=5)).to(vulkan16)
    y = munet.tensor(np.arange(16) % 5).to(vulkan16)
    results = []
    for compiled in (False, True):
        munet.manual_seed(0)
        model = munet.nn.Sequential(munet.nn.Linear(12, 32), munet.nn.GELU(), munet.nn.Linear(32, 5)).to(vulkan16)
        opt = munet.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            with munet.amp.autocast("vulkan"):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        fn = munet.compile(step, device=vulkan16) if compiled else step
        losses = [fn(x, y).item() for _ in range(3)]
        results.append((losses, [p.detach().cpu().numpy() for p in model.parameters()]))
    (eager_losses, eager_params), (compiled_losses, compiled_params) = results
    np.testing.assert_allclose(compiled_losses, eager_losses, rtol=1e-3)
    for c, e in zip(compiled_params, eager_params):
        np.testing.assert_allclose(c, e, rtol=1e-3, atol=1e-5)


def test_half_model_training_matches_cpu(vulkan16):
    def train(device):
        munet.manual_seed(0)
        model = munet.nn.Sequential(munet.nn.Linear(12, 16), munet.nn.ReLU(), munet.nn.Linear(16, 3))
        model = model.half().to(device)
        opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = munet.tensor(randn(32, 12, seed=1)).to(device)
        y = munet.tensor(np.arange(32) % 3).to(device)
        losses = []
        for _ in range(4):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().cpu().numpy() for p in model.parameters()]

    gpu_losses, gpu_params = train(vulkan16)
    cpu_losses, cpu_params = train("cpu")
    assert gpu_losses[-1] < gpu_losses[0]
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-2, atol=1e-2)
    for g, c in zip(gpu_params, cpu_params):
        assert g.dtype == np.float16
        np.testing.assert_allclose(g.astype(np.float32), c.astype(np.float32), rtol=1e-2, atol=1e-2)


# what raises ---------------------------------------------------------------------------------------


def test_float16_without_shader_f16_raises(vulkan, monkeypatch):
    runtime = get_backend(vulkan).runtime
    keep = munet.ones(3, device=vulkan)
    assert munet.vulkan.is_f16_supported(vulkan) is runtime.has_f16
    monkeypatch.setattr(runtime, "has_f16", False)
    assert not munet.vulkan.is_f16_supported(vulkan)
    for make in (
        lambda: munet.ones(3, dtype=munet.float16).to(vulkan),
        lambda: munet.zeros(3, dtype=munet.float16, device=vulkan),
        lambda: keep.half(),
    ):
        with pytest.raises(munet.DeviceError, match="shader-f16.*float32"):
            make()


@pytest.mark.parametrize("dtype", ["float64", "bfloat16", "int8", "uint8", "int16"])
def test_unsupported_dtypes_raise_naming_the_dtype(vulkan, dtype):
    cpu = munet.ones(3, dtype=getattr(munet, dtype))
    with pytest.raises(munet.DeviceError, match=f"dtype {dtype} is not supported.*cast with"):
        cpu.to(vulkan)
    on_device = munet.ones(3, device=vulkan)
    with pytest.raises(munet.DeviceError, match=f"dtype {dtype} is not supported"):
        on_device.to(getattr(munet, dtype))

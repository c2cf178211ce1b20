"""Autocast policy, GradScaler (against PyTorch's CPU GradScaler) and float32 master weights."""

import math
import warnings

import numpy as np
import pytest
import torch

import munet
import munet.nn.functional as F
import munet.optim as optim
from munet.amp import GradScaler, MasterWeightOptimizer
from tests.reference import assert_close, randn


@pytest.mark.parametrize("low", [munet.bfloat16, munet.float16])
def test_autocast_policy(low):
    x = munet.randn(4, 3)
    w = munet.randn(3, 5, requires_grad=True)
    img = munet.randn(1, 2, 5, 5)
    k = munet.randn(3, 2, 3, 3)
    with munet.autocast("cpu", dtype=low):
        h = x @ w
        assert h.dtype is low
        assert F.linear(x, w.t()).dtype is low
        assert munet.bmm(x[None], w[None]).dtype is low
        assert F.conv2d(img, k).dtype is low
        # PyTorch's CPU policy keeps these in the input's dtype (its CUDA policy runs them in float32)
        assert F.softmax(h, -1).dtype is low and F.log_softmax(h, -1).dtype is low
        assert h.exp().dtype is low and h.sum().dtype is low
        assert h.prod().dtype is munet.float32  # on PyTorch's CPU float32 list
        assert (h + 1).dtype is low
        assert (h + munet.ones(5)).dtype is munet.float32  # promotion for mixed inputs
        assert (x.double() @ x.double().t()).dtype is munet.float64
        with munet.autocast("cpu", enabled=False):
            assert (x @ w).dtype is munet.float32
    assert (x @ w).dtype is munet.float32
    (h.float().sum()).backward()
    assert w.grad.dtype is munet.float32


def test_autocast_matches_pytorch_dtypes_for_lower_precision_ops():
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = torch.nn.functional.linear(torch.tensor(x), torch.tensor(w))
    with munet.autocast("cpu", dtype=munet.bfloat16):
        m = F.linear(munet.tensor(x), munet.tensor(w))
    assert str(t.dtype) == "torch.bfloat16" and m.dtype is munet.bfloat16
    np.testing.assert_allclose(m.float().numpy(), t.float().numpy(), rtol=2e-2, atol=2e-2)


def test_autocast_dtypes_of_layers_with_bias_and_mixed_operands_match_pytorch():
    """linear and the convolutions cast their bias too; matmul takes a float32/bfloat16 mix."""
    rng = np.random.default_rng(0)
    arrays = {
        "x": (2, 3),
        "w": (4, 3),
        "b": (4,),
        "img": (1, 3, 5, 5),
        "k": (4, 3, 3, 3),
        "kt": (3, 2, 3, 3),
        "bt": (2,),
        "seq": (1, 4, 16),
    }
    arrays = {k: rng.standard_normal(shape).astype(np.float32) for k, shape in arrays.items()}

    def dtypes(lib, functional, nn, t, low):
        torch.manual_seed(0)
        attention = nn.MultiheadAttention(16, 2, batch_first=True)
        with lib.autocast("cpu", dtype=low):
            return [
                str(y.dtype).split(".")[-1]
                for y in (
                    functional.linear(t["x"], t["w"], t["b"]),
                    functional.conv2d(t["img"], t["k"], t["b"]),
                    functional.conv_transpose2d(t["img"], t["kt"], t["bt"]),
                    lib.matmul(t["x"].to(low), t["w"].t()),
                    attention(t["seq"], t["seq"], t["seq"])[0],
                )
            ]

    want = dtypes(torch, torch.nn.functional, torch.nn, {k: torch.tensor(a) for k, a in arrays.items()}, torch.bfloat16)
    got = dtypes(munet, F, munet.nn, {k: munet.tensor(a) for k, a in arrays.items()}, munet.bfloat16)
    assert got == want == ["bfloat16"] * 5


def test_mixed_matmul_operands_raise_outside_autocast():
    with pytest.raises(RuntimeError, match="same dtype"):
        munet.matmul(munet.ones(2, 2).bfloat16(), munet.ones(2, 2))


def test_autocast_caches_weight_casts():
    w = munet.randn(3, 3, requires_grad=True)
    with munet.autocast("cpu"):
        a = munet.ones(1, 3) @ w
        b = munet.ones(1, 3) @ w
    assert a.grad_fn.next_functions[1][0] is b.grad_fn.next_functions[1][0]


def test_autocast_cache_enabled_false_casts_at_each_use():
    w = munet.randn(3, 3, requires_grad=True)
    with munet.autocast("cpu", cache_enabled=False):
        a = munet.ones(1, 3) @ w
        b = munet.ones(1, 3) @ w
    assert a.grad_fn.next_functions[1][0] is not b.grad_fn.next_functions[1][0]
    (a + b).float().sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 3), 2.0))


def cpu_policy_ops(lib):
    """Ops whose precision PyTorch's CPU autocast policy decides (its float32 list, or none)."""
    F = lib.nn.functional
    return {
        "softmax": lambda x: F.softmax(x, -1),
        "log_softmax": lambda x: F.log_softmax(x, -1),
        "layer_norm": lambda x: F.layer_norm(x, (3,)),
        "group_norm": lambda x: F.group_norm(x, 2),
        "batch_norm": lambda x: F.batch_norm(x, None, None, training=True),
        "instance_norm": lambda x: F.instance_norm(x),
        "exp": lambda x: x.exp(),
        "exp2": lambda x: lib.exp2(x),
        "expm1": lambda x: x.expm1(),
        "log": lambda x: x.abs().log(),
        "log2": lambda x: x.abs().log2(),
        "log10": lambda x: x.abs().log10(),
        "log1p": lambda x: x.abs().log1p(),
        "pow": lambda x: x.pow(2),
        "sum": lambda x: x.sum(),
        "nansum": lambda x: x.nansum(),
        "prod": lambda x: x.prod(),
        "cumsum": lambda x: x.cumsum(0),
        "cumprod": lambda x: x.cumprod(0),
        "logsumexp": lambda x: x.logsumexp(-1),
        "erfinv": lambda x: (x * 0.1).erfinv(),
        "reciprocal": lambda x: x.reciprocal(),
        "rsqrt": lambda x: x.abs().rsqrt(),
        "softplus": lambda x: F.softplus(x),
        "acos": lambda x: (x * 0.1).acos(),
        "asin": lambda x: (x * 0.1).asin(),
        "cosh": lambda x: x.cosh(),
        "sinh": lambda x: x.sinh(),
        "tan": lambda x: x.tan(),
        "grid_sample": lambda x: F.grid_sample(x, lib.zeros(2, 3, 3, 2, dtype=x.dtype), align_corners=False),
        "mse_loss": lambda x: F.mse_loss(x, x * 0.5),
        "l1_loss": lambda x: F.l1_loss(x, x * 0.5),
        "cross_entropy": lambda x: F.cross_entropy(x.reshape(8, 9), lib.zeros(8, dtype=lib.int64)),
        "nll_loss": lambda x: F.nll_loss(x.reshape(8, 9), lib.zeros(8, dtype=lib.int64)),
        "bce": lambda x: F.binary_cross_entropy(x.sigmoid(), x.sigmoid() * 0 + 0.5),
        "bce_logits": lambda x: F.binary_cross_entropy_with_logits(x, x * 0 + 0.5),
        "kl_div": lambda x: F.kl_div(x, x.exp(), reduction="batchmean"),
        "huber": lambda x: F.huber_loss(x, x * 0.5),
        "smooth_l1": lambda x: F.smooth_l1_loss(x, x * 0.5),
        "soft_margin": lambda x: F.soft_margin_loss(x, x.sign()),
        "gaussian_nll": lambda x: F.gaussian_nll_loss(x, x * 0.5, x.abs() + 1),
        "poisson_nll": lambda x: F.poisson_nll_loss(x, x.abs()),
        "hinge": lambda x: F.hinge_embedding_loss(x, x.sign()),
        "margin_ranking": lambda x: F.margin_ranking_loss(x, x * 0.5, x.sign()),
        "cosine_embedding": lambda x: F.cosine_embedding_loss(x.reshape(8, 9), x.reshape(8, 9) * 0.5, lib.ones(8)),
        "triplet": lambda x: F.triplet_margin_loss(x.reshape(8, 9), x.reshape(8, 9) * 0.5, x.reshape(8, 9) * 0.2),
        "multi_margin": lambda x: F.multi_margin_loss(x.reshape(8, 9), lib.zeros(8, dtype=lib.int64)),
        "multilabel_soft_margin": lambda x: F.multilabel_soft_margin_loss(
            x.reshape(8, 9), x.reshape(8, 9).sign().clamp(min=0)
        ),
        "gelu": lambda x: F.gelu(x),
        "mean": lambda x: x.mean(),
        "norm": lambda x: x.norm(),
    }


@pytest.mark.parametrize("name", sorted(cpu_policy_ops(torch)))
@pytest.mark.parametrize("dtype,low", [("float32", "bfloat16"), ("bfloat16", "bfloat16"), ("float16", "float16")])
def test_cpu_autocast_precision_matches_torch(name, dtype, low):
    """On cpu, PyTorch runs only its CPU float32 list (losses, prod, grid_sample, ...) in float32:
    softmax, the norms, exp and sum of a bfloat16 tensor stay bfloat16; float32 inputs stay float32."""
    values = randn(2, 4, 3, 3, seed=3)
    results = []
    for lib in (munet, torch):
        x = lib.tensor(values).to(getattr(lib, dtype))
        with lib.autocast("cpu", dtype=getattr(lib, low)):
            results.append(cpu_policy_ops(lib)[name](x))
    assert_close(*results)


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [w.category for w in caught]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_autocast_to_an_unsupported_dtype_warns_and_disables_as_torch(dtype):
    def run(lib):
        x = lib.ones(2, 2)
        with lib.autocast("cpu", dtype=getattr(lib, dtype)):
            return (x @ x).dtype is lib.float32, lib.is_autocast_enabled("cpu")

    assert _warnings_of(lambda: run(munet)) == _warnings_of(lambda: run(torch)) == ((True, False), [UserWarning])


def test_autocast_and_grad_scaler_for_cuda_without_cuda_disable_with_a_warning_as_torch():
    def run(lib):
        x = lib.ones(2, 2)
        states = []
        for make in (lambda: lib.autocast("cuda"), lambda: lib.autocast(device_type="cuda", dtype=lib.bfloat16)):
            with make():
                states.append(
                    ((x @ x).dtype is lib.float32, lib.is_autocast_enabled("cuda"), lib.is_autocast_enabled())
                )
        scaler = lib.amp.GradScaler("cuda")
        loss = lib.tensor(3.0)
        states.append((scaler.is_enabled(), scaler.scale(loss) is loss))
        return states

    assert _warnings_of(lambda: run(munet)) == _warnings_of(lambda: run(torch))
    assert _warnings_of(lambda: run(munet))[0] == [(True, False, False)] * 2 + [(False, True)]
    assert _warnings_of(lambda: GradScaler("cpu"))[1] == []


def test_autocast_state_queries_as_torch():
    def run(lib):
        seen = [lib.is_autocast_enabled(), lib.is_autocast_enabled("cpu"), lib.get_autocast_dtype("cpu")]
        seen.append(lib.get_autocast_dtype("cuda"))
        with lib.autocast(device_type="cpu"):
            seen += [lib.is_autocast_enabled("cpu"), lib.is_autocast_enabled(), lib.get_autocast_dtype("cpu")]
            with lib.autocast("cpu", dtype=lib.float16, enabled=False):
                seen += [lib.is_autocast_enabled("cpu"), lib.get_autocast_dtype("cpu")]
            seen += [lib.is_autocast_enabled("cpu"), lib.get_autocast_dtype("cpu")]
            with lib.autocast("cpu", dtype=lib.float16):
                seen += [(lib.ones(2, 2) @ lib.ones(2, 2)).dtype]
        seen += [lib.is_autocast_enabled("cpu"), lib.get_autocast_dtype("cpu")]
        return [str(v).split(".")[-1] for v in seen]

    assert run(munet) == run(torch)


def test_autocast_device_type_errors():
    for lib in (munet, torch):
        with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
            lib.autocast(1)
        with pytest.raises(TypeError):
            lib.autocast()  # device_type is required, as in PyTorch
    with pytest.raises(RuntimeError, match="unsupported device_type 'meta'"):
        munet.autocast("meta")


def test_autocast_casts_only_ops_on_its_device_type(vulkan):
    a, b = munet.ones(4, 4), munet.ones(4, 4, device=vulkan)
    with munet.autocast("cpu"):
        assert (a @ a).dtype is munet.bfloat16 and (b @ b).dtype is munet.float32
        assert F.linear(b, b).dtype is munet.float32
    with munet.autocast(vulkan.type):
        assert (a @ a).dtype is munet.float32 and (b @ b).dtype is munet.float16
        assert munet.is_autocast_enabled(vulkan.type) and not munet.is_autocast_enabled("cpu")
        with munet.autocast("cpu"):  # blocks of different device types nest independently
            assert (a @ a).dtype is munet.bfloat16 and (b @ b).dtype is munet.float16
        assert (a @ a).dtype is munet.float32


def _scaler_run(lib, grads_per_step, **kwargs):
    p = lib.tensor([1.0, 2.0], requires_grad=True)
    opt = (optim if lib is munet else torch.optim).SGD([p], lr=0.1)
    scaler = GradScaler("cpu", **kwargs) if lib is munet else torch.amp.GradScaler("cpu", **kwargs)
    scales, values = [], []
    for g in grads_per_step:
        opt.zero_grad()
        loss = scaler.scale((p * lib.tensor(g)).sum())
        loss.backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        values.append(p.detach().tolist())
    return scales, values, scaler.state_dict()


def test_grad_scaler_matches_pytorch():
    grads = [[1.0, 1.0], [math.inf, 1.0], [0.5, 2.0], [1.0, math.nan], [1.0, 1.0], [1.0, 1.0], [2.0, 1.0]]
    kwargs = dict(init_scale=1024.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=2)
    ours = _scaler_run(munet, grads, **kwargs)
    theirs = _scaler_run(torch, grads, **kwargs)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    assert ours[2] == {k: (v.item() if hasattr(v, "item") else v) for k, v in theirs[2].items()}


def test_grad_scaler_unscale_for_clipping_and_stage_errors():
    p = munet.tensor([3.0, 4.0], requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    scaler = GradScaler(init_scale=8.0)
    scaler.scale((p * p).sum() / 2).backward()
    scaler.unscale_(opt)
    assert p.grad.tolist() == [3.0, 4.0]
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    assert p.tolist() == [0.0, 0.0]
    restored = GradScaler()
    restored.load_state_dict(scaler.state_dict())
    assert restored.get_scale() == scaler.get_scale()


@pytest.mark.parametrize(
    "key, value, message",
    [("growth_interval", None, "missing key"), ("_growth_tracker", -1, "an int >= 0"), ("backoff_factor", 2.0, "< 1")],
)
def test_grad_scaler_load_state_dict_checks_everything_first(key, value, message):
    state = GradScaler(init_scale=8.0, growth_interval=3).state_dict()
    if value is None:
        del state[key]
    else:
        state[key] = value
    scaler = GradScaler()
    before = scaler.state_dict()
    with pytest.raises(ValueError, match=message):
        scaler.load_state_dict(state)
    assert scaler.state_dict() == before


def test_master_weights_accumulate_small_updates():
    plain = munet.ones(4).to(munet.bfloat16).requires_grad_()
    mastered = munet.ones(4).to(munet.bfloat16).requires_grad_()
    plain_opt = optim.SGD([plain], lr=1e-3)
    master_opt = MasterWeightOptimizer(optim.SGD([mastered], lr=1e-3))
    for _ in range(20):
        for p, opt in ((plain, plain_opt), (mastered, master_opt)):
            opt.zero_grad()
            p.float().sum().backward()
            opt.step()
    assert plain.float().tolist() == [1.0] * 4  # 1 - 1e-3 rounds back to 1 in bfloat16
    assert master_opt.master_params()[0].tolist() == pytest.approx([0.98] * 4, rel=1e-5)
    assert mastered.dtype is munet.bfloat16 and mastered.float()[0].item() == pytest.approx(0.98, abs=4e-3)
    state = master_opt.state_dict()
    other = MasterWeightOptimizer(optim.SGD([munet.zeros(4).to(munet.bfloat16).requires_grad_()], lr=1e-3))
    other.load_state_dict(state)
    assert other.master_params()[0].tolist() == master_opt.master_params()[0].tolist()


def test_losses_run_in_float32_under_autocast():
    logits = munet.randn(4, 5).bfloat16()
    target = munet.tensor([0, 1, 2, 3])
    with munet.autocast("cpu", dtype=munet.bfloat16):
        assert F.cross_entropy(logits, target).dtype is munet.float32
        assert F.mse_loss(logits, logits * 0).dtype is munet.float32
        assert F.layer_norm(logits, (5,)).dtype is munet.bfloat16  # not in PyTorch's CPU float32 list
    assert F.mse_loss(logits, logits * 0).dtype is munet.bfloat16


def _hold_autocast(dtype, entered, leave, x):
    """In this thread: enter autocast(dtype), signal, wait, then report the dtype of ``x @ x``."""
    with munet.autocast("cpu", dtype=dtype):
        entered.set()
        leave.wait(30)
        return (x @ x).dtype


def test_autocast_is_per_thread():
    """Autocast in one thread leaves another thread's float32 matmul float32 (PyTorch: per thread, too)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    x = munet.randn(3, 3)
    entered, leave = threading.Event(), threading.Event()
    with ThreadPoolExecutor(1) as pool:
        inside = pool.submit(_hold_autocast, munet.bfloat16, entered, leave, x)
        assert entered.wait(30)
        try:
            here = (x @ x).dtype, munet.amp.is_autocast_enabled()
        finally:
            leave.set()
        assert inside.result(timeout=30) is munet.bfloat16
    assert here == (munet.float32, False)


def test_two_threads_autocast_to_their_own_dtypes():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    x = munet.randn(3, 3, requires_grad=True)  # a leaf: its casts go through the per-thread cache
    events = [threading.Event() for _ in range(4)]
    with ThreadPoolExecutor(2) as pool:
        half = pool.submit(_hold_autocast, munet.float16, events[0], events[1], x)
        assert events[0].wait(30)
        brain = pool.submit(_hold_autocast, munet.bfloat16, events[2], events[3], x)
        assert events[2].wait(30)
        for e in events:
            e.set()
        assert (half.result(timeout=30), brain.result(timeout=30)) == (munet.float16, munet.bfloat16)


def test_a_new_thread_starts_without_autocast():
    from concurrent.futures import ThreadPoolExecutor

    x = munet.randn(2, 2)
    with munet.autocast("cpu"), ThreadPoolExecutor(1) as pool:
        seen = pool.submit(lambda: (munet.amp.is_autocast_enabled(), (x @ x).dtype)).result(timeout=30)
    assert seen == (False, munet.float32)
    with torch.autocast("cpu"), ThreadPoolExecutor(1) as pool:
        assert pool.submit(lambda: torch.is_autocast_enabled("cpu")).result(timeout=30) is False  # the reference

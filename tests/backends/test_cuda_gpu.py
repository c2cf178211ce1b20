"""The cuda backend on a GPU: transfers, the memory figures, streams and events, DLPack with
PyTorch and CuPy, cuBLAS matmul against a float64 reference (float32, TF32, float16, bfloat16),
and exact-device discipline with two devices. Every test needs a CUDA GPU (marker ``cuda``:
skipped without one, failing under ``MUNET_TEST_CUDA=1``); scripts/gpu_check.sh runs them.
tests/backends/test_cuda_device.py covers what runs without a GPU."""

import numpy as np
import pytest
import torch

import munet
from munet.ops.checks import IndexOutOfRangeError
from tests.backends.cuda_cases import (
    CONV_DTYPE_CASES,
    CONV_EAGER_CASES,
    EAGER_ELEMENTWISE,
    EAGER_INDEXING,
    EAGER_REDUCTIONS,
    EAGER_SCANS,
    EAGER_SORTS,
    check_convolution,
    force_conv_kernel,
    pair,
    same,
    same_within,
)

pytestmark = pytest.mark.cuda

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool"]


def _host(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 8
    return munet.tensor(values).to(getattr(munet, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_is_exact_for_every_dtype_and_view(dtype):
    x = _host((3, 5, 4), dtype)
    y = x.cuda()
    assert y.device == munet.device("cuda", 0) and y.is_cuda and y.dtype is x.dtype
    assert munet.equal(y.cpu(), x)
    views = (lambda t: t.transpose(0, 2), lambda t: t[:, 1:4:2], lambda t: t[1], lambda t: t.expand(2, 3, 5, 4))
    for view in (*views, lambda t: t[:, :0]):
        assert view(y).cpu().shape == view(x).shape and munet.equal(view(y).cpu(), view(x))


def test_factories_casts_and_copies_on_the_device():
    x = munet.arange(12, dtype=munet.float32, device="cuda").reshape(3, 4)
    assert x.device.type == "cuda"
    assert munet.equal(x.cpu(), munet.arange(12, dtype=munet.float32).reshape(3, 4))
    assert munet.equal(
        munet.full((2, 2), 1.5, device="cuda", dtype=munet.bfloat16).cpu(), munet.full((2, 2), 1.5).bfloat16()
    )
    assert munet.equal(x.to(munet.bfloat16).cpu(), x.cpu().to(munet.bfloat16))
    assert munet.equal(x.to(munet.int32).cpu(), x.cpu().to(munet.int32))
    t = x.t().contiguous()
    assert munet.equal(t.cpu(), x.cpu().t())
    z = munet.zeros(3, 4, device="cuda")
    z.copy_(x)
    z[1].fill_(7.0)
    expected = x.cpu().clone()
    expected[1] = 7.0
    assert munet.equal(z.cpu(), expected)
    assert munet.equal(munet.eye(3, device="cuda").cpu(), munet.eye(3))
    assert munet.allclose(munet.linspace(0, 1, 7, device="cuda").cpu(), munet.linspace(0, 1, 7))


def test_memory_figures_follow_allocations():
    munet.cuda.synchronize()
    munet.cuda.empty_cache()
    base = munet.cuda.memory_allocated()
    munet.cuda.reset_peak_memory_stats()
    x = munet.empty(16 << 20, dtype=munet.float32, device="cuda")  # 64 MiB
    assert munet.cuda.memory_allocated() - base >= 64 << 20
    assert munet.cuda.max_memory_allocated() >= munet.cuda.memory_allocated()
    assert munet.cuda.memory_reserved() >= munet.cuda.memory_allocated()
    stats = munet.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == munet.cuda.memory_allocated()
    del x
    assert munet.cuda.memory_allocated() <= base  # other tests' garbage may be collected meanwhile
    assert munet.cuda.max_memory_allocated() >= base + (64 << 20)
    reserved = munet.cuda.memory_reserved()
    munet.cuda.empty_cache()
    assert munet.cuda.memory_reserved() < reserved
    munet.cuda.reset_peak_memory_stats()
    assert munet.cuda.max_memory_allocated() == munet.cuda.memory_allocated()
    free, total = munet.cuda.mem_get_info()
    assert 0 < free <= total


def test_out_of_memory_raises_with_the_devices_figures():
    total = munet.cuda.get_device_properties(0).total_memory
    with pytest.raises(munet.OutOfMemoryError, match=r"cuda:0: out of memory: could not allocate .* MiB free of"):
        munet.empty(total, dtype=munet.float32, device="cuda")  # 4x the device
    assert munet.cuda.memory_stats()["num_ooms"] >= 1
    assert munet.ones(4, device="cuda").cpu().sum().item() == 4.0  # the device still works


def test_device_queries():
    props = munet.cuda.get_device_properties(0)
    assert munet.cuda.get_device_name(0) == props.name and munet.cuda.get_device_capability(0) == (
        props.major,
        props.minor,
    )
    assert munet.cuda.is_bf16_supported() == (props.major >= 8)
    assert munet.cuda.current_device() == 0
    if torch.cuda.is_available():
        assert props.name == torch.cuda.get_device_name(0)
        assert (props.major, props.minor) == torch.cuda.get_device_capability(0)


def test_streams_events_and_their_order():
    s = munet.cuda.Stream()
    default = munet.cuda.current_stream()
    assert default == munet.cuda.default_stream() and s != default
    a = munet.tensor(np.random.default_rng(0).standard_normal((2048, 2048)), dtype=munet.float32).cuda()
    with munet.cuda.stream(s):
        assert munet.cuda.current_stream() == s
        start, end = munet.cuda.Event(enable_timing=True), munet.cuda.Event(enable_timing=True)
        start.record()
        b = a @ a
        end.record()
    assert munet.cuda.current_stream() == default
    default.wait_event(end)  # the default stream now orders after the side stream's matmul
    expected = a.cpu().double() @ a.cpu().double()
    assert np.allclose(b.cpu().double().numpy(), expected.numpy(), rtol=1e-3, atol=1e-2)
    assert start.elapsed_time(end) > 0 and end.query() and s.query()
    s.synchronize()
    default.wait_stream(s)
    munet.cuda.synchronize()
    munet.cuda.set_stream(s)
    try:
        assert munet.cuda.current_stream() == s
    finally:
        munet.cuda.set_stream(default)


def test_dlpack_with_cupy_shares_memory_both_ways():
    import cupy

    x = munet.arange(6, dtype=munet.float32, device="cuda").reshape(2, 3)
    c = cupy.from_dlpack(x)
    c[0, 0] = 42.0
    assert x.cpu()[0, 0].item() == 42.0 and x.__dlpack_device__() == (2, 0)
    back = munet.from_dlpack(cupy.arange(12, dtype=cupy.float32).reshape(3, 4).T)
    assert back.device == munet.device("cuda", 0) and back.shape == (4, 3) and back.stride() == (1, 4)
    assert munet.equal(back.cpu(), munet.arange(12, dtype=munet.float32).reshape(3, 4).t())


def test_dlpack_with_torch_cuda():
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    t = torch.arange(6, dtype=torch.float32, device="cuda:0").reshape(2, 3)
    m = munet.from_dlpack(t)
    t.add_(1)
    torch.cuda.synchronize()
    assert m.cpu().tolist() == t.cpu().tolist()
    back = torch.from_dlpack(m)
    assert back.device == torch.device("cuda", 0) and back.data_ptr() == m.data_ptr()


def _reference(a, b):
    return a.cpu().double().numpy() @ b.cpu().double().numpy()


@pytest.mark.parametrize(
    "a_shape,b_shape,layout",
    [
        ((64, 96), (96, 80), "plain"),
        ((3, 33, 17), (17, 9), "plain"),
        ((2, 1, 8, 5), (3, 5, 7), "plain"),
        ((40, 30), (30, 20), "transposed"),
        ((1, 7), (7, 1), "plain"),
        ((5, 0), (0, 3), "plain"),
        ((0, 4), (4, 3), "plain"),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_matmul_matches_a_float64_reference(a_shape, b_shape, layout, dtype):
    """Error bound: k products rounded to the accumulator plus the output rounding, so
    |err| <= (k * eps_acc + eps_out) * sum|a||b|, eps from float64 ground truth."""
    rng = np.random.default_rng(0)
    a = munet.tensor(rng.standard_normal(a_shape)).to(getattr(munet, dtype))
    b = munet.tensor(rng.standard_normal(b_shape)).to(getattr(munet, dtype))
    if layout == "transposed":
        a, b = a.t().contiguous().t(), b.t().contiguous().t()
    flags = munet.backends.cuda.matmul  # reductions in float32 only, for the bound below
    flags.allow_fp16_reduced_precision_reduction = flags.allow_bf16_reduced_precision_reduction = False
    try:
        out = (a.cuda() @ b.cuda()).cpu()
    finally:
        flags.allow_fp16_reduced_precision_reduction = flags.allow_bf16_reduced_precision_reduction = True
    assert out.dtype is a.dtype and out.shape == munet.matmul(a, b).shape
    k = a_shape[-1]
    eps_acc = {"float64": 2.0**-52}.get(dtype, 2.0**-23)
    eps_out = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype]
    scale = np.abs(a.double().numpy()) @ np.abs(b.double().numpy())
    err = np.abs(out.double().numpy() - _reference(a, b))
    assert (err <= (k * eps_acc + eps_out) * scale + 1e-300).all()


def test_tf32_flag_switches_float32_matmul_to_tensor_cores():
    rng = np.random.default_rng(0)
    a = munet.tensor(rng.standard_normal((512, 1024)), dtype=munet.float32)
    b = munet.tensor(rng.standard_normal((1024, 256)), dtype=munet.float32)
    ref = _reference(a, b)
    scale = np.abs(a.double().numpy()) @ np.abs(b.double().numpy())
    exact = np.abs((a.cuda() @ b.cuda()).cpu().double().numpy() - ref) / scale
    munet.backends.cuda.matmul.allow_tf32 = True
    try:
        tf32 = np.abs((a.cuda() @ b.cuda()).cpu().double().numpy() - ref) / scale
    finally:
        munet.backends.cuda.matmul.allow_tf32 = False
    assert exact.max() <= 1024 * 2.0**-23 and tf32.max() <= 2 * 2.0**-10 + 1024 * 2.0**-23
    if munet.cuda.is_tf32_supported():
        assert tf32.max() > 4 * exact.max()  # TF32 rounds the inputs to 10 mantissa bits


def test_integer_matmul_raises_as_torch():
    x = munet.ones(2, 2, dtype=munet.int64, device="cuda")
    with pytest.raises(munet.DeviceError, match="matmul: cuBLAS has no int64 GEMM on cuda:0"):
        x @ x


def test_an_op_without_a_cuda_kernel_names_itself_and_the_device():
    missing = sorted(set(munet.ops._registry.OPS) - set(munet.backends.cuda.registry.KERNELS))
    if not missing:
        pytest.skip("every op has a cuda kernel")
    # Find a primitive whose eager call reaches the kernel table (not a composite or a view).
    from munet.ops._registry import OPS

    op = next(
        OPS[name]
        for name in missing
        if OPS[name].decomposition is None and OPS[name].view is None and name in munet.backends.cpu.registry.KERNELS
    )
    with pytest.raises(munet.DeviceError, match=rf"{op.name}: no kernel for device 'cuda:0'"):
        munet.ops._registry._kernel(op, munet._device.get_backend(munet.device("cuda", 0)))


def test_set_device_and_the_device_context_choose_where_cuda_means():
    with munet.cuda.device(0):
        assert munet.cuda.current_device() == 0
        assert munet.zeros(1, device="cuda").device == munet.device("cuda", 0)
    m = munet.nn.Linear(3, 2).cuda()
    assert all(p.is_cuda for p in m.parameters())


@pytest.fixture
def two_gpus():
    if munet.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")


def test_every_op_runs_on_its_operands_device_not_the_current_one(two_gpus):
    rng = np.random.default_rng(0)
    host = munet.tensor(rng.standard_normal((64, 64)), dtype=munet.float32)
    x = host.to("cuda:1")
    with munet.cuda.device(0):
        y = x @ x
        z = x.to(munet.bfloat16)
        assert y.device == z.device == munet.device("cuda", 1)
        assert munet.cuda.current_device() == 0
    assert np.allclose(y.cpu().numpy(), (host @ host).numpy(), rtol=1e-4, atol=1e-4)
    munet.cuda.set_device(1)
    try:
        assert munet.zeros(1, device="cuda").device == munet.device("cuda", 1)
        w = munet.ones(3, device="cuda:0")
        assert (w @ w.unsqueeze(1)).device == munet.device("cuda", 0)
    finally:
        munet.cuda.set_device(0)


def test_a_copy_between_devices_is_direct_and_exact(two_gpus):
    for dtype in ("float32", "bfloat16", "int64", "bool"):
        host = _host((33, 17), dtype)
        a = host.to("cuda:0")
        b = a.t().to("cuda:1")
        assert b.device == munet.device("cuda", 1) and munet.equal(b.cpu(), host.t())
        assert munet.equal(b.to("cuda:0").cpu(), host.t())
    with pytest.raises(RuntimeError, match="cuda:0.*cuda:1|cuda:1.*cuda:0"):
        munet.ones(2, device="cuda:0") @ munet.ones(2, device="cuda:1")


@pytest.mark.parametrize("case", EAGER_ELEMENTWISE)
def test_rendered_elementwise_kernels_match_the_cpu(case):
    (x, xc), (y, yc) = pair((4, 6), seed=1), pair((4, 6), seed=2)
    same(EAGER_ELEMENTWISE[case](xc, yc), EAGER_ELEMENTWISE[case](x, y))


@pytest.mark.parametrize("case", EAGER_REDUCTIONS)
def test_rendered_reductions_match_the_cpu(case):
    x, xc = pair((12, 20), seed=7)
    same(EAGER_REDUCTIONS[case](xc), EAGER_REDUCTIONS[case](x), exact="sum" not in case)


def test_rendered_random_kernels_reproduce_the_cpu_streams():
    munet.manual_seed(11)
    cpu = munet.rand(1000), munet.randint(-3, 50, (999,))
    munet.manual_seed(11)
    cuda = munet.rand(1000, device="cuda"), munet.randint(-3, 50, (999,), device="cuda")
    for got, want in zip(cuda, cpu):
        same(got, want)


def test_a_compiled_step_with_fused_kernels_matches_eager_cpu():
    def f(x, y):
        z = munet.tanh(x * 2 + y) - x.sigmoid()
        return munet.softmax(z, dim=1)

    (x, xc), (y, yc) = pair((64, 300), seed=8), pair((300,), seed=9)
    compiled = munet.compile(f)
    got = compiled(xc, yc)
    np.testing.assert_allclose(got.cpu().numpy(), f(x, y).numpy(), rtol=1e-5, atol=1e-6)
    assert compiled.stats()["generated_kernels"] >= 1 and compiled.stats()["fallback"] is None


@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_matches_torch(transposed):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    kwargs = {"stride": 2, "padding": 1, "groups": 2}
    fn, ref = (
        (munet.nn.functional.conv_transpose2d, torch.nn.functional.conv_transpose2d)
        if transposed
        else (munet.nn.functional.conv2d, torch.nn.functional.conv2d)
    )
    xc, wc = munet.tensor(x).cuda().requires_grad_(), munet.tensor(w).cuda().requires_grad_()
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    got, want = fn(xc, wc, **kwargs), ref(xt, wt, **kwargs)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-4)
    got.square().sum().backward()
    want.square().sum().backward()
    np.testing.assert_allclose(xc.grad.cpu().numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(wc.grad.cpu().numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("kernel", ["gemm", "direct"])
@pytest.mark.parametrize("case", CONV_EAGER_CASES)
def test_convolutions_and_gradients_on_both_kernels(case, kernel, monkeypatch):
    force_conv_kernel(monkeypatch, kernel)
    check_convolution(case, "float32")


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", CONV_DTYPE_CASES)
def test_convolutions_of_other_dtypes_on_the_gemm(case, dtype, monkeypatch):
    force_conv_kernel(monkeypatch, "gemm")
    check_convolution(case, dtype, layout="strided")


def test_convolutions_dispatched_unforced():
    check_convolution("conv2d ResNet-like channels", "float32", layout="strided")
    check_convolution("conv2d depthwise, batch 1", "float32")
    check_convolution("conv2d a long weight-gradient reduction", "float32")


@pytest.mark.parametrize("case", {**EAGER_INDEXING, **EAGER_SCANS, **EAGER_SORTS})
def test_scatter_index_put_scans_and_sorts_match_the_cpu(case):
    fn, rtol = {**EAGER_INDEXING, **EAGER_SCANS, **EAGER_SORTS}[case]
    same_within(fn(lambda t: t.cuda()), fn(lambda t: t), rtol)


def test_long_rows_sort_and_scan_as_on_the_cpu():
    x = munet.tensor(np.random.default_rng(6).integers(0, 50, (3, 3000))).float()  # many ties
    for dim in (0, 1):
        same(munet.sort(x.cuda(), dim).indices, munet.sort(x, dim).indices)
        same(munet.sort(x.cuda(), dim, descending=True).indices, munet.sort(x, dim, descending=True).indices)
        same(x.cuda().cumsum(dim), x.cumsum(dim))
    same(munet.topk(x.cuda(), 5, dim=1).indices, munet.topk(x, 5, dim=1).indices)


def test_colliding_writes_on_many_threads_match_the_cpu():
    rng = np.random.default_rng(3)
    index = munet.tensor(rng.integers(0, 7, 200_000))
    values = munet.tensor(rng.standard_normal(200_000))
    x = munet.zeros(7, dtype=munet.float64)
    for _ in range(3):  # the last write wins, whichever thread runs last
        same(munet.scatter(x.cuda(), 0, index.cuda(), values.cuda()), munet.scatter(x, 0, index, values))
        same(munet.index_put(x.cuda(), (index.cuda(),), values.cuda()), munet.index_put(x, (index,), values))
    exact = munet.index_put(x, (index,), values, accumulate=True)
    got = munet.index_put(x.cuda(), (index.cuda(),), values.cuda(), accumulate=True)
    np.testing.assert_allclose(got.cpu().numpy(), exact.numpy(), rtol=1e-9, atol=1e-9)
    counts = munet.zeros(7, dtype=munet.int32).scatter_add(0, index, munet.ones(200_000, dtype=munet.int32))
    same(
        munet.zeros(7, dtype=munet.int32)
        .cuda()
        .scatter_add(0, index.cuda(), munet.ones(200_000, dtype=munet.int32).cuda()),
        counts,
    )
    same(x.cuda().scatter_reduce(0, index.cuda(), values.cuda(), "amax"), x.scatter_reduce(0, index, values, "amax"))


def test_an_out_of_range_scatter_raises_at_the_next_synchronization():
    out = munet.zeros(3, 2).cuda().scatter_add(0, munet.tensor([[0, 3]]).cuda(), munet.ones(1, 2).cuda())
    with pytest.raises(IndexOutOfRangeError, match="scatter: index 3 is out of bounds for dimension 0 with size 3"):
        out.cpu()
    assert munet.zeros(2).cuda().index_put((munet.tensor([1]).cuda(),), munet.ones(1).cuda()).cpu().tolist() == [0, 1]


def test_loss_and_embedding_gradients_match_torch():
    rng = np.random.default_rng(4)
    x, target = rng.standard_normal((16, 5)).astype(np.float32), rng.integers(0, 5, 16)
    weight, ids = rng.standard_normal((9, 4)).astype(np.float32), rng.integers(0, 9, (6, 3))
    xc, wc = munet.tensor(x).cuda().requires_grad_(), munet.tensor(weight).cuda().requires_grad_()
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(weight, requires_grad=True)
    loss = munet.nn.functional.cross_entropy(xc, munet.tensor(target).cuda(), label_smoothing=0.1)
    loss = loss + munet.nn.functional.embedding(munet.tensor(ids).cuda(), wc, padding_idx=2).square().sum()
    ref = torch.nn.functional.cross_entropy(xt, torch.tensor(target), label_smoothing=0.1)
    ref = ref + torch.nn.functional.embedding(torch.tensor(ids), wt, padding_idx=2).square().sum()
    loss.backward()
    ref.backward()
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-5)
    np.testing.assert_allclose(xc.grad.cpu().numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wc.grad.cpu().numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-5)

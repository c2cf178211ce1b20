"""The cuda backend's own code on two fake devices (tests/backends/fake_cupy.py: CuPy's API over
host memory, cuBLAS computed from the raw pointers it is given): views and their pointer
arithmetic, casts and bfloat16, copies, transfers, which device and pool every allocation lands
on, the allocator figures and out-of-memory error, matmul's cuBLAS calls, and peer copies. It runs
without a GPU; what it cannot show (CuPy's and the GPU's own behaviour, stream ordering) is
tests/backends/test_cuda_gpu.py's."""

import numpy as np
import pytest

import munet
from tests.backends import fake_cupy

pytestmark = pytest.mark.usefixtures("fake_gpus")


DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool"]


def _host(shape, dtype, seed=0):
    values = np.random.default_rng(seed).standard_normal(shape) * 8
    return munet.tensor(values).to(getattr(munet, dtype))


def test_discovery_names_the_devices():
    assert munet.cuda.is_available() and munet.cuda.device_count() == 2
    assert munet.cuda.get_device_name(1) == "Fake GPU 1" and munet.cuda.get_device_capability() == (9, 0)
    assert munet.cuda.is_bf16_supported()
    assert [d.split("  ")[0] for d in munet.devices()][-2:] == ["cuda:0", "cuda:1"]
    with pytest.raises(munet.DeviceError, match=r"device 'cuda:2' is not available; this machine has 2 CUDA devices"):
        munet.zeros(1, device="cuda:2")


@pytest.mark.parametrize("dtype", DTYPES)
def test_transfers_and_views_are_exact(dtype):
    x = _host((3, 5, 4), dtype)
    y = x.to("cuda:1")
    assert y.device == munet.device("cuda", 1) and y.is_cuda and y.dtype is x.dtype
    views = (
        lambda t: t,
        lambda t: t.transpose(0, 2),
        lambda t: t[:, 1:4:2],
        lambda t: t[1],
        lambda t: t.expand(2, 3, 5, 4),
        lambda t: t[:, :0],
        lambda t: t[2, 4, 3],
    )
    for view in views:
        assert munet.equal(view(y).cpu(), view(x))
        assert munet.equal(view(y).contiguous().cpu(), view(x))
    assert munet.equal(y.to("cuda:0").cpu(), x)  # a peer copy, named by both devices
    assert munet.equal(y.transpose(0, 2).to("cuda:0").cpu(), x.transpose(0, 2))


def test_every_allocation_lands_on_the_operands_device_and_pool():
    x = _host((64, 32), "float32").to("cuda:1")
    pools = [munet._device.get_backend(munet.device("cuda", i)).runtime.allocator for i in range(2)]
    before = [p.allocations for p in pools]
    with munet.cuda.device(0):
        y = x.t().contiguous()
        z = x.to(munet.bfloat16)
        assert y.device == z.device == munet.device("cuda", 1)
    assert pools[1].allocations > before[1] and pools[0].allocations == before[0]
    assert y._storage.data.device.id == z._storage.data.device.id == 1


def test_casts_fills_and_copies_match_cpu():
    x = _host((4, 6), "float32")
    c = x.cuda()
    for dtype in ("float64", "float16", "bfloat16", "int32", "int64", "bool", "uint8"):
        assert munet.equal(c.to(getattr(munet, dtype)).cpu(), x.to(getattr(munet, dtype))), dtype
        assert munet.equal(c.to(getattr(munet, dtype)).float().cpu(), x.to(getattr(munet, dtype)).float()), dtype
    z = munet.zeros(4, 6, device="cuda", dtype=munet.bfloat16)
    z.copy_(c)
    z[1].fill_(2.5)
    expected = x.bfloat16()
    expected[1] = 2.5
    assert munet.equal(z.cpu(), expected)
    w = c.clone()
    w[:, 1:] = w[:, :-1].clone()  # overlapping views of one storage
    expected = x.clone()
    expected[:, 1:] = expected[:, :-1].clone()
    assert munet.equal(w.cpu(), expected)
    for make in (
        lambda d: munet.arange(2, 11, 3, device=d),
        lambda d: munet.arange(0.5, 2.0, 0.25, device=d),
        lambda d: munet.linspace(-1, 1, 7, device=d),
        lambda d: munet.eye(3, 4, device=d, dtype=munet.bfloat16),
        lambda d: munet.full((2, 3), 7, device=d),
        lambda d: munet.ones(3, device=d, dtype=munet.bool),
    ):
        assert munet.equal(make("cuda").cpu(), make("cpu"))


def test_memory_figures_and_out_of_memory():
    assert munet.cuda.memory_allocated() == 0 and munet.cuda.memory_stats() == {}  # never opened
    x = munet.empty(1 << 20, device="cuda")  # 4 MiB
    allocated = munet.cuda.memory_allocated()
    assert allocated >= 4 << 20 and munet.cuda.max_memory_allocated() >= allocated
    assert munet.cuda.memory_stats()["allocated_bytes.all.current"] == allocated
    del x
    assert munet.cuda.memory_allocated() == allocated - (4 << 20)
    assert munet.cuda.memory_reserved() >= 4 << 20  # the block is cached
    munet.cuda.empty_cache()
    assert munet.cuda.memory_reserved() == munet.cuda.memory_allocated()
    assert munet.cuda.max_memory_allocated() >= 4 << 20
    munet.cuda.reset_peak_memory_stats()
    assert munet.cuda.max_memory_allocated() == munet.cuda.memory_allocated()
    assert munet.cuda.memory_allocated(1) == 0
    with pytest.raises(munet.OutOfMemoryError, match=r"cuda:0: out of memory: could not allocate 128.00 MiB;.*free of"):
        munet.empty(32 << 20, device="cuda")
    assert munet.cuda.memory_stats()["num_ooms"] == 1


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize(
    "a_shape,b_shape,layout",
    [
        ((5, 7), (7, 3), "plain"),
        ((2, 5, 7), (7, 3), "plain"),
        ((2, 1, 5, 7), (3, 7, 4), "plain"),
        ((5, 7), (7, 3), "transposed"),
        ((6, 7), (7, 1), "plain"),
        ((4, 0), (0, 3), "plain"),
        ((0, 4), (4, 3), "plain"),
    ],
)
def test_matmul_through_cublas_gives_cpus_product(a_shape, b_shape, layout, dtype):
    a, b = _host(a_shape, dtype, 1), _host(b_shape, dtype, 2)
    if layout == "transposed":
        a, b = a.t().contiguous().t(), b.t().contiguous().t()
    out = (a.cuda() @ b.cuda()).cpu()
    expected = munet.matmul(a.double(), b.double()).to(a.dtype)  # the fake computes in float64
    assert out.dtype is a.dtype and munet.equal(out, expected)
    assert len(fake_cupy.GEMM_CALLS) == (1 if 0 not in (*a_shape, *b_shape) else 0)


def test_tf32_and_float64_choose_the_compute_type():
    a = _host((4, 4), "float32").cuda()
    a @ a
    munet.backends.cuda.matmul.allow_tf32 = True
    try:
        a @ a
    finally:
        munet.backends.cuda.matmul.allow_tf32 = False
    a.double() @ a.double()
    computes = [call[-1] for call in fake_cupy.GEMM_CALLS]
    assert computes == [
        fake_cupy.CUBLAS_COMPUTE_32F,
        fake_cupy.CUBLAS_COMPUTE_32F_FAST_TF32,
        fake_cupy.CUBLAS_COMPUTE_64F,
    ]


def test_matmul_refuses_integers_and_mixed_devices():
    x = munet.ones(2, 2, dtype=munet.int64, device="cuda")
    with pytest.raises(munet.DeviceError, match="matmul: cuBLAS has no int64 GEMM on cuda:0"):
        x @ x
    with pytest.raises(munet.DeviceError, match="expected all tensors on the same device, got cuda:0 and cuda:1"):
        munet.ones(2, 2, device="cuda:0") @ munet.ones(2, 2, device="cuda:1")


def test_gradients_flow_through_transfers_and_matmul():
    a = _host((3, 4), "float32").requires_grad_()
    b = _host((4, 2), "float32", 1).requires_grad_()
    out = (a.cuda() @ b.to("cuda:1").to("cuda:0")).cpu()
    out.backward(munet.ones(3, 2))
    assert munet.allclose(a.grad, munet.ones(3, 2) @ b.detach().t())
    assert munet.allclose(b.grad, a.detach().t() @ munet.ones(3, 2))


def test_current_device_streams_and_module_cuda():
    munet.cuda.set_device(1)
    try:
        assert munet.cuda.current_device() == 1 and munet.zeros(1, device="cuda").device == munet.device("cuda", 1)
        assert munet.ones(1).cuda().device == munet.device("cuda", 1)
        assert munet.ones(1).cuda(0, non_blocking=True).device == munet.device("cuda", 0)
        with munet.cuda.device(0):
            assert munet.nn.Linear(2, 2).cuda().weight.device == munet.device("cuda", 0)
    finally:
        munet.cuda.set_device(0)
    s = munet.cuda.Stream()
    assert munet.cuda.current_stream() == munet.cuda.default_stream() != s
    with munet.cuda.stream(s):
        assert munet.cuda.current_stream() == s
        event = munet.cuda.Event(enable_timing=True)
        event.record()
    assert munet.cuda.current_stream() == munet.cuda.default_stream()
    assert event.device == munet.device("cuda", 0) and event.query()
    s1 = munet.cuda.Stream(device=1)
    with munet.cuda.stream(s1):
        assert munet.cuda.current_device() == 1 and munet.cuda.current_stream(1) == s1
    assert munet.cuda.current_device() == 0
    munet.cuda.synchronize()

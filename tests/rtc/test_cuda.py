"""munet.rtc.CudaModule and Rtc: NVRTC compiles, exports, architecture choice and every error path run
without a GPU; launches are marked ``cuda`` (scripts run them on a GPU machine, here they skip)."""

import numpy as np
import pytest

import munet
from munet.backends.cuda import nvrtc

pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-bindings) is not installed")

AXPY = r"""
extern "C" __global__ void axpy(const float *x, float *y, float a) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    y[i] += a * x[i];
}
"""

TEMPLATES = r"""
template <typename T>
__global__ void axpy(const T *x, T *y, T a, int n) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i < n) y[i] += a * x[i];
}
"""

SOFTMAX = r"""
extern "C" __global__ void row_softmax(const float *x, float *y, int cols) {
    extern __shared__ float row[];
    const float *in = x + blockIdx.x * cols;
    float *out = y + blockIdx.x * cols;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) row[j] = in[j];
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = row[0];
        for (int j = 1; j < cols; ++j) m = fmaxf(m, row[j]);
        float s = 0.f;
        for (int j = 0; j < cols; ++j) { row[j] = expf(row[j] - m); s += row[j]; }
        for (int j = 0; j < cols; ++j) row[j] /= s;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = row[j];
}
"""

HALF = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void scale_half(__half *y, __half a, __nv_bfloat16 *z, __nv_bfloat16 b) {
    y[threadIdx.x] = __hmul(y[threadIdx.x], a);
    z[threadIdx.x] = __hmul(z[threadIdx.x], b);
}
"""


def test_extern_c_kernels_are_found_by_name_and_templates_through_exports():
    module = munet.rtc.CudaModule(TEMPLATES, exports=["axpy<float>", "axpy<double>"])
    assert module.lowered["axpy<float>"] != module.lowered["axpy<double>"]
    kernel = module.get_kernel("axpy<double>", "const double *x, double *y, double a, int n")
    assert kernel.symbol == module.lowered["axpy<double>"] and ".entry " + kernel.symbol in module.ptx
    assert munet.rtc.CudaModule(AXPY).get_kernel("axpy", "const float *x, float *y, float a").symbol == "axpy"
    assert munet.rtc.CudaModule(TEMPLATES, exports="axpy<float>").exports == ("axpy<float>",)


def test_compiling_leaves_python_s_shared_bytes_alone():
    munet.rtc.CudaModule(AXPY)  # an empty log: NVRTC writes one NUL byte
    assert (b" " * 1)[0] == 32 and b"".join([b" "] * 3) == bytes([32, 32, 32])


def test_a_name_neither_extern_c_nor_exported_fails_at_get_kernel():
    module = munet.rtc.CudaModule(TEMPLATES, exports=["axpy<float>"])
    with pytest.raises(
        ValueError, match=r"no kernel named 'axpy'; declare it extern \"C\" __global__, or add .* exports"
    ):
        module.get_kernel("axpy", "const float *x, float *y, float a, int n")
    with pytest.raises(TypeError, match="unsupported type 'float2'"):
        module.get_kernel("axpy<float>", "const float2 *x")
    with pytest.raises(ValueError, match="expected '\\(const\\) type"):
        module.get_kernel("axpy<float>", "const float x")


def test_compile_errors_raise_with_the_nvrtc_log():
    with pytest.raises(RuntimeError, match=r"CudaModule: NVRTC failed to compile(.|\n)*undefined_name"):
        munet.rtc.CudaModule('extern "C" __global__ void k(float *y) { y[0] = undefined_name; }')
    with pytest.raises(RuntimeError, match="nvrtcAddNameExpression|NVRTC"):
        munet.rtc.CudaModule(TEMPLATES, exports=["no_such_function<int>"])


def test_half_and_bfloat16_headers_compile():
    kernel = munet.rtc.CudaModule(HALF).get_kernel(
        "scale_half", "__half *y, __half a, __nv_bfloat16 *z, __nv_bfloat16 b"
    )
    assert [p.dtype for p in kernel.params] == [munet.float16, munet.float16, munet.bfloat16, munet.bfloat16]


def test_compile_options_choose_a_cubin_when_nvrtc_supports_the_capability():
    supported = nvrtc.supported_archs()
    newest = max(supported)
    assert munet.rtc.compile_options((8, 0)) == ("--gpu-architecture=sm_80",)
    assert munet.rtc.compile_options(90) == ("--gpu-architecture=sm_90",)
    # a capability newer than NVRTC knows: PTX of the newest one it has, which the driver compiles
    assert munet.rtc.compile_options(newest + 5) == (f"--gpu-architecture=compute_{newest}",)
    between = next(a for a in range(min(supported), newest) if a not in supported)
    assert munet.rtc.compile_options(between) == (
        f"--gpu-architecture=compute_{max(a for a in supported if a < between)}",
    )
    with pytest.raises(munet.DeviceError, match="older than any this NVRTC supports"):
        munet.rtc.compile_options(min(supported) - 5)


def test_the_image_per_device_is_a_cubin_for_sm_and_ptx_for_compute():
    module = munet.rtc.CudaModule(AXPY)
    kind, image = module.binary((8, 0))
    assert kind == "cubin" and image[:4] == b"\x7fELF"
    assert module.binary(max(nvrtc.supported_archs()) + 5)[0] == "ptx"
    explicit = munet.rtc.CudaModule(AXPY, options=["--gpu-architecture=sm_86", "-lineinfo"])
    assert explicit.binary((9, 0))[0] == "cubin"  # the user's architecture, whatever the device
    assert munet.rtc.CudaModule(AXPY, options="-arch=compute_80").binary((9, 0))[0] == "ptx"
    assert munet.rtc.CudaModule(AXPY, options=["-arch", "sm_80"]).binary((9, 0))[0] == "cubin"


def test_launch_checks_come_before_the_device_and_say_when_there_is_none():
    kernel = munet.rtc.CudaModule(AXPY).get_kernel("axpy", "const float *x, float *y, float a")
    x = munet.ones(4)
    with pytest.raises(TypeError, match=r"^CudaKernel\(axpy\) expects 3 arguments but got 2$"):
        kernel.launch([x, x], "cuda:0", 1, 4)
    with pytest.raises(TypeError, match=r"CudaKernel\(axpy\): argument 1 \('y'\) .*dtype float32, got int64"):
        kernel.launch([x, munet.ones(4, dtype=munet.int64), 1.0], "cuda:0", 1, 4)
    with pytest.raises(ValueError, match="block must be an int or up to 3 positive ints"):
        kernel.launch([x, x, 1.0], "cuda:0", 1, (0, 1))
    with pytest.raises(munet.DeviceError, match=r"CudaKernel\(axpy\): expected a cuda device, got cpu"):
        kernel.launch([x, x, 1.0], "cpu", 1, 4)


def _has_cuda_device() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.skipif(_has_cuda_device(), reason="this machine has a CUDA device")
def test_without_a_cuda_device_the_launch_says_so():
    kernel = munet.rtc.CudaModule(AXPY).get_kernel("axpy", "const float *x, float *y, float a")
    with pytest.raises(munet.DeviceError, match=r"CudaKernel\(axpy\): no CUDA device/driver was found"):
        kernel.launch([munet.ones(4), munet.ones(4), 1.0], "cuda:0", 1, 4)
    with pytest.raises(munet.DeviceError, match=r"compile_options: no CUDA device/driver was found"):
        munet.rtc.compile_options("cuda:0")


def test_arguments_are_packed_at_their_parameter_s_width():
    from types import SimpleNamespace

    kernel = munet.rtc.CudaModule(HALF).get_kernel(
        "scale_half", "__half *y, __half a, __nv_bfloat16 *z, __nv_bfloat16 b"
    )
    pointer = SimpleNamespace(data=SimpleNamespace(ptr=0xDEADBEEF00))  # a CuPy array's device pointer
    packed = list(kernel._pack([pointer, 1.5, pointer, -2.0]))
    assert [type(v) for v in packed] == [np.uint64, np.uint16, np.uint64, np.uint16]
    assert packed[0] == 0xDEADBEEF00
    assert packed[1] == np.array(1.5, np.float16).view(np.uint16)
    assert packed[3] == np.array(-2.0, munet.bfloat16.np).view(np.uint16)
    many = munet.rtc.CudaModule(
        'extern "C" __global__ void many(signed char a, bool b, long long c, double d, int e) {}'
    ).get_kernel("many", "int8_t a, bool b, int64_t c, double d, int e")
    assert [type(v) for v in many._pack([-3, True, 1 << 40, 0.5, 7])] == [
        np.int8,
        np.bool_,
        np.int64,
        np.float64,
        np.int32,
    ]


def test_legacy_rtc_wraps_the_body_into_a_kernel_over_the_named_arrays():
    x, y = munet.ones(10), munet.zeros(10)
    rtc = munet.rtc.Rtc("scale", [("x", x)], [("y", y)], "y[threadIdx.x] = x[threadIdx.x] * 5.0f;")
    assert 'extern "C" __global__ void scale(const float *x, float *y)' in rtc.source
    assert rtc.kernel.symbol == "scale"
    halves = munet.rtc.Rtc(
        "h", [("a", x.half())], [("b", y.bfloat16())], "b[0] = __float2bfloat16(__half2float(a[0]));"
    )
    assert "#include <cuda_fp16.h>" in halves.source and "#include <cuda_bf16.h>" in halves.source
    with pytest.raises(TypeError, match=r"Rtc\(scale\).push expects 1 inputs but got 2"):
        rtc.push([x, x], [y], (1, 1, 1), (10, 1, 1))
    with pytest.raises(RuntimeError, match="NVRTC failed to compile"):
        munet.rtc.Rtc("bad", [("x", x)], [("y", y)], "y[0] = z;")


# -- on a GPU ------------------------------------------------------------------------------------


def _cuda(array):
    return munet.tensor(array).to("cuda:0")


@pytest.mark.cuda
def test_axpy_on_the_gpu_and_the_version_bump():
    kernel = munet.rtc.CudaModule(AXPY).get_kernel("axpy", "const float *x, float *y, float a")
    x_np, y_np = np.random.randn(256).astype(np.float32), np.random.randn(256).astype(np.float32)
    x, y = _cuda(x_np), _cuda(y_np)
    before = y._version
    kernel.launch([x, y, 3.0], "cuda:0", grid=2, block=128, sync=True)
    np.testing.assert_allclose(y.cpu().numpy(), y_np + 3 * x_np, rtol=1e-6, atol=1e-6)
    assert y._version == before + 1


@pytest.mark.cuda
@pytest.mark.parametrize("dtype, c_type", [(np.float32, "float"), (np.float64, "double")])
def test_template_instances_for_float_and_double(dtype, c_type):
    module = munet.rtc.CudaModule(TEMPLATES, exports=["axpy<float>", "axpy<double>"])
    kernel = module.get_kernel(f"axpy<{c_type}>", f"const {c_type} *x, {c_type} *y, {c_type} a, int n")
    x_np, y_np = np.random.randn(100).astype(dtype), np.random.randn(100).astype(dtype)
    x, y = _cuda(x_np), _cuda(y_np)
    kernel.launch([x, y, -2.0, 100], "cuda:0", grid=(1, 1, 1), block=(128, 1, 1))
    np.testing.assert_allclose(y.cpu().numpy(), y_np - 2 * x_np, rtol=1e-6)


@pytest.mark.cuda
def test_dynamic_shared_memory_with_expf():
    kernel = munet.rtc.CudaModule(SOFTMAX).get_kernel("row_softmax", "const float *x, float *y, int cols")
    x_np = np.random.randn(8, 300).astype(np.float32)
    x, y = _cuda(x_np), munet.zeros(8, 300).to("cuda:0")
    kernel.launch([x, y, 300], "cuda:0", grid=8, block=64, shared_mem=300 * 4)
    e = np.exp(x_np - x_np.max(1, keepdims=True))
    np.testing.assert_allclose(y.cpu().numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.cuda
def test_legacy_rtc_push_on_the_gpu():
    x, y = _cuda(np.arange(10, dtype=np.float32)), munet.zeros(10).to("cuda:0")
    rtc = munet.rtc.Rtc("scale", [("x", x)], [("y", y)], "y[threadIdx.x] = x[threadIdx.x] * 5.0f;")
    rtc.push([x], [y], (1, 1, 1), (10, 1, 1))
    np.testing.assert_array_equal(y.cpu().numpy(), np.arange(10) * 5.0)


@pytest.mark.cuda
def test_a_launch_inside_a_compiled_step():
    kernel = munet.rtc.CudaModule(AXPY).get_kernel("axpy", "const float *x, float *y, float a")

    def step(x, y):
        z = x * 2
        kernel.launch([z, y, 0.5], "cuda:0", grid=1, block=64)
        return y + z

    compiled = munet.compile(step)
    x = _cuda(np.random.randn(64).astype(np.float32))
    y_eager = _cuda(np.random.randn(64).astype(np.float32))
    y_compiled = y_eager.clone()
    for _ in range(2):
        np.testing.assert_allclose(compiled(x, y_compiled).cpu().numpy(), step(x, y_eager).cpu().numpy(), rtol=1e-6)
    np.testing.assert_allclose(y_compiled.cpu().numpy(), y_eager.cpu().numpy(), rtol=1e-6)


SWISH = r"""
extern "C" __global__ void swish_forward(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.0f + expf(-x[i]));
}
extern "C" __global__ void swish_backward(const float *x, const float *dy, float *dx, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 1.0f / (1.0f + expf(-x[i]));
        dx[i] = dy[i] * (s + x[i] * s * (1.0f - s));
    }
}
"""


def _swish_function():
    module = munet.rtc.CudaModule(SWISH)
    forward = module.get_kernel("swish_forward", "const float *x, float *y, int n")
    backward = module.get_kernel("swish_backward", "const float *x, const float *dy, float *dx, int n")

    class Swish(munet.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x = x.contiguous()
            y = munet.empty_like(x)
            forward.launch([x, y, x.numel()], x.device, grid=-(-x.numel() // 128), block=128)
            ctx.save_for_backward(x)
            return y

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            dx = munet.empty_like(x)
            backward.launch([x, dy.contiguous(), dx, x.numel()], x.device, grid=-(-x.numel() // 128), block=128)
            return dx

    return Swish


def test_the_guide_s_cuda_fused_op_compiles():
    swish = _swish_function()
    assert issubclass(swish, munet.autograd.Function)


@pytest.mark.cuda
def test_the_cuda_fused_op_passes_a_numerical_gradient_check():
    import torch

    swish = _swish_function()
    x_np = np.random.randn(4, 50).astype(np.float32)
    weights = np.random.randn(4, 50).astype(np.float32)
    x = _cuda(x_np).requires_grad_()
    (swish.apply(x) * _cuda(weights)).sum().backward()
    eps = 1e-2  # float32 central differences, elementwise (see tests/rtc/test_wgsl.py for the bound)
    hi = swish.apply(_cuda(x_np + eps)).cpu().numpy().astype(np.float64)
    lo = swish.apply(_cuda(x_np - eps)).cpu().numpy().astype(np.float64)
    np.testing.assert_allclose(x.grad.cpu().numpy(), (hi - lo) / (2 * eps) * weights, rtol=1e-3, atol=1e-4)
    x_t = torch.tensor(x_np, dtype=torch.float64, requires_grad=True)
    (torch.nn.functional.silu(x_t) * torch.tensor(weights, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), x_t.grad.numpy(), rtol=1e-5, atol=1e-6)

"""munet.rtc.WGSLModule on vulkan (lavapipe in CI: MUNET_TEST_VULKAN=1): the binding rule, checks,
version bumps, munet.compile, and a fused Function checked against a numerical gradient."""

import numpy as np
import pytest
import torch

import munet

AXPY = """
struct Params { a: f32, n: u32 };
@group(0) @binding(0) var<storage, read> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn axpy(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < params.n) { y[i] = y[i] + params.a * x[i]; }
}

@compute @workgroup_size(64)
fn negate_ints(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < 5u) { ints[gid.x] = -ints[gid.x]; }
}
@group(0) @binding(1) var<storage, read_write> ints: array<i32>;
"""
SIGNATURE = "const float *x, float *y, float a, int n"


def test_axpy_follows_the_binding_rule_and_bumps_versions(vulkan):
    kernel = munet.rtc.WGSLModule(AXPY).get_kernel("axpy", SIGNATURE)
    x, y = munet.randn(1000), munet.randn(1000)
    expected = y.numpy() + np.float32(-1.25) * x.numpy()
    xv, yv = x.to(vulkan), y.to(vulkan)
    versions = xv._version, yv._version
    kernel.launch([xv, yv, -1.25, 1000], vulkan, (16,))
    np.testing.assert_allclose(yv.cpu().numpy(), expected, rtol=1e-6, atol=1e-6)
    assert (xv._version, yv._version) == (versions[0], versions[1] + 1)


def test_an_entry_point_without_scalars_leaves_binding_zero_undeclared(vulkan):
    kernel = munet.rtc.WGSLModule(AXPY).get_kernel("negate_ints", "int *ints")
    t = munet.tensor([1, -2, 3, 0, 7], dtype=munet.int32).to(vulkan)
    kernel.launch([t], vulkan, 1)
    assert t.cpu().tolist() == [-1, 2, -3, 0, -7]


def test_checks_name_the_kernel(vulkan):
    module = munet.rtc.WGSLModule(AXPY)
    kernel = module.get_kernel("axpy", SIGNATURE)
    x = munet.ones(8).to(vulkan)
    with pytest.raises(TypeError, match=r"^WGSLKernel\(axpy\) expects 4 arguments but got 3$"):
        kernel.launch([x, x, 1.0], vulkan, 1)
    with pytest.raises(
        munet.DeviceError,
        match=r"WGSLKernel\(axpy\): argument 1 \('y'\): expected a tensor on vulkan:0, got one on cpu",
    ):
        kernel.launch([x, munet.ones(8), 1.0, 8], vulkan, 1)
    with pytest.raises(ValueError, match=r"argument 0 \('x'\) starts at element 2 of its storage"):
        kernel.launch([x[2:], x[:6], 1.0, 6], vulkan, 1)
    with pytest.raises(ValueError, match=r"workgroups \(16777216, 1, 1\) exceed the device's limit"):
        kernel.launch([x, x.clone(), 1.0, 8], vulkan, 1 << 24)
    with pytest.raises(ValueError, match="workgroups must be an int or up to 3 non-negative ints"):
        kernel.launch([x, x.clone(), 1.0, 8], vulkan, (1, 1, 1, 1))
    with pytest.raises(munet.DeviceError, match=r"WGSLKernel\(axpy\): expected a vulkan device, got cpu"):
        kernel.launch([x, x.clone(), 1.0, 8], "cpu", 1)
    with pytest.raises(ValueError, match="no '@compute' entry point 'fn main"):
        module.get_kernel("main", SIGNATURE)
    with pytest.raises(TypeError, match="WGSL scalars are 32-bit"):
        module.get_kernel("axpy", "const float *x, float *y, double a, int n")
    with pytest.raises(TypeError, match="vulkan tensors hold float32, float16, int32, int64, bool"):
        module.get_kernel("axpy", "const double *x, float *y, float a, int n")
    with pytest.raises(RuntimeError, match=r"munet.rtc.WGSLKernel\(f\): the WGSL source failed to compile"):
        munet.rtc.WGSLModule("@compute @workgroup_size(1) fn f() { let a: f32 = true; }").get_kernel("f", "").launch(
            [], vulkan, 1
        )


def test_a_launch_inside_compile_matches_eager(vulkan):
    kernel = munet.rtc.WGSLModule(AXPY).get_kernel("axpy", SIGNATURE)

    def step(x, y):
        z = x * 2
        kernel.launch([z, y, 0.5, z.numel()], vulkan, 2)
        return y + z

    compiled = munet.compile(step)
    x = munet.randn(100).to(vulkan)
    y_eager = munet.randn(100).to(vulkan)
    y_compiled = y_eager.clone()
    for _ in range(3):
        np.testing.assert_array_equal(compiled(x, y_compiled).cpu().numpy(), step(x, y_eager).cpu().numpy())
        np.testing.assert_array_equal(y_compiled.cpu().numpy(), y_eager.cpu().numpy())
    assert [node.name for node in compiled.graph.nodes].count("rtc_launch") == 1


SWISH = """
struct Params { n: u32 };
@group(0) @binding(0) var<storage, read> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;

@compute @workgroup_size(64)
fn swish_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < params.n) { y[i] = x[i] / (1.0 + exp(-x[i])); }
}

@compute @workgroup_size(64)
fn swish_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < params.n) {
        let s = 1.0 / (1.0 + exp(-x[i]));
        y[i] = dy[i] * (s + x[i] * s * (1.0 - s));
    }
}
"""


def test_a_fused_op_with_forward_and_backward_kernels_passes_a_numerical_gradient_check(vulkan):
    mod = munet.rtc.WGSLModule(SWISH)
    forward = mod.get_kernel("swish_forward", "const float *x, float *y, int n")
    backward = mod.get_kernel("swish_backward", "const float *x, float *dx, const float *dy, int n")

    class Swish(munet.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x = x.contiguous()
            y = munet.empty_like(x)
            forward.launch([x, y, x.numel()], x.device, -(-x.numel() // 64))
            ctx.save_for_backward(x)
            return y

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            dx = munet.empty_like(x)
            backward.launch([x, dx, dy.contiguous(), x.numel()], x.device, -(-x.numel() // 64))
            return dx

    x_np = np.random.randn(5, 30).astype(np.float32)
    weights = np.random.randn(5, 30).astype(np.float32)
    x = munet.tensor(x_np).to(vulkan).requires_grad_()
    y = Swish.apply(x)
    np.testing.assert_allclose(
        y.detach().cpu().numpy(), torch.nn.functional.silu(torch.tensor(x_np)).numpy(), rtol=1e-5, atol=1e-6
    )
    (y * munet.tensor(weights).to(vulkan)).sum().backward()
    # central differences of the kernel's float32 outputs (an element moves only its own output):
    # truncation eps^2 |f'''| / 6 < 1e-5, rounding 2 * 6e-8 * |y| / (2 eps) < 3e-5 per unit weight
    eps = 1e-2
    hi = Swish.apply(munet.tensor(x_np + eps).to(vulkan)).cpu().numpy().astype(np.float64)
    lo = Swish.apply(munet.tensor(x_np - eps).to(vulkan)).cpu().numpy().astype(np.float64)
    numeric = (hi - lo) / (2 * eps) * weights
    np.testing.assert_allclose(x.grad.cpu().numpy(), numeric, rtol=1e-3, atol=1e-4)
    x_t = torch.tensor(x_np, dtype=torch.float64, requires_grad=True)
    (torch.nn.functional.silu(x_t) * torch.tensor(weights, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), x_t.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_saved_program_recompiles_its_kernel_at_load(vulkan, tmp_path):
    kernel = munet.rtc.WGSLModule(AXPY).get_kernel("axpy", SIGNATURE)

    def step(x):
        y = x + 1
        kernel.launch([x * 2, y, 0.5, x.numel()], vulkan, 2)
        return y * 3

    compiled = munet.compile(step)
    x = munet.randn(100).to(vulkan)
    compiled(x)
    munet.save(compiled, tmp_path / "step.munet")
    munet.rtc.launch.forget_kernels()
    program = munet.load(tmp_path / "step.munet", device=vulkan)
    np.testing.assert_array_equal(program(x).cpu().numpy(), step(x).cpu().numpy())


def test_half_and_bool_tensors_bind_as_f16_and_u32(vulkan):
    if not munet._device.get_backend(vulkan).runtime.has_f16:
        pytest.skip("the adapter has no shader-f16")
    source = """
enable f16;
struct Params { s: f32, n: u32 };
@group(0) @binding(0) var<storage, read> params: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f16>;
@group(0) @binding(2) var<storage, read> m: array<u32>;
@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < params.n && m[gid.x] != 0u) { y[gid.x] = y[gid.x] * f16(params.s); }
}
"""
    kernel = munet.rtc.WGSLModule(source).get_kernel("scale", "__half *y, const bool *m, float s, int n")
    y = munet.arange(6, dtype=munet.float16).to(vulkan)
    mask = munet.tensor([True, False, True, False, True, True]).to(vulkan)
    kernel.launch([y, mask, 2.0, 6], vulkan, 1)
    assert y.cpu().tolist() == [0.0, 1.0, 4.0, 3.0, 8.0, 10.0]

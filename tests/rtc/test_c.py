"""munet.rtc.CModule on cpu tensors: launches, checks, version bumps, munet.compile, saving, gradients."""

import numpy as np
import pytest
import torch

import munet
from munet.compiler.codegen import build

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler")

AXPY = """
#include <stdint.h>
void axpy(const float *x, float *y, float a, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
void fill_half(uint16_t *y, uint16_t v, int n) { for (int i = 0; i < n; ++i) y[i] = v; }
void count_true(const unsigned char *m, int32_t *out, int n) {
    out[0] = 0;
    for (int i = 0; i < n; ++i) out[0] += m[i];
}
static void hidden(float *y) { y[0] = 1; }
void use_hidden(float *y) { hidden(y); }
"""


@pytest.fixture(scope="module")
def module():
    return munet.rtc.CModule(AXPY, options=["-DUNUSED=1"])


def test_axpy_matches_numpy_and_bumps_the_written_tensor_only(module):
    axpy = module.get_kernel("axpy", "const float *x, float *y, float a, int64_t n")
    x = munet.randn(1000)
    y = munet.randn(1000)
    expected = y.numpy() + np.float32(2.5) * x.numpy()
    vx, vy = x._version, y._version
    axpy.launch([x, y, 2.5, x.numel()])
    np.testing.assert_array_equal(y.numpy(), expected)
    assert (x._version, y._version) == (vx, vy + 1)


def test_scalar_types_are_packed_as_declared(module):
    fill = module.get_kernel("fill_half", "__half *y, __half v, int n")
    y = munet.zeros(5, dtype=munet.float16)
    fill.launch([y, -1.5, 5])
    np.testing.assert_array_equal(y.numpy(), np.full(5, -1.5, np.float16))
    count = module.get_kernel("count_true", "const bool *m, int32_t *out, int n")
    out = munet.zeros(1, dtype=munet.int32)
    count.launch([munet.tensor([True, False, True, True]), out, 4])
    assert out.item() == 3


def test_launch_checks_follow_the_signature(module):
    axpy = module.get_kernel("axpy", "const float *x, float *y, float a, int64_t n")
    x, y = munet.ones(4), munet.ones(4)
    with pytest.raises(TypeError, match=r"^CKernel\(axpy\) expects 4 arguments but got 2$"):
        axpy.launch([x, y])
    with pytest.raises(TypeError, match=r"CKernel\(axpy\): argument 1 \('y'\) .* dtype float32, got float64"):
        axpy.launch([x, y.double(), 1.0, 4])
    with pytest.raises(ValueError, match=r"CKernel\(axpy\): argument 0 \('x'\): expected a contiguous tensor"):
        axpy.launch([munet.ones(4, 2)[:, 0], y, 1.0, 4])
    np.testing.assert_array_equal(y.numpy(), np.ones(4))  # nothing ran


def test_get_kernel_refuses_missing_functions_and_bad_signatures(module):
    with pytest.raises(ValueError, match=r"CKernel\(hidden\): the module defines no function 'hidden'"):
        module.get_kernel("hidden", "float *y")
    with pytest.raises(TypeError, match="unsupported type 'float4'"):
        module.get_kernel("use_hidden", "float4 *y")


def test_compile_errors_carry_the_compiler_output():
    with pytest.raises(RuntimeError, match=r"munet.rtc.CModule source failed to compile(.|\n)*error"):
        munet.rtc.CModule("void broken(float *y) { y[0] = ; }")
    with pytest.raises(TypeError, match="options must be a string or a sequence of strings"):
        munet.rtc.CModule("void f(void) {}", options=[1])


def test_no_compiler_refuses_clearly(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(RuntimeError, match="CModule: cannot compile the source: no C compiler found"):
        munet.rtc.CModule("void f2(float *y) { y[0] = 2; }")


def test_a_kernel_overwriting_a_saved_tensor_is_caught_by_autograd(module):
    axpy = module.get_kernel("axpy", "const float *x, float *y, float a, int64_t n")
    a = munet.randn(8, requires_grad=True)
    b = a * 2
    c = b.sin()  # saves b
    with munet.no_grad():
        axpy.launch([munet.ones(8), b, 1.0, 8])
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


def _step_with_kernel(axpy):
    def step(x, y):
        z = x * 2
        axpy.launch([z, y, 0.5, z.numel()])
        return y + z

    return step


def test_a_launch_inside_compile_is_one_node_ordered_with_the_ops_around_it(module):
    axpy = module.get_kernel("axpy", "const float *x, float *y, float a, int64_t n")
    step = _step_with_kernel(axpy)
    compiled = munet.compile(step)
    x = munet.randn(64)
    y_eager, y_compiled = munet.randn(64), None
    y_compiled = y_eager.clone()
    for _ in range(3):
        out_eager = step(x, y_eager)
        out_compiled = compiled(x, y_compiled)
        np.testing.assert_array_equal(out_compiled.numpy(), out_eager.numpy())
        np.testing.assert_array_equal(y_compiled.numpy(), y_eager.numpy())
    names = [node.name for node in compiled.graph.nodes]
    assert names.count("rtc_launch") == 1
    launch = next(node for node in compiled.graph.nodes if node.name == "rtc_launch")
    assert (
        launch.attrs["source"] == AXPY and launch.attrs["name"] == "axpy" and launch.attrs["options"] == ("-DUNUSED=1",)
    )


def test_compiled_launches_with_two_written_tensors_and_with_none():
    mod = munet.rtc.CModule("""
#include <stdint.h>
void two(const float *x, float *a, float *b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { a[i] = x[i] + 1; b[i] += x[i]; }
}
void peek(const float *x, int64_t n) { (void)x; (void)n; }
""")
    two = mod.get_kernel("two", "const float *x, float *a, float *b, int64_t n")
    peek = mod.get_kernel("peek", "const float *x, int64_t n")

    def step(x, b):
        a = munet.empty_like(x)
        two.launch([x, a, b, x.numel()])
        peek.launch([a, a.numel()])  # reads only: a node with a token output, kept (effectful)
        return a * b

    compiled = munet.compile(step)
    x, b_compiled, b_eager = munet.randn(8), munet.ones(8), munet.ones(8)
    for _ in range(2):
        np.testing.assert_array_equal(compiled(x, b_compiled).numpy(), step(x, b_eager).numpy())
        np.testing.assert_array_equal(b_compiled.numpy(), b_eager.numpy())
    launches = [node for node in compiled.graph.nodes if node.name == "rtc_launch"]
    assert [[str(v.dtype) for v in node.outputs] for node in launches] == [["munet.float32"] * 2, ["munet.bool"]]


def test_a_saved_program_recompiles_its_kernel_at_load(module, tmp_path):
    axpy = module.get_kernel("axpy", "const float *x, float *y, float a, int64_t n")

    def step(x):
        y = x + 1
        axpy.launch([x * 2, y, 0.5, x.numel()])
        return y * 3

    compiled = munet.compile(step)
    x = munet.randn(16)
    compiled(x)
    munet.save(compiled, tmp_path / "step.munet")
    munet.rtc.launch.forget_kernels()  # the loaded program compiles the kernel again
    program = munet.load(tmp_path / "step.munet", device="cpu")
    np.testing.assert_array_equal(program(x).numpy(), step(x).numpy())


def test_loading_a_program_refuses_clearly_where_no_compiler_is(module, tmp_path, monkeypatch):
    axpy = module.get_kernel("axpy", "const float *x, float *y, float a, int64_t n")

    def step(x):
        y = x + 1
        axpy.launch([x, y, 2.0, x.numel()])
        return y

    compiled = munet.compile(step)
    compiled(munet.randn(4))
    munet.save(compiled, tmp_path / "step.munet")
    munet.rtc.launch.forget_kernels()
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(munet.serialization.CheckpointError, match="rtc_launch.*no C compiler found"):
        munet.load(tmp_path / "step.munet", device="cpu")


SWISH = """
#include <math.h>
#include <stdint.h>
void swish_forward(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0 + exp(-x[i]));
}
void swish_backward(const double *x, const double *dy, double *dx, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        double s = 1.0 / (1.0 + exp(-x[i]));
        dx[i] = dy[i] * (s + x[i] * s * (1.0 - s));
    }
}
"""


def _swish_function():
    mod = munet.rtc.CModule(SWISH)
    forward = mod.get_kernel("swish_forward", "const double *x, double *y, int64_t n")
    backward = mod.get_kernel("swish_backward", "const double *x, const double *dy, double *dx, int64_t n")

    class Swish(munet.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x = x.contiguous()
            y = munet.empty_like(x)
            forward.launch([x, y, x.numel()])
            ctx.save_for_backward(x)
            return y

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            dx = munet.empty_like(x)
            backward.launch([x, dy.contiguous(), dx, x.numel()])
            return dx

    return Swish


def test_a_fused_op_with_forward_and_backward_kernels_passes_a_numerical_gradient_check():
    swish = _swish_function()
    x_np = np.random.randn(3, 7)
    x = munet.tensor(x_np, requires_grad=True)
    y = swish.apply(x)
    ref = torch.nn.functional.silu(torch.tensor(x_np))
    np.testing.assert_allclose(y.detach().numpy(), ref.numpy(), rtol=1e-12, atol=1e-14)
    weights = np.random.randn(3, 7)
    (y * munet.tensor(weights)).sum().backward()
    eps = 1e-6
    numeric = np.zeros_like(x_np)
    for i in np.ndindex(x_np.shape):
        hi, lo = x_np.copy(), x_np.copy()
        hi[i] += eps
        lo[i] -= eps
        f = (swish.apply(munet.tensor(hi)).numpy() * weights).sum() - (
            swish.apply(munet.tensor(lo)).numpy() * weights
        ).sum()
        numeric[i] = f / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)
    x_t = torch.tensor(x_np, requires_grad=True)
    (torch.nn.functional.silu(x_t) * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_a_compiled_training_step_runs_the_forward_and_backward_kernels():
    swish = _swish_function()

    def make():
        munet.manual_seed(1)
        model = munet.nn.Linear(7, 3).double()
        return model, munet.optim.SGD(model.parameters(), lr=0.1)

    def train_step(model, opt, x):
        opt.zero_grad()
        loss = swish.apply(model(x)).sum()
        loss.backward()
        opt.step()
        return loss

    x = munet.randn(5, 7, dtype=munet.float64)
    eager_model, eager_opt = make()
    model, opt = make()
    compiled = munet.compile(train_step)
    for _ in range(3):
        np.testing.assert_allclose(
            compiled(model, opt, x).item(), train_step(eager_model, eager_opt, x).item(), rtol=1e-12
        )
    np.testing.assert_allclose(model.weight.detach().numpy(), eager_model.weight.detach().numpy(), rtol=1e-12)
    assert [node.name for node in compiled.graph.nodes].count("rtc_launch") == 2


def test_a_kernel_updating_parameters_in_a_compiled_step_writes_them_back():
    mod = munet.rtc.CModule("""
#include <stdint.h>
void sgd(float *p, const float *g, float lr, int64_t n) { for (int64_t i = 0; i < n; ++i) p[i] -= lr * g[i]; }
""")
    sgd = mod.get_kernel("sgd", "float *p, const float *g, float lr, int64_t n")

    def make():
        munet.manual_seed(2)
        return munet.nn.Linear(4, 2)

    def train_step(model, x):
        for p in model.parameters():
            p.grad = None
        model(x).square().sum().backward()
        with munet.no_grad():
            for p in model.parameters():
                sgd.launch([p, p.grad, 0.05, p.numel()])

    x = munet.randn(8, 4)
    eager, model = make(), make()
    compiled = munet.compile(train_step)
    for _ in range(3):
        compiled(model, x)
        train_step(eager, x)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-7, err_msg=name)
    assert not np.allclose(model.weight.detach().numpy(), make().weight.detach().numpy())

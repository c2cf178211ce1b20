"""Complex tensors (``munet/ops/complex.py``, the complex dtypes in ``munet/_dtype.py``) against PyTorch.

Forward values and gradients are compared in complex128 with tight tolerances, on random
inputs with broadcasting, Python complex scalars, real operands promoted to complex,
non-contiguous views and size-0/1 dims. Gradients are of a random real loss of the result
(PyTorch's convention: ``dL/dx + i dL/dy``), see ``tests.reference.check_complex``.
"""

import io
import itertools
import pickle

import numpy as np
import pytest
import torch

import munet
from tests.reference import check_complex, crandn, randn

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
          "complex64", "complex128"]  # fmt: skip


def test_dtypes():
    assert munet.cfloat is munet.complex64 and munet.cdouble is munet.complex128
    for name, itemsize, real in (("complex64", 8, munet.float32), ("complex128", 16, munet.float64)):
        d = getattr(munet, name)
        assert d.is_complex and not d.is_floating_point and d.itemsize == itemsize
        assert d.to_real() is real and real.to_complex() is d and repr(d) == f"munet.{name}"
        assert pickle.loads(pickle.dumps(d)) is d
    assert munet.float16.to_complex() is munet.complex64
    assert not hasattr(munet, "complex32") and not hasattr(munet, "chalf")


@pytest.mark.parametrize("a, b", list(itertools.product(DTYPES, ["complex64", "complex128"])))
def test_promote_types_as_torch(a, b):
    if "float16" in a:  # torch gives complex32 (chalf), which MuNet lacks: the next wider one
        assert munet.promote_types(getattr(munet, a), getattr(munet, b)) is getattr(munet, b)
        return
    want = torch.promote_types(getattr(torch, a), getattr(torch, b))
    assert munet.promote_types(getattr(munet, a), getattr(munet, b)).name == str(want).removeprefix("torch.")
    assert munet.promote_types(getattr(munet, b), getattr(munet, a)).name == str(want).removeprefix("torch.")


@pytest.mark.parametrize("dtype", ["bool", "int64", "float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("scalar", [2, 2.5, 1 + 2j])
def test_result_type_with_python_numbers(dtype, scalar):
    m = munet.ones(2, dtype=getattr(munet, dtype))
    t = torch.ones(2, dtype=getattr(torch, dtype))
    assert munet.result_type(m, scalar).name == str(torch.result_type(t, scalar)).removeprefix("torch.")
    zero_dim = torch.result_type(t[0], torch.tensor(1j, dtype=torch.complex128))
    assert munet.result_type(m[0], munet.tensor(1j, dtype=munet.complex128)).name == str(zero_dim)[6:]


def test_creation():
    assert munet.tensor([1 + 2j, 3]).dtype is munet.complex64
    np.testing.assert_array_equal(munet.tensor([1 + 2j, 3]).numpy(), [1 + 2j, 3])
    assert munet.tensor(np.ones(2, np.complex128)).dtype is munet.complex128
    assert munet.zeros(2, dtype=munet.cfloat).tolist() == [0j, 0j]
    assert munet.full((2,), 1 - 1j).dtype is munet.complex64
    assert munet.ones_like(munet.tensor([1j])).dtype is munet.complex64
    assert munet.tensor(1 + 1j).item() == 1 + 1j
    assert munet.ones(2).cfloat().dtype is munet.complex64 and munet.ones(2).cdouble().dtype is munet.complex128
    z = munet.tensor([1j], requires_grad=True)
    assert z.requires_grad and z.is_complex() and munet.is_complex(z) and not munet.ones(1).is_complex()


def test_repr_matches_torch():
    for values in ([1 + 2j, 3 - 1j], [0.3367 + 0.1288j, -0.2345 + 0.2303j], [[1e-5 + 1j, 100 + 0j]], 1 + 1j):
        want = repr(torch.tensor(values)).replace("torch.", "munet.")
        assert repr(munet.tensor(values)) == want
    want = repr(torch.tensor([1j], dtype=torch.complex128)).replace("torch.", "munet.")
    assert repr(munet.tensor([1j], dtype=munet.complex128)) == want


# arithmetic ------------------------------------------------------------------------------------------------

BINARY = {
    "add": lambda m, a, b: a + b,
    "sub": lambda m, a, b: a - b,
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "rdiv_scalar": lambda m, a, b: (2 - 1j) / a + b,
    "pow_scalar": lambda m, a, b: a**2.5 + b**2,
    "mixed_real": lambda m, a, b: a * b.real + b.imag / a,
    "python_complex": lambda m, a, b: a * (1 + 2j) - 3j + b,
    "matmul": lambda m, a, b: a.reshape(3, 4) @ b.reshape(4, 1),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_arithmetic(name):
    check_complex(BINARY[name], crandn(3, 4), crandn(4, seed=1) + 0.5)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "tanh", "sinh", "cosh", "neg", "reciprocal"])
def test_unary_functions(name):
    check_complex(lambda m, x: getattr(m, name)(x), crandn(2, 5))


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
def test_real_operand_promotes_and_gets_the_real_part_of_the_gradient():
    out = check_complex(lambda m, x, y: x * y + x.to(m.float64) * 2, crandn(2, 3), randn(2, 3, dtype="float64"))
    assert out.dtype is munet.complex128
    out = check_complex(lambda m, x, y: x + y, crandn(2, 3, dtype="complex64"), randn(3, dtype="float64"), rtol=1e-6)
    assert out.dtype is munet.complex128


def test_reductions():
    z = crandn(3, 4)
    check_complex(lambda m, x: x.sum(), z)
    check_complex(lambda m, x: x.sum(1, keepdim=True), z)
    check_complex(lambda m, x: x.mean(0), z)
    check_complex(lambda m, x: x.sum(dtype=m.complex128), crandn(3, dtype="complex64"), rtol=1e-6)


def test_non_contiguous_and_small_shapes():
    check_complex(lambda m, x: (x.t()[::2] * 2j).exp(), crandn(4, 5))
    check_complex(lambda m, x: x.abs() * x.angle(), crandn(1, 1))
    check_complex(lambda m, x: x * x, crandn(0, 3))
    check_complex(lambda m, x: munet_or_torch_cat(m, x), crandn(2, 3))


def munet_or_torch_cat(m, x):
    return m.cat([x, x.flip(0), m.roll(x, 1, 1)], 1)[:, [0, 4]]


# abs, angle, conj, real/imag, views --------------------------------------------------------------------------


def test_abs_angle_sgn_gradients_at_zero():
    z = crandn(6)
    z[0] = 0
    out = check_complex(lambda m, x: x.abs() + x.angle() + m.abs(x) ** 2, z)
    assert out.dtype is munet.float64
    check_complex(lambda m, x: m.angle(x), np.array([-2.0, 0.0, 3.0, -0.0, np.nan]))


def test_conj_family():
    z = crandn(2, 3)
    check_complex(lambda m, x: x.conj() * x, z)
    check_complex(lambda m, x: m.conj_physical(x) + 1, z)
    x = munet.tensor(z)
    assert not x.conj().is_conj() and not x.is_neg() and not munet.is_conj(x) and not munet.is_neg(x)
    assert x.resolve_conj() is x and munet.resolve_neg(x) is x
    y = x.clone().conj_physical_()
    np.testing.assert_array_equal(y.numpy(), z.conj())
    real = munet.ones(2)
    assert real.conj() is real
    check_complex(lambda m, x: m.adjoint(x) @ x, z)
    check_complex(lambda m, x: x.mH + x.H, crandn(3, 3))


def test_real_imag_are_writable_views():
    z = crandn(2, 3)
    x = munet.tensor(z)
    re, im = x.real, x.imag
    assert re.dtype is munet.float64 and re.data_ptr() == x.data_ptr()
    im.mul_(2)
    re.zero_()
    np.testing.assert_array_equal(x.numpy(), 2j * z.imag)
    x.real = munet.ones(2, 3, dtype=munet.float64)
    x.imag = munet.zeros(3, dtype=munet.float64)
    np.testing.assert_array_equal(x.numpy(), np.ones((2, 3)))
    assert munet.real(munet.ones(2)).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        munet.imag(munet.ones(2))
    check_complex(lambda m, x: x.real * 2 - x.imag**2 + m.real(x[:, 1:]).sum(), z)


def test_view_as_real_and_complex():
    z = crandn(3, 4)
    x = munet.tensor(z)
    r = munet.view_as_real(x)
    assert r.shape == (3, 4, 2) and r.stride() == (8, 2, 1) and r.data_ptr() == x.data_ptr()
    back = munet.view_as_complex(r)
    assert back.data_ptr() == x.data_ptr() and back.dtype is munet.complex128
    r[0, 0, 1] = 7.0
    assert x[0, 0].item().imag == 7.0
    np.testing.assert_array_equal(munet.view_as_real(x.t()[1:]).numpy(), torch.view_as_real(torch.tensor(x.numpy()).t()[1:]).numpy())  # fmt: skip
    check_complex(lambda m, x: m.view_as_real(x.t()) ** 2, z)
    check_complex(lambda m, x: m.view_as_complex(x) * 1j, randn(3, 2, dtype="float64"))
    check_complex(lambda m, x: m.view_as_complex(x.reshape(2, 3, 2)[:, 1:]).exp(), randn(6, 2, dtype="float64"))
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        munet.view_as_complex(munet.ones(3, 3))
    with pytest.raises(RuntimeError, match="stride 1"):
        munet.view_as_complex(munet.ones(2, 3).t())
    with pytest.raises(RuntimeError, match="storage_offset divisible by 2"):
        munet.view_as_complex(munet.ones(7)[1:].reshape(3, 2))
    with pytest.raises(RuntimeError, match="only supported for complex"):
        munet.view_as_real(munet.ones(2))


def test_in_place_through_a_part_view_with_gradients_raises():
    x = munet.tensor(crandn(3), requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="view of a complex128 tensor"):
        x.real.mul_(2)


def test_complex_and_polar():
    a, b = randn(3, 1, dtype="float64"), randn(4, dtype="float64", seed=1)
    out = check_complex(lambda m, x, y: m.complex(x, y), a, b)
    assert out.shape == (3, 4) and out.dtype is munet.complex128
    check_complex(lambda m, x, y: m.polar(x.abs(), y), a, b)
    with pytest.raises(RuntimeError, match="Float or Double"):
        munet.complex(munet.ones(2), munet.ones(2, dtype=munet.float64))


# boundaries: other ops, devices, compile, autograd roots, files ------------------------------------------------


def test_ops_without_a_complex_rule_raise():
    z = munet.tensor([1j, 2])
    for fn, name in ((munet.relu, "relu"), (lambda x: x.max(), "amax"), (munet.sort, "sort")):
        with pytest.raises(TypeError, match=f"{name}: not supported for complex64 tensors"):
            fn(z)


def test_compile_refuses_complex():
    with pytest.raises(RuntimeError, match="munet.compile does not support complex64"):
        munet.compile(lambda x: x * 2)(munet.tensor([1j]))
    with pytest.raises(RuntimeError, match="munet.compile does not support complex64"):
        munet.compile(lambda x: munet.fft.rfft(x).abs())(munet.ones(8))


def test_other_devices_refuse_complex(vulkan):
    with pytest.raises(munet.DeviceError, match="complex64 tensors are not supported on vulkan"):
        munet.tensor([1j]).to(vulkan)
    with pytest.raises(munet.DeviceError, match="complex64 tensors are not supported on vulkan"):
        munet.zeros(2, dtype=munet.complex64, device=vulkan)
    with pytest.raises(munet.DeviceError, match="complex64 tensors are not supported on vulkan"):
        munet.ones(2, device=vulkan).to(munet.complex64)


def test_backward_of_a_complex_scalar_needs_a_gradient():
    z = munet.tensor([1j], requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar outputs"):
        z.sum().backward()
    z.sum().backward(munet.tensor(1 + 0j))
    np.testing.assert_array_equal(z.grad.numpy(), [1])


def test_save_load_and_pickle():
    z = munet.tensor(crandn(2, 3, dtype="complex64"))
    buffer = io.BytesIO()
    munet.save({"z": z}, buffer)
    buffer.seek(0)
    loaded = munet.load(buffer)["z"]
    assert loaded.dtype is munet.complex64
    np.testing.assert_array_equal(loaded.numpy(), z.numpy())
    from safetensors.numpy import load

    np.testing.assert_array_equal(load(buffer.getvalue())["z"], z.numpy())
    with pytest.raises(TypeError, match="complex128, which safetensors cannot store"):
        munet.save({"z": z.cdouble()}, io.BytesIO())
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(z)).numpy(), z.numpy())


def test_random_complex_samples():
    z = munet.randn(20000, dtype=munet.cfloat)
    assert z.dtype is munet.complex64 and z._base is None
    # each part has variance 1/2 (PyTorch's complex normal); 4 standard errors of a variance estimate
    for part in (z.real, z.imag):
        assert abs(part.var().item() - 0.5) < 4 * 0.5 * (2 / 20000) ** 0.5
    u = munet.rand(1000, dtype=munet.complex128)
    assert u.dtype is munet.complex128
    assert 0 <= u.real.min().item() and u.imag.max().item() < 1 and u.imag.min().item() >= 0
    assert munet.randn(2, dtype=munet.cfloat, requires_grad=True).requires_grad


def test_conjugating_products_and_sgn():
    a, b = crandn(5), crandn(5, seed=1)
    check_complex(lambda m, x, y: m.vdot(x, y), a, b)
    check_complex(lambda m, x, y: m.dot(x, y), a, b)
    check_complex(lambda m, x, y: m.linalg.vecdot(x, y), crandn(2, 5), b)
    z = a.copy()
    z[2] = 0
    check_complex(lambda m, x: m.sgn(x) * x.abs(), z)


@pytest.mark.cuda
def test_cuda_holds_complex():
    z = munet.tensor([1 + 2j, -3j], dtype=munet.complex128)
    assert munet.equal(z.to("cuda").cpu(), z)
    assert munet.equal(munet.ones(2, dtype=munet.cdouble, device="cuda").cpu(), munet.ones(2, dtype=munet.cdouble))
    assert munet.equal(z.to("cuda").conj().cpu(), z.conj())


def test_norms_and_variances_are_real():
    z = crandn(3, 4)
    for fn in (
        lambda m, x: x.var(),
        lambda m, x: x.std(1, correction=0),
        lambda m, x: m.var_mean(x, 0)[0],
        lambda m, x: x.norm(),
        lambda m, x: m.linalg.vector_norm(x, 1, dim=1),
        lambda m, x: m.linalg.vector_norm(x, float("inf")),
    ):
        assert check_complex(fn, z).dtype is munet.float64


def test_predicates():
    values = np.array([1 + 1j, np.nan + 0j, complex(0, np.inf), complex(np.inf, np.nan), 2 + 0j, -0j])
    m, t = munet.tensor(values), torch.tensor(values)
    for name in ("isnan", "isinf", "isfinite", "isreal"):
        np.testing.assert_array_equal(getattr(munet, name)(m).numpy(), getattr(torch, name)(t).numpy(), err_msg=name)
    with pytest.raises(TypeError, match="isposinf: not supported for complex128"):
        munet.isposinf(m)


def test_sgd_on_a_complex_parameter():
    start = crandn(3)
    results = []
    for m in (munet, torch):
        p = m.nn.Parameter(m.tensor(start))
        opt = m.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)
        for _ in range(3):
            opt.zero_grad()
            (p.abs() ** 2 + p.real * 3).sum().backward()
            opt.step()
        results.append(p.detach().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


def test_second_order_gradients():
    z0 = crandn(5)
    results = []
    for m in (munet, torch):
        z = m.tensor(z0, requires_grad=True)
        (g,) = m.autograd.grad((m.exp(z) * z.conj()).abs().sum(), [z], create_graph=True)
        (h,) = m.autograd.grad(m.view_as_real(g).sum(), [z])
        results.append((g.detach().resolve_conj().numpy(), h.resolve_conj().numpy()))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_torch_checkpoint_type_names_and_finfo(tmp_path):
    path = tmp_path / "complex.pt"
    values = {"a": torch.tensor([1 + 2j, 3j]), "b": torch.tensor([1j], dtype=torch.complex128)}
    torch.save(values, path)
    loaded = munet.load(path)
    for name, tensor in values.items():
        assert loaded[name].dtype.name == str(tensor.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(loaded[name].numpy(), tensor.numpy())
    assert munet.tensor([1j]).type() == "munet.ComplexFloatTensor"
    assert munet.tensor([1j], dtype=munet.cdouble).type() == "munet.ComplexDoubleTensor"
    assert munet.finfo(munet.complex64) == munet.finfo(munet.float32)
    assert munet.finfo(munet.complex128).eps == torch.finfo(torch.complex128).eps

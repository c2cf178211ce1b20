"""Complex tensors on the fake cuda devices: complex64/complex128 storage, transfers, copies, casts
and views (``view_as_real``, ``real``, ``imag``), the complex primitives (``complex``, ``conj``,
``complex_abs``, ``angle``: CuPy elementwise, ``kernels_complex.py``), complex arithmetic (formula
ops through ``complex_formula.py``, ``sum``, ``cumsum``, ``matmul``, the take and put kernels) against
the cpu, gradients through them, and the clear error of a scalar op with no complex form. Evidence
about MuNet's side only (the fake's arithmetic is NumPy's)."""

import warnings

import numpy as np
import pytest

import munet
from munet._device import DeviceError
from tests.backends import fake_cupy
from tests.backends.linalg_cases import close, gradient_pair

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")


def _complex(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_storage_transfers_copies_and_views(dtype):
    z = munet.tensor(_complex((3, 4), dtype))
    zc = z.to("cuda:1")
    assert zc.device == munet.device("cuda:1") and zc.dtype is z.dtype
    close(zc, z, 0, exact=True)
    close(zc.t().contiguous(), z.t().contiguous(), 0, exact=True)
    close(zc[:, 1:3].clone(), z[:, 1:3].clone(), 0, exact=True)
    close(munet.view_as_real(zc), munet.view_as_real(z), 0, exact=True)
    close(zc.real, z.real, 0, exact=True)
    close(zc.t().imag, z.t().imag, 0, exact=True)
    close(munet.view_as_complex(munet.view_as_real(zc).contiguous()), z, 0, exact=True)
    close(munet.cat([zc, zc[:1]]), munet.cat([z, z[:1]]), 0, exact=True)
    close(munet.zeros(2, 3, dtype=z.dtype, device="cuda:0"), munet.zeros(2, 3, dtype=z.dtype), 0, exact=True)
    real = munet.tensor(np.arange(6.0).reshape(2, 3))
    close(real.to("cuda:0").to(z.dtype), real.to(z.dtype), 0, exact=True)
    zc.real[0] = 5.0  # the views write the storage
    z.real[0] = 5.0
    close(zc, z, 0, exact=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_complex_primitives_match_the_cpu(dtype):
    rng = np.random.default_rng(1)
    re, im = (munet.tensor(rng.standard_normal(s).astype(dtype)) for s in ((3, 1), (4,)))
    re.numpy()[0, 0] = 0.0
    im.numpy()[0] = 0.0
    z = munet.complex(re, im)
    zc = munet.complex(re.to("cuda:0"), im.to("cuda:0").expand(3, 4).t().t())
    tol = 1e-6 if dtype == "float32" else 1e-14
    close(zc, z, tol, exact=True)
    close(zc.conj(), z.conj(), tol, exact=True)
    close(zc.t().abs(), z.t().abs(), tol)
    close(zc.angle(), z.angle(), tol)
    x = munet.tensor(np.array([-2.0, -0.0, 0.0, 3.0, np.nan], dtype))
    close(x.to("cuda:0").angle(), x.angle(), 0, exact=True)


def test_angle_of_bfloat16():
    x = munet.tensor([-2.0, 0.0, 3.0]).to(munet.bfloat16)
    got = x.to("cuda:0").angle()
    assert got.dtype is munet.bfloat16
    np.testing.assert_array_equal(got.cpu().float().numpy(), x.angle().float().numpy())


def test_gradients_through_complex_and_its_views():
    rng = np.random.default_rng(2)
    values = rng.standard_normal((2, 3, 4))
    weights = rng.standard_normal((3, 4, 2))
    grads = []
    for device in ("cpu", "cuda:0"):
        re, im = (munet.tensor(v, device=device, requires_grad=True) for v in values)
        out = munet.view_as_real(munet.complex(re, im).conj())
        (out * munet.tensor(weights, device=device)).sum().backward()
        grads.append((re.grad, im.grad))
    for got, want in zip(grads[1], grads[0]):
        close(got, want, 1e-12)


ARITHMETIC = {
    "mul, broadcast": lambda z, w: z * w[0],
    "add a python number": lambda z, w: z + 1.5,
    "mul by a python complex": lambda z, w: z * (2 - 1j),
    "div, transposed": lambda z, w: z.t() / w.t(),
    "sub in place": lambda z, w: z.clone().sub_(w),
    "reciprocal": lambda z, w: z.reciprocal(),
    "pow": lambda z, w: z**2,
    "exp, log, sqrt": lambda z, w: munet.sqrt(munet.log(munet.exp(z) + 3)),
    "sin, cos, tanh": lambda z, w: munet.sin(z) + munet.cos(w) * munet.tanh(z),
    "where": lambda z, w: munet.where(z.real > 0, z, w),
    "eq, ne": lambda z, w: munet.stack([z == w, z != z.conj()]),
    "complex with a real tensor": lambda z, w: z * w.real,
    "sum": lambda z, w: munet.stack([z.sum(), w.sum()]),
    "sum over a dim, keepdim": lambda z, w: z.sum(0, keepdim=True),
    "mean": lambda z, w: z.mean(1),
    "cumsum": lambda z, w: munet.cumsum(z, 1),
    "index with a tensor": lambda z, w: z[munet.tensor([2, 0, 2], device=z.device)],
    "gather": lambda z, w: munet.gather(z, 1, munet.tensor([[3, 0], [1, 1], [0, 2]], device=z.device)),
    "flip and roll": lambda z, w: munet.roll(z.flip(1), 1, 0),
    "index_put": lambda z, w: z.index_put((munet.tensor([0, 2], device=z.device),), w[1:] * 1j),
    "index_put accumulate": lambda z, w: z.index_put((munet.tensor([0, 2, 0], device=z.device),), w, accumulate=True),
    "masked_fill": lambda z, w: z.masked_fill(z.real > 0, 2j),
    "tril": lambda z, w: z.tril(),
    "matmul, batched and transposed": lambda z, w: z.reshape(3, 4, 1) @ w.t().reshape(3, 1, 4).mT.mT,
}


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("case", list(ARITHMETIC))
def test_complex_arithmetic_matches_the_cpu(case, dtype):
    z, w = (munet.tensor(_complex((3, 4), dtype, seed)) for seed in (3, 4))
    got, want = ARITHMETIC[case](z.to("cuda:0"), w.to("cuda:0")), ARITHMETIC[case](z, w)
    close(got, want, 1e-5 if dtype == "complex64" else 1e-12)


def test_a_scalar_op_without_a_complex_form_is_a_device_error():
    from munet.backends.cuda import complex_formula
    from munet.ops._scalar import Apply, Arg

    zc = munet.tensor(_complex((3,), "complex64")).to("cuda:0")
    floor = Apply("floor", (Arg(0, "complex64"),), "complex64")
    with pytest.raises(DeviceError, match="demo: no complex kernel on cuda: its formula uses 'floor'"):
        complex_formula._evaluate(fake_cupy, "demo", floor, [zc._data], {})


def test_vulkan_still_refuses_complex():
    pytest.importorskip("wgpu")
    with pytest.raises(DeviceError, match="complex64 tensors are not supported on"):
        munet.zeros(2, dtype=munet.complex64, device="vulkan")


@pytest.mark.parametrize("target", ["float32", "float64", "bfloat16", "int32", "bool"])
def test_casts_from_complex_keep_the_real_part(target):
    z = munet.tensor(np.array([1.5 + 2j, -2.25 - 1j, 0j, 0 + 3j], np.complex128))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning: the real part is taken, not discarded by astype
        got = z.to("cuda:0").to(getattr(munet, target))
    want = z.to(getattr(munet, target))
    assert got.dtype is want.dtype
    np.testing.assert_array_equal(got.cpu().float().numpy(), want.float().numpy())


@pytest.mark.parametrize("name", ["abs", "angle", "mul", "exp"])
def test_gradients_through_complex_arithmetic_match_the_cpu(name):
    fns = {
        "abs": lambda z: z.abs(),
        "angle": lambda z: z.angle(),
        "mul": lambda z: munet.view_as_real(z * z.conj().flip(0) * 0.5j),
        "exp": lambda z: munet.view_as_real(munet.exp(z) / (z + 3)),
    }
    values = np.random.default_rng(5).standard_normal((2, 6))

    def fn(x):
        return fns[name](munet.complex(x[0], x[1]))

    cpu, cuda = gradient_pair(fn, values)
    close(cuda, cpu, 1e-12)

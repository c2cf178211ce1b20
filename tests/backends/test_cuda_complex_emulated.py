"""Complex tensors on the fake cuda devices: complex64/complex128 storage, transfers, copies, casts
and views (``view_as_real``, ``real``, ``imag``), the complex primitives (``complex``, ``conj``,
``complex_abs``, ``angle``: CuPy elementwise, ``kernels_complex.py``) against the cpu, gradients
through them, and the clear error of an op with no complex cuda kernel. Evidence about MuNet's side
only (the fake's arithmetic is NumPy's)."""

import warnings

import numpy as np
import pytest

import munet
from munet._device import DeviceError
from tests.backends import fake_cupy
from tests.backends.linalg_cases import close

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


def test_an_op_without_a_complex_cuda_kernel_is_a_device_error():
    zc = munet.tensor(_complex((3,), "complex64")).to("cuda:0")
    with pytest.raises(DeviceError, match="mul: no kernel for device 'cuda:0'"):
        zc * zc
    for name, fn in {"add": lambda z: z + 1, "exp": munet.exp, "sum": munet.sum}.items():
        with pytest.raises(DeviceError, match=f"{name}: no kernel for device 'cuda:0'"):
            fn(zc)


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


@pytest.mark.parametrize("name", ["abs", "angle"])
def test_a_backward_that_needs_complex_arithmetic_is_a_device_error(name):
    re = munet.tensor([1.0, -2.0], device="cuda:0", requires_grad=True)
    out = getattr(munet.complex(re, re.flip(0)), name)()
    with pytest.raises(DeviceError, match="no kernel for device 'cuda:0'"):
        out.sum().backward()

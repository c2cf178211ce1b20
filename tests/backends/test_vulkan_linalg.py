"""munet.linalg on vulkan: the factorizations have no WGSL kernels and raise DeviceError naming the
op and the device (never a silent host round trip); the composites of existing primitives (norms,
cross, vecdot, multi_dot, matrix_power with n >= 0) run there and match the cpu, forward and
gradient (through ``(f(x) * r).sum()`` with a fixed random ``r``)."""

import math

import numpy as np
import pytest

import munet

LA = munet.linalg
TOL = dict(rtol=1e-4, atol=1e-5)  # float32 sums in another order than the cpu's


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run(fn, arrays, device):
    tensors = [munet.tensor(a, device=device, requires_grad=True) for a in arrays]
    out = fn(*tensors)
    (out * munet.tensor(rand(*out.shape, seed=5), device=device)).sum().backward()
    return out.detach().cpu().numpy(), [t.grad.cpu().numpy() for t in tensors]


@pytest.mark.parametrize(
    "fn,shapes",
    [
        (lambda x: LA.vector_norm(x, 3, dim=-1), [(3, 4)]),
        (lambda x: LA.norm(x), [(3, 4)]),
        (lambda x: LA.matrix_norm(x, 1), [(2, 3, 4)]),
        (lambda x: LA.matrix_norm(x, -math.inf), [(2, 3, 4)]),
        (lambda x, y: LA.cross(x, y), [(4, 3), (4, 3)]),
        (lambda x, y: LA.vecdot(x, y), [(4, 3), (1, 3)]),
        (lambda x, y, z: LA.multi_dot([x, y, z]), [(3, 4), (4, 2), (2, 5)]),
        (lambda x: LA.matrix_power(x, 3), [(2, 3, 3)]),
    ],
)
def test_composites_match_cpu(vulkan, fn, shapes):
    arrays = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    cpu_out, cpu_grads = run(fn, arrays, "cpu")
    gpu_out, gpu_grads = run(fn, arrays, vulkan)
    np.testing.assert_allclose(gpu_out, cpu_out, **TOL)
    for g, c in zip(gpu_grads, cpu_grads):
        np.testing.assert_allclose(g, c, **TOL)


@pytest.mark.parametrize(
    "fn,op",
    [
        (LA.cholesky, "linalg_cholesky_ex"),
        (LA.qr, "linalg_qr"),
        (LA.svd, "linalg_svd"),
        (LA.eigh, "linalg_eigh"),
        (LA.eig, "linalg_eig"),
        (LA.eigvals, "linalg_eig"),
        (LA.lu_factor, "linalg_lu_factor_ex"),
        (LA.inv, "linalg_lu_factor_ex"),
        (LA.det, "linalg_det"),
        (LA.matrix_exp, "linalg_matrix_exp"),
        (lambda a: LA.solve_triangular(a, a, upper=True), "linalg_solve_triangular"),
    ],
)
def test_factorizations_raise_device_error(vulkan, fn, op):
    a = munet.tensor(np.eye(3, dtype=np.float32) * 2, device=vulkan)
    with pytest.raises(munet.DeviceError, match=f"{op}: no kernel for device '{vulkan}'"):
        fn(a)

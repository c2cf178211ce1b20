"""The cuda linalg primitives (``munet/backends/cuda/kernels_linalg.py``) on the fake devices: each
op against the cpu backend's on the same inputs (batched, non-contiguous, an empty batch, float32
and float64), the pointers, leading dimensions, triangles and batch pointer arrays cuSOLVER is
handed (the fake's cuSOLVER reads them column-major, as cuSOLVER does), which device and pool the
results land on, and gradients through a few of them.

The fake's arithmetic is NumPy's, so this is evidence about MuNet's side only;
``test_cuda_gpu_linalg.py`` (marker ``cuda``) runs the same ops on a GPU.
"""

import numpy as np
import pytest

import munet
from munet._device import DeviceError
from tests.backends import fake_cupy
from tests.backends.linalg_cases import close, gradient_pair, matrices, pair

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")

RTOL = {"float32": 2e-4, "float64": 1e-10}


def _close(got, want, dtype: str, exact: bool = False) -> None:
    close(got, want, RTOL[dtype], exact)


# op -> (kind of input, fn(A) -> tuple of results, shapes (m, n) to try, same NumPy routine as the cpu's)
CASES = {
    "cholesky_ex": ("spd", lambda a: tuple(munet.linalg.cholesky_ex(a)), ((4, 4),), False),
    "lu_factor_ex square": ("general", lambda a: tuple(munet.linalg.lu_factor_ex(a)), ((4, 4),), False),
    "lu_factor_ex tall": ("general", lambda a: tuple(munet.linalg.lu_factor_ex(a)), ((5, 3),), False),
    "lu_factor_ex wide": ("general", lambda a: tuple(munet.linalg.lu_factor_ex(a)), ((3, 5),), False),
    "lu (unpacked permutation)": ("general", lambda a: tuple(munet.linalg.lu(a)), ((4, 4),), False),
    "det": ("general", lambda a: (munet.linalg.det(a),), ((4, 4),), True),
    "qr reduced": ("general", lambda a: tuple(munet.linalg.qr(a)), ((5, 3), (3, 5)), True),
    "qr complete": ("general", lambda a: tuple(munet.linalg.qr(a, mode="complete")), ((5, 3),), True),
    "qr r": ("general", lambda a: tuple(munet.linalg.qr(a, mode="r")), ((5, 3),), True),
    "geqrf": ("general", lambda a: tuple(munet.geqrf(a)), ((5, 3), (3, 5)), True),
    "svd": ("general", lambda a: tuple(munet.linalg.svd(a, full_matrices=False)), ((5, 3), (3, 5)), True),
    "svd full": ("general", lambda a: tuple(munet.linalg.svd(a)), ((4, 3),), True),
    "eigh": ("symmetric", lambda a: tuple(munet.linalg.eigh(a)), ((4, 4),), True),
    "eigh upper": ("symmetric", lambda a: tuple(munet.linalg.eigh(a, UPLO="U")), ((4, 4),), True),
    "matrix_exp": ("small", lambda a: (munet.linalg.matrix_exp(a),), ((4, 4),), False),
}


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(CASES))
def test_op_matches_the_cpu(case, dtype, layout):
    kind, fn, shapes, exact = CASES[case]
    for m, n in shapes:
        A, Ac = pair(matrices(kind, (2, 3, m, n), dtype, seed=len(case)), layout)
        for got, want in zip(fn(Ac), fn(A), strict=True):
            _close(got, want, dtype, exact=exact or not want.dtype.is_floating_point)
        _close(Ac, A, dtype, exact=True)  # the operand is left as it was (LAPACK overwrites its copy)


@pytest.mark.parametrize("case", list(CASES))
def test_an_empty_batch_and_emptymatrices(case):
    kind, fn, shapes, _ = CASES[case]
    m, n = shapes[0]
    for shape in ((0, m, n), (2, 0, 0)):
        A, Ac = pair(np.zeros(shape, np.float32), "contiguous")
        for got, want in zip(fn(Ac), fn(A), strict=True):
            _close(got, want, "float32", exact=True)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_solve_triangular_matches_the_cpu(upper, left, dtype):
    A, Ac = pair(matrices("triangular", (2, 1, 4, 4), dtype, seed=3), "transposed")
    B, Bc = pair(matrices("general", (3, 4, 4) if left else (3, 4, 4), dtype, seed=4), "transposed")
    for unitriangular in (False, True):
        kw = dict(upper=upper, left=left, unitriangular=unitriangular)
        _close(munet.linalg.solve_triangular(Ac, Bc, **kw), munet.linalg.solve_triangular(A, B, **kw), dtype)
    calls = [c for c in fake_cupy.LINALG_CALLS if c[0] == "solve_triangular"]
    assert len(calls) == 2 * 2 * 3  # one trsm per matrix of the broadcast batch (2, 3)


def test_solve_triangular_with_an_empty_batch():
    A, Ac = pair(np.eye(3, dtype=np.float32)[None].repeat(2, 0), "contiguous")
    B, Bc = pair(np.zeros((0, 2, 3, 2), np.float32), "contiguous")
    _close(
        munet.linalg.solve_triangular(Ac, Bc, upper=True), munet.linalg.solve_triangular(A, B, upper=True), "float32"
    )


def test_cholesky_reads_the_lower_triangle_and_reports_info_per_matrix():
    values = matrices("spd", (3, 4, 4), "float64", seed=5)
    values[1, 2, 2] = -50.0  # the leading minor of order 3 of matrix 1 is not positive-definite
    values[2] = np.tril(values[2])  # only the lower triangle is read
    A, Ac = pair(values, "contiguous")
    L, info = munet.linalg.cholesky_ex(Ac)
    assert info.cpu().tolist() == [0, 3, 0] == munet.linalg.cholesky_ex(A).info.tolist()
    want = munet.linalg.cholesky_ex(A).L
    np.testing.assert_allclose(L.cpu().numpy()[[0, 2]], want.numpy()[[0, 2]], rtol=1e-12)
    n, lda, count, uplo = next(c[1] for c in fake_cupy.LINALG_CALLS if c[0] == "potrfBatched")
    assert (n, lda, count, uplo) == (4, 4, 3, fake_cupy.CUBLAS_FILL_MODE_UPPER)  # the row-major lower triangle
    with pytest.raises(munet.linalg.LinAlgError):  # a device-side check, reported at the synchronization
        munet.linalg.cholesky(Ac)
        munet.cuda.synchronize()


def test_lu_reports_the_first_zero_pivot_as_the_cpu():
    values = matrices("general", (2, 4, 4), "float64", seed=6)
    values[1, :, 2] = 0.0  # column 2 of matrix 1 is zero: U[2, 2] is exactly 0
    A, Ac = pair(values, "contiguous")
    assert munet.linalg.lu_factor_ex(Ac).info.cpu().tolist() == munet.linalg.lu_factor_ex(A).info.tolist() == [0, 3]
    calls = [c[1] for c in fake_cupy.LINALG_CALLS if c[0] == "getrf"]
    assert calls == [(4, 4, 4)] * 2  # one getrf per matrix, on a column-major copy (lda = rows)


def test_results_land_on_the_operand_device_and_pool():
    A = munet.tensor(matrices("spd", (2, 3, 3), "float32", seed=7))
    with munet.cuda.device(0):
        Ac = A.to("cuda:1")
        before = munet.cuda.memory_allocated(1)
        L, info = munet.linalg.cholesky_ex(Ac)
        Q, R = munet.linalg.qr(Ac)
        S = munet.linalg.svdvals(Ac)
    for t in (L, info, Q, R, S):
        assert t.device == munet.device("cuda:1")
    assert munet.cuda.memory_allocated(1) > before
    assert {c[3] for c in fake_cupy.LINALG_CALLS if c[2] is not None} == {1}
    assert [c[1] for c in fake_cupy.LINALG_CALLS if c[0] == "setStream"] == [munet.cuda.current_stream(1).cuda_stream]


def test_unsupported_dtypes_raise_naming_the_op():
    for dtype in (munet.float16, munet.bfloat16, munet.int64):
        A = munet.ones(2, 3, 3, dtype=dtype, device="cuda:0")
        with pytest.raises(RuntimeError, match="linalg.cholesky"):
            munet.linalg.cholesky(A)
        with pytest.raises(RuntimeError, match="linalg.qr"):
            munet.linalg.qr(A)


def test_eig_raises_a_device_error_saying_cupy_lacks_it():
    A = munet.ones(3, 3, device="cuda:0")
    with pytest.raises(DeviceError, match="linalg_eig: .*lacks cupy.linalg.eig"):
        munet.linalg.eig(A)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eig_through_cupy_linalg_eig_where_cupy_has_it(monkeypatch, dtype):
    def eig(a):  # a stand-in of cupy.linalg.eig (recent CuPy): complex results in the input's precision
        fake_cupy.LINALG_CALLS.append(("eig", a.shape, a.dtype.name, fake_cupy._current_device()))
        w, v = np.linalg.eig(np.asarray(a))
        precision = np.complex64 if a.dtype == np.float32 else np.complex128
        return fake_cupy.array(w.astype(precision)), fake_cupy.array(v.astype(precision))

    monkeypatch.setattr(fake_cupy.linalg, "eig", eig, raising=False)
    A, Ac = pair(matrices("general", (2, 3, 4, 4), dtype, seed=12), "transposed")
    for got, want in zip(munet.linalg.eig(Ac), munet.linalg.eig(A), strict=True):
        close(got, want, RTOL[dtype])
    close(munet.linalg.eigvals(Ac), munet.linalg.eigvals(A), RTOL[dtype])
    close(munet.linalg.eigvals(Ac[:0]), munet.linalg.eigvals(A[:0]), 0, exact=True)
    if dtype == "float64":
        values = matrices("general", (2, 4, 4), dtype, seed=13)
        for fn in (lambda a: munet.linalg.eigvals(a).abs(), lambda a: munet.linalg.eig(a).eigenvectors.abs()):
            cpu, cuda = gradient_pair(fn, values)
            close(cuda, cpu, 1e-9)


@pytest.mark.parametrize(
    "case",
    [
        ("cholesky", "spd", (4, 4), lambda a: munet.linalg.cholesky(a)),
        ("qr", "general", (5, 3), lambda a: munet.cat([t.reshape(-1) for t in munet.linalg.qr(a)])),
        ("svd", "general", (4, 3), lambda a: munet.linalg.svdvals(a)),
    ],
    ids=lambda c: c[0],
)
def test_gradients_match_the_cpu(case):
    _, kind, (m, n), fn = case
    cpu, cuda = gradient_pair(fn, matrices(kind, (2, m, n), "float64", seed=8))
    _close(cuda, cpu, "float64")


def _eye(like):
    return munet.eye(like.shape[-1], dtype=like.dtype, device=like.device)


COMPOSITES = {
    "solve": lambda a, b: munet.linalg.solve(a, b),
    "inv": lambda a, b: munet.linalg.inv(a),
    "slogdet": lambda a, b: munet.cat([t.reshape(-1) for t in munet.linalg.slogdet(a)]),
    "lstsq": lambda a, b: munet.linalg.lstsq(a, b).solution,
    "pinv": lambda a, b: munet.linalg.pinv(a),
    "matrix_rank": lambda a, b: munet.linalg.matrix_rank(a),
    "nuclear and spectral norms": lambda a, b: munet.stack([munet.linalg.matrix_norm(a, o) for o in ("nuc", 2, -2)]),
    "cholesky_solve": lambda a, b: munet.cholesky_solve(b, munet.linalg.cholesky(a @ a.mT + 4 * _eye(a))),
    "lu_solve": lambda a, b: munet.linalg.lu_solve(*munet.linalg.lu_factor(a), b),
}


@pytest.mark.parametrize("case", list(COMPOSITES))
def test_composites_of_the_primitives_run_on_cuda(case):
    (A, Ac), (B, Bc) = (pair(matrices("triangular", (2, 4, 4), "float64", seed=s), "transposed") for s in (10, 11))
    _close(COMPOSITES[case](Ac, Bc), COMPOSITES[case](A, B), "float64")


def test_a_compiled_step_replays_the_factorizations_on_new_inputs():
    def step(a):
        r = munet.linalg.qr(a).R
        factor = munet.linalg.cholesky(a @ a.mT + 4 * _eye(a))
        return r.abs().sum() + factor.sum() + munet.linalg.svdvals(a).sum()

    compiled = munet.compile(step)
    for seed in range(3):  # the first call traces; the later ones replay the plan (a CUDA graph)
        A = munet.tensor(matrices("general", (2, 4, 4), "float64", seed=20 + seed))
        np.testing.assert_allclose(compiled(A.to("cuda:0")).item(), step(A).item(), rtol=1e-12)

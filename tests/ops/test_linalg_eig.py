"""munet.linalg.eig / eigvals (munet/ops/linalg_eig.py) against torch.linalg: real and complex
input, batched, non-contiguous and size-0, ``out=``, errors, and gradients (first and second order).

LAPACK returns eigenvalues in an order and eigenvectors with a phase that NumPy's and PyTorch's
LAPACK builds may choose differently, so results are compared after matching each torch eigenvalue
to the nearest MuNet one (asserted to be a permutation), and eigenvectors through ``|V|``. Gradients
are of losses invariant under both: symmetric functions of the eigenvalues and ``|V_ki|^2`` weighted
by row k. float32 results are held to torch's float64 result by ``assert_close_to_reference``.

The matrices are ``S B S^-1`` with ``S`` near the identity (well-conditioned eigenvectors) and ``B``
block diagonal with known, well separated eigenvalues: conjugate pairs ``a +- bi`` and, for odd
sizes, one real eigenvalue; complex inputs get distinct complex eigenvalues.
"""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close_to_reference, noncontiguous, randn, rng, to_numpy

LA = munet.linalg
TOL = {"float64": (1e-7, 1e-9), "complex128": (1e-7, 1e-9)}
REAL = {"float32": "float32", "float64": "float64", "complex64": "float32", "complex128": "float64"}


def general(*shape, dtype="float64", seed=0):
    """``S B S^-1``: real B with eigenvalue pairs ``(i+1) +- (i/2+1) i`` (and ``-n`` for odd n),
    complex B with eigenvalues ``(i+1) (1 + 0.7i)``; S = I + 0.3 randn / sqrt(n) per matrix."""
    n = shape[-1]
    g = rng(seed)
    is_complex = np.dtype(dtype).kind == "c"
    S = np.eye(n) + 0.3 * g.standard_normal(shape) / np.sqrt(max(n, 1))
    if is_complex:
        S = S + 0.3j * g.standard_normal(shape) / np.sqrt(max(n, 1))
        B = np.zeros(shape, np.complex128)
        idx = np.arange(n)
        B[..., idx, idx] = (idx + 1) * (1 + 0.7j) + 0.1 * g.standard_normal(shape[:-1])
    else:
        B = np.zeros(shape)
        for i in range(n // 2):
            a, b = i + 1 + 0.1 * g.standard_normal(shape[:-2]), i / 2 + 1
            B[..., 2 * i, 2 * i] = B[..., 2 * i + 1, 2 * i + 1] = a
            B[..., 2 * i, 2 * i + 1], B[..., 2 * i + 1, 2 * i] = -b, b
        if n % 2:
            B[..., n - 1, n - 1] = -n
    return (S @ B @ np.linalg.inv(S)).astype(dtype)


def matching(m_values: np.ndarray, t_values: np.ndarray) -> np.ndarray:
    """For each torch eigenvalue the index of the nearest MuNet one, per matrix (a permutation)."""
    distance = np.abs(t_values[..., :, None] - m_values[..., None, :])
    perm = distance.argmin(-1)
    n = m_values.shape[-1]
    assert all(len(set(p)) == n for p in perm.reshape(-1, n)), "eigenvalues do not pair up one to one"
    return perm


def parts(z: np.ndarray) -> np.ndarray:
    """A complex array as real (..., 2) (real, imaginary): what assert_close_to_reference compares."""
    return np.stack([z.real, z.imag], -1) if np.iscomplexobj(z) else z


def assert_matches(actual: np.ndarray, expected: np.ndarray, reference, what: str) -> None:
    """float64/complex128 at the default tolerances; float32/complex64 against the float64 reference."""
    if reference is None:
        rtol, atol = TOL[actual.dtype.name]
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)
        return
    assert actual.dtype == expected.dtype, what
    assert_close_to_reference(parts(actual), parts(expected), parts(reference), what)


def aligned(values, vectors, perm):
    return np.take_along_axis(values, perm, -1), np.take_along_axis(vectors, perm[..., None, :], -1)


def torch_eig(a: np.ndarray):
    L, V = torch.linalg.eig(torch.from_numpy(np.array(a)))
    return L.numpy(), V.numpy()


def reference_input(a: np.ndarray):
    """The float64 (complex128) copy of a single-precision input, else None."""
    wide = {"float32": np.float64, "complex64": np.complex128}.get(a.dtype.name)
    return None if wide is None else a.astype(wide)


DTYPES = ["float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (1, 1), (3, 3)])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_eig_matches_torch(dtype, shape, layout):
    a = general(*shape, dtype=dtype, seed=sum(shape))
    a = noncontiguous(a) if layout == "strided" else a
    L, V = LA.eig(munet.from_numpy(a))
    t_L, t_V = torch_eig(a)
    assert L.dtype.name == str(t_L.dtype) and V.dtype.name == str(t_V.dtype)
    assert tuple(L.shape) == t_L.shape and tuple(V.shape) == t_V.shape
    m_L, m_V = L.numpy(), V.numpy()
    perm = matching(m_L, t_L)
    m_L, m_V = aligned(m_L, m_V, perm)
    wide = reference_input(a)
    r_L = r_V = None
    if wide is not None:
        r_L, r_V = torch_eig(wide)
        r_L, r_V = aligned(r_L, r_V, matching(r_L, t_L))
        r_V = np.abs(r_V)
    assert_matches(m_L, t_L, r_L, "eigenvalues")
    assert_matches(np.abs(m_V), np.abs(t_V), r_V, "|eigenvectors|")
    np.testing.assert_array_equal(LA.eigvals(munet.from_numpy(a)).numpy(), L.numpy())  # one kernel


@pytest.mark.parametrize("dtype", DTYPES)
def test_eig_is_an_eigendecomposition_with_unit_columns(dtype):
    """``A V = V diag(L)`` to within the residual torch's LAPACK leaves, and ``|v_j| = 1``."""
    a = general(3, 6, 6, dtype=dtype, seed=4)
    L, V = (x.numpy() for x in LA.eig(munet.from_numpy(a)))
    t_L, t_V = torch_eig(a)
    eps = np.finfo(a.dtype).eps
    wide = a.astype(np.complex128)

    def residual(values, vectors):
        return np.abs(wide @ vectors - vectors * values[..., None, :]).max()

    scale = np.abs(a).max() * a.shape[-1] * eps
    assert residual(L, V) <= 4 * max(residual(t_L, t_V), scale)
    norms = np.linalg.norm(V.astype(np.complex128), axis=-2)
    t_error = np.abs(np.linalg.norm(t_V.astype(np.complex128), axis=-2) - 1).max()
    assert np.abs(norms - 1).max() <= 4 * max(t_error, a.shape[-1] * eps)


def test_real_input_with_real_eigenvalues_gives_real_valued_vectors():
    q = np.linalg.qr(randn(4, 4, dtype="float64", seed=2))[0]
    a = q @ np.diag([1.0, -2.0, 3.0, 5.0]) @ np.linalg.inv(q)
    L, V = LA.eig(munet.tensor(a))
    assert L.dtype is munet.complex128 and not np.any(L.imag.numpy()) and not np.any(V.imag.numpy())
    np.testing.assert_allclose(np.sort(L.real.numpy()), [-2.0, 1.0, 3.0, 5.0], rtol=1e-12)


@pytest.mark.parametrize("shape", [(0, 3, 3), (2, 0, 0), (0, 0)])
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_size_zero(shape, dtype):
    a = np.zeros(shape, dtype)
    L, V = LA.eig(munet.from_numpy(a))
    t_L, t_V = torch_eig(a)
    assert (tuple(L.shape), tuple(V.shape)) == (t_L.shape, t_V.shape)
    assert L.dtype.name == str(t_L.dtype) and V.dtype.name == str(t_V.dtype)
    assert tuple(LA.eigvals(munet.from_numpy(a)).shape) == t_L.shape


def test_out():
    a = general(2, 3, 3, seed=5)
    L_out, V_out = munet.empty(2, 3, dtype=munet.complex128), munet.empty(2, 3, 3, dtype=munet.complex128)
    L, V = LA.eig(munet.tensor(a), out=(L_out, V_out))
    assert L is L_out and V is V_out
    want_L, want_V = LA.eig(munet.tensor(a))
    np.testing.assert_array_equal(L_out.numpy(), want_L.numpy())
    np.testing.assert_array_equal(V_out.numpy(), want_V.numpy())
    values = munet.empty(2, 3, dtype=munet.complex128)
    assert LA.eigvals(munet.tensor(a), out=values) is values
    np.testing.assert_array_equal(values.numpy(), want_L.numpy())


def test_out_of_a_real_dtype_raises_as_torch():
    a = general(3, 3, dtype="float32", seed=6)
    with pytest.raises(RuntimeError, match="Expected eigenvalues to be safely castable from ComplexFloat"):
        torch.linalg.eig(torch.from_numpy(a), out=(torch.empty(3), torch.empty(3, 3)))
    with pytest.raises(RuntimeError, match="linalg.eig: Expected eigenvalues to be safely castable from complex64"):
        LA.eig(munet.tensor(a), out=(munet.empty(3), munet.empty(3, 3)))
    with pytest.raises(RuntimeError, match="linalg.eigvals: Expected eigenvalues to be safely castable"):
        LA.eigvals(munet.tensor(a), out=munet.empty(3))


@pytest.mark.parametrize(
    "make, message, same_as_torch",
    [
        (lambda m: m.ones(2, 3), "{op}: A must be batches of square matrices, but they are 2 by 3 matrices", True),
        (lambda m: m.ones(2, 3, dtype=m.complex64), "{op}: A must be batches of square matrices", True),
        (lambda m: m.ones(3), "{op}: The input tensor A must have at least 2 dimensions.", True),
        # torch: "Unknown Complex ScalarType for Long" and "\"linalg_eig_out_cpu\" not implemented for 'Half'"
        (lambda m: m.ones(3, 3, dtype=m.int64), "{op}: Expected a floating point or complex tensor as input", False),
        (lambda m: m.ones(3, 3, dtype=m.float16), "{op}: Low precision dtypes not supported", False),
    ],
)
@pytest.mark.parametrize("fn", ["eig", "eigvals"])
def test_bad_input_raises_as_torch(make, message, same_as_torch, fn):
    message = message.format(op=f"linalg.{fn}")
    with pytest.raises(RuntimeError, match=message if same_as_torch else None):
        getattr(torch.linalg, fn)(make(torch))
    with pytest.raises(RuntimeError, match=message):
        getattr(LA, fn)(make(munet))


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_input_raises_as_torch(value):
    """torch.linalg.eigvals does not check (MKL crashes on inf), MuNet's does as eig."""
    with pytest.raises(RuntimeError, match="linalg.eig: input tensor should not contain infs or NaNs."):
        torch.linalg.eig(torch.full((3, 3), value))
    for fn in (LA.eig, LA.eigvals):
        with pytest.raises(RuntimeError, match="linalg.eig: input tensor should not contain infs or NaNs."):
            fn(munet.full((3, 3), value))


def test_compile_refuses_complex_results():
    with pytest.raises(RuntimeError, match="munet.compile does not support complex64"):
        munet.compile(lambda x: LA.eigvals(x).real)(munet.eye(3))


# gradients --------------------------------------------------------------------------------------------


def invariant_loss(mod, L, V, weights):  # noqa: N803 - the math's names
    """A real loss unchanged by reordering the eigenpairs and by the eigenvectors' phases."""
    Lr, Li = mod.real(L), mod.imag(L)
    loss = (0.5 * Lr**2 + Li**2 + 0.1 * mod.real(L**3)).sum()
    if V is None:
        return loss
    w = mod.tensor(weights).to(Lr.dtype)
    magnitude2 = mod.real(V) ** 2 + mod.imag(V) ** 2
    return loss + (magnitude2 * (1 + 0.1 * Lr.unsqueeze(-2)) * w.unsqueeze(-1)).sum()


def eig_loss(mod, A, weights, vectors: bool = True):  # noqa: N803 - the math's names
    if not vectors:
        return invariant_loss(mod, mod.linalg.eigvals(A), None, weights)
    L, V = mod.linalg.eig(A)
    return invariant_loss(mod, L, V, weights)


def gradients(mod, a: np.ndarray, weights, vectors: bool = True) -> np.ndarray:
    A = (munet.from_numpy(a) if mod is munet else torch.from_numpy(np.array(a))).requires_grad_()  # strides kept
    (g,) = mod.autograd.grad(eig_loss(mod, A, weights, vectors), [A])
    return to_numpy(g.resolve_conj())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 5), (1, 1)])
@pytest.mark.parametrize("vectors", [True, False])
def test_gradient_matches_torch(dtype, shape, vectors):
    a = general(*shape, dtype=dtype, seed=10 + shape[-1])
    weights = randn(shape[-1], dtype="float64", seed=11)
    got, want = gradients(munet, a, weights, vectors), gradients(torch, a, weights, vectors)
    assert got.dtype == want.dtype == a.dtype
    wide = reference_input(a)
    reference = None if wide is None else gradients(torch, wide, weights, vectors)
    assert_matches(got, want, reference, "gradient")


def test_gradient_of_a_strided_input():
    a = noncontiguous(general(2, 4, 4, seed=12))
    weights = randn(4, dtype="float64", seed=13)
    assert_matches(gradients(munet, a, weights), gradients(torch, a, weights), None, "gradient")


def test_gradcheck():
    """Finite differences in float64 of the invariant loss (munet alone)."""
    a = general(4, 4, seed=14)
    weights = randn(4, dtype="float64", seed=15)
    analytic = gradients(munet, a, weights)
    numeric = np.zeros_like(a)
    eps = 1e-6
    for i in np.ndindex(a.shape):
        plus, minus = a.copy(), a.copy()
        plus[i] += eps
        minus[i] -= eps
        f = [float(eig_loss(munet, munet.tensor(x), weights)) for x in (plus, minus)]
        numeric[i] = (f[0] - f[1]) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_second_order_gradient_matches_torch(dtype):
    """The rule is public ops: the gradient of ``sum(r * grad)`` matches torch's double backward."""
    a = general(4, 4, dtype=dtype, seed=16)
    weights = randn(4, dtype="float64", seed=17)
    r = randn(4, 4, dtype="float64", seed=18)
    results = []
    for mod in (munet, torch):
        A = mod.tensor(a, requires_grad=True)
        (g,) = mod.autograd.grad(eig_loss(mod, A, weights), [A], create_graph=True)
        parts_of_g = mod.view_as_real(g) if g.is_complex() else g
        weight = mod.tensor(r[..., None] * [1.0, 0.5] if g.is_complex() else r)
        (gg,) = mod.autograd.grad((parts_of_g * weight).sum(), [A])
        results.append(to_numpy(gg.resolve_conj()))
    np.testing.assert_allclose(*results, rtol=1e-7, atol=1e-9)


PHASE_ERROR = (
    r"linalg_eig_backward: The eigenvectors in the complex case are specified up to multiplication by "
    r"e\^\{i phi\}\. The specified loss function depends on this quantity, so it is ill-defined\."
)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_phase_dependent_loss_raises_as_torch(dtype):
    a = general(4, 4, dtype=dtype, seed=19)
    for mod in (torch, munet):
        A = mod.tensor(a, requires_grad=True)
        loss = mod.real(mod.linalg.eig(A)[1]).sum()
        with pytest.raises(RuntimeError, match=PHASE_ERROR):
            loss.backward()


@pytest.mark.parametrize("fn", [LA.cholesky, LA.qr, LA.svd, LA.eigh, LA.inv, lambda a: LA.solve(a, a)])
def test_the_other_factorizations_refuse_complex_input_clearly(fn):
    """Named by the function (check_matrix) or by its op (the dispatcher's complex check)."""
    with pytest.raises(
        (RuntimeError, TypeError), match="(complex64 input is not supported|not supported for complex64)"
    ):
        fn(munet.eye(3, dtype=munet.float32).cfloat())

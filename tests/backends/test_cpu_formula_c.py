"""The eager formula kernels compiled as C (munet/backends/cpu/compiled_formula.py, codegen/c_formula.py).

Each formula op's C kernel is checked against the NumPy rendering (the meaning it must keep) on
special values (NaN, infinities, signed zeros, huge and tiny numbers) and random ones: bit for bit
for the ops that are IEEE arithmetic, comparisons and selections, within 2 ulp (and the same NaN
positions and zero signs) for the C library's transcendental functions. Contiguous, broadcast,
transposed and sliced operands, the in-place and ``out=`` paths, float16/bfloat16, and the
fallbacks (no compiler, integer formulas, small tensors, overlapping outputs) are covered.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import munet
from munet.backends.cpu import compiled_formula
from munet.backends.cpu.kernels_formula import _RENDERED
from munet.compiler.codegen import build
from tests.cancellation import TERM_ULPS, term_scale

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler")

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e-38, -3e38, 7.0, 1e-45, 88.5, -104.0]
ATTRS = {
    "elu": {"alpha": 1.5, "scale": 1.0, "input_scale": 1.0},
    "gelu": {"approximate": "none"},
    "gelu_backward": {"approximate": "none"},
    "hardtanh": {"min_val": -1.0, "max_val": 0.75},
    "hardtanh_backward": {"min_val": -1.0, "max_val": 0.75},
    "leaky_relu": {"negative_slope": 0.01},
    "leaky_relu_backward": {"negative_slope": 0.01},
    "nan_to_num": {"nan": 0.0, "posinf": 1e3, "neginf": -1e3},
    "round": {"decimals": 2},
    "softplus": {"beta": 2.0, "threshold": 20.0},
    "threshold": {"threshold": 0.5, "value": -1.0},
    "threshold_backward": {"threshold": 0.5},
}
# ops the C library computes (or c.py's own exp/erf): within a few ulp of NumPy's, not bit for bit
APPROXIMATE = {"acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cos", "cosh", "elu", "erf", "erfc",
               "erfinv", "exp", "exp2", "expm1", "gelu", "gelu_backward", "hypot", "log", "log10", "log1p", "log2",
               "pow", "sigmoid", "sin", "sinh", "softplus", "tan", "tanh", "xlogy"}  # fmt: skip
INTEGER_ONLY = {"bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor"}
BOOL_ONLY = {"logical_and", "logical_not", "logical_or", "logical_xor"}
FLOAT_OPS = sorted(set(_RENDERED) - INTEGER_ONLY - BOOL_ONLY)


@pytest.fixture
def always_c(monkeypatch, prepared):
    """Every size runs the C kernels, also where NumPy is faster (the NumPy rendering is the
    reference: call ``numpy_path``)."""
    monkeypatch.setattr(compiled_formula, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(compiled_formula, "ONLY_FASTER", False)
    monkeypatch.setitem(compiled_formula._state, "enabled", True)


@pytest.fixture(scope="module")
def prepared():
    """The float32 kernels of every op, compiled in one compiler run (``compiled_formula.prepare``):
    one kernel at a time costs about 0.2 s each (0.9 s on a loaded machine)."""
    before = compiled_formula.ONLY_FASTER
    compiled_formula.ONLY_FASTER = False
    try:
        requests = [(_RENDERED[name], _operands(name, np.float32, (5, 19)), ATTRS.get(name, {})) for name in FLOAT_OPS]
        count = compiled_formula.prepare(requests)
    finally:
        compiled_formula.ONLY_FASTER = before
    return count


def test_prepare_builds_every_kernel_in_one_library(prepared):
    for name in FLOAT_OPS:
        assert any(_kernel(name).c_kernels.values()), f"{name}: prepare built no kernel"


def numpy_path(fn, *args, **kwargs):
    state = compiled_formula._state["enabled"]
    compiled_formula._state["enabled"] = False
    try:
        return fn(*args, **kwargs)
    finally:
        compiled_formula._state["enabled"] = state


def _values(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 3).astype(dtype)
    flat = a.reshape(-1)
    with np.errstate(over="ignore"):
        special = np.array(SPECIAL).astype(dtype)
    flat[: min(flat.size, special.size)] = special[: flat.size]
    return a


def _operands(name, dtype, shape):
    op = _RENDERED[name]
    args = []
    for i, _ in enumerate(munet.ops._registry.OPS[name].inputs):
        if i in op.conditions:
            args.append(np.random.default_rng(i).random(shape) < 0.5)
        elif name in ("div_floor", "fmod", "remainder") and i == 1:
            args.append(_values(dtype, shape, 7) + 0.25)
        else:
            args.append(_values(dtype, shape, i).reshape(shape))
    if name in ("erfinv", "acos", "asin", "atanh"):
        args[0] = np.tanh(args[0].astype(np.float64)).astype(dtype)
    return args


def _assert_matches(got, want, name, args=(), attrs=None):
    """``args`` and ``attrs``: the call's, for a formula whose terms cancel (``tests/cancellation.py``)."""
    if name in ("erf", "erfc", "erfinv") and want.dtype == np.float64 and got.dtype != want.dtype:
        want = want.astype(got.dtype)  # the NumPy rendering leaves their float64 value to the caller to round
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    if got.dtype == np.bool_ or name not in APPROXIMATE:
        same = got.tobytes() == want.tobytes() or (
            np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want))
        )
        assert same, (
            f"{name}: C differs from NumPy at {np.argwhere(~((got == want) | (got != got) & (want != want)))[:5]}"
        )
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), f"{name}: NaN positions differ"
    finite = np.isfinite(w)
    assert np.array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)]), f"{name}: infinities differ"
    ulp = np.spacing(np.abs(want[finite])).astype(np.float64)
    tiny = np.finfo(want.dtype).tiny
    err = np.abs(g[finite] - w[finite])
    # float64 erf/erfc/erfinv: the NumPy rendering's series is within ~1e-15 relative (8 ulp seen), the C library's
    # correctly rounded or within an ulp
    ulps = 32 if name in ("erf", "erfc", "erfinv") and want.dtype == np.float64 else 2
    bound = ulps * np.maximum(ulp, tiny)
    scale = term_scale(name, args, attrs or {})
    if scale is not None:  # float16/bfloat16 formulas compute in float32
        eps = np.finfo(np.float64 if want.dtype == np.float64 else np.float32).eps / 2
        bound = bound + TERM_ULPS * eps * np.broadcast_to(scale, want.shape)[finite]
    assert np.all(err <= bound), f"{name}: {err.max()} beyond {ulps} ulp"


def _kernel(name):
    return _RENDERED[name]


@pytest.mark.parametrize("name", FLOAT_OPS)
def test_float32_contiguous_matches_the_numpy_rendering(name, always_c):
    args = _operands(name, np.float32, (5, 19))
    attrs = ATTRS.get(name, {})
    want = numpy_path(_kernel(name).fresh, *args, **attrs)
    got = _kernel(name).fresh(*args, **attrs)
    _assert_matches(got, want, name, args, attrs)
    assert any(_kernel(name).c_kernels.values()), f"{name}: no C kernel was built"


@pytest.mark.parametrize("name", ["add", "mul", "sigmoid", "where", "clamp", "lerp", "remainder", "leaky_relu",
                                  "threshold_backward", "erf", "nan_to_num", "div_floor", "maximum"])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16])
def test_other_float_dtypes_match_the_numpy_rendering(name, dtype, always_c):
    args = _operands(name, dtype, (7, 13))
    attrs = ATTRS.get(name, {})
    want = numpy_path(_kernel(name).fresh, *args, **attrs).astype(dtype if name not in ("where",) else args[1].dtype)
    got = _kernel(name).fresh(*args, **attrs).astype(want.dtype)
    _assert_matches(got, want, name)


@pytest.mark.parametrize("name", ["add", "sigmoid", "where", "clamp", "lerp", "pow", "lt"])
def test_broadcast_transposed_and_sliced_operands_are_read_in_place(name, always_c):
    """Operands of the (30, 40) result: a transposed view, a sliced column broadcast along the last
    dim, a strided row broadcast along the first."""
    big = _operands(name, np.float32, (40, 80))
    views = [big[0][:, :30].T, big[-1][:30, 3:4], big[1][0, ::2] if len(big) > 2 else None]
    args = views[: len(big)] if len(big) > 1 else views[:1]
    if name == "where":
        args[0] = big[0][:30, 5:6]
    want = numpy_path(_kernel(name).fresh, *args)
    got = _kernel(name).fresh(*args)
    assert got.shape == (30, 40)
    _assert_matches(got, want, name)
    assert any(fn and "s" in layout and not flat for (_, _, layout, flat), fn in _kernel(name).c_kernels.items())


@pytest.mark.parametrize("name", ["add", "sigmoid", "leaky_relu"])
def test_in_place_and_out_paths_write_the_same_values(name, always_c):
    args = _operands(name, np.float32, (33, 17))
    attrs = ATTRS.get(name, {})
    want = numpy_path(_kernel(name).fresh, *args, **attrs)
    out = np.full_like(want, 123.0)
    _kernel(name).into(out, *args, **attrs)
    _assert_matches(out, want, name)
    target = args[0].copy()
    view = target.T  # in place through a transposed view: written where it lies
    _kernel(name).inplace(view, *[a.T for a in args[1:]], **attrs)
    _assert_matches(target, want, name)


def test_python_numbers_take_the_operands_dtype(always_c):
    x = _values(np.float32, (10, 10), 0)
    for number in (0.1, 1e300, -3, True):
        want = numpy_path(_kernel("mul").fresh, x, number)
        _assert_matches(_kernel("mul").fresh(x, number), want, "mul")
    h = _values(np.float16, (10, 10), 1)
    want = numpy_path(_kernel("add").fresh, h, 0.1).astype(np.float16)
    _assert_matches(_kernel("add").fresh(h, 0.1), want, "add")


def test_an_overlapping_output_falls_back_to_numpy(always_c):
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    want = x + x.T
    _kernel("add").inplace(x, x.T)  # NumPy buffers the overlap; C would read values already written
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("name", ["add", "sin"])
def test_a_call_under_the_defaults_leaves_no_choice_for_later_calls(name, monkeypatch):
    """What ``launch`` caches per formula is what its C kernel is, not whether ``ONLY_FASTER`` let it run:
    after NumPy served a call under the defaults (``add``: one ufunc call on one thread; ``sin``: C's
    scalar ``sinf`` loses), C serves the same call once ``ONLY_FASTER`` is off."""
    formula = _kernel(name)
    monkeypatch.setattr(formula, "c_expressions", {})
    monkeypatch.setitem(compiled_formula._state, "enabled", True)
    monkeypatch.setattr(compiled_formula, "MIN_ELEMENTS", 0)
    args = _operands(name, np.float32, (30, 40))
    assert compiled_formula.launch(formula, args, {}) is None
    monkeypatch.setattr(compiled_formula, "ONLY_FASTER", False)
    got = compiled_formula.launch(formula, args, {})
    assert got is not None
    _assert_matches(got, numpy_path(formula.fresh, *args), name)


def test_integer_formulas_and_small_tensors_run_numpy(monkeypatch):
    monkeypatch.setitem(compiled_formula._state, "enabled", True)
    monkeypatch.setattr(compiled_formula, "MIN_ELEMENTS", 0)
    assert compiled_formula.launch(_kernel("add"), [np.arange(5), np.arange(5)], {}) is None
    monkeypatch.setattr(compiled_formula, "MIN_ELEMENTS", 100)
    assert compiled_formula.launch(_kernel("sigmoid"), [np.ones(99, np.float32)], {}) is None
    assert compiled_formula.launch(_kernel("sigmoid"), [np.ones(100, np.float32)], {}) is not None


def test_without_a_compiler_numpy_serves_every_call(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setitem(compiled_formula._state, "enabled", None)  # probes again: finds no compiler
    monkeypatch.setattr(compiled_formula, "MIN_ELEMENTS", 0)
    x = _values(np.float32, (9, 9), 3)
    assert compiled_formula.launch(_kernel("sigmoid"), [x], {}) is None
    want = numpy_path(_kernel("sigmoid").fresh, x)
    np.testing.assert_array_equal(_kernel("sigmoid").fresh(x), want)


def test_two_threads_give_the_single_thread_bits(always_c):
    x = _values(np.float32, (300, 1000), 4)
    before = munet.get_num_threads()
    try:
        munet.set_num_threads(1)
        one = _kernel("sigmoid").fresh(x)
        munet.set_num_threads(2)
        two = _kernel("sigmoid").fresh(x)
    finally:
        munet.set_num_threads(before)
    np.testing.assert_array_equal(one, two)

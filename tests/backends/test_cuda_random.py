"""The cuda Philox kernels (munet/backends/cuda/kernels_random.py) give the CPU backend's streams: run
under the CPU emulation header (bit for bit, or within the float64 bound their libm calls allow),
compiled by NVRTC for sm_80 and sm_90; then every random op through the eager path on fake cuda
devices (``fake_gpus``: the kernel table, NVRTC, the launcher, the emulated module loader), and the
same cases on a GPU (marker ``cuda``), against the cpu backend after the same seed."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import munet
from munet.backends.cpu import kernels_random as cpu
from munet.backends.cuda import emulation, nvrtc
from munet.backends.cuda import kernels_random as R
from tests.backends import fake_cupy

SOURCES = [R.render_philox_words(), *(R.render_uniform(d) for d in ("float32", "float64", "float16", "bfloat16")),
           *(R.render_randint(d) for d in ("int64", "int32", "int8")),
           *(R.render_normal(d) for d in ("float32", "float64", "bfloat16")),
           *(R.render_exponential(d) for d in ("float64", "float32", "float16", "bfloat16")),
           *(R.render_bernoulli(d) for d in ("float64", "float32", "float16")),
           R.render_normal_tensor("float64", 3, True, True), R.render_normal_tensor("float32", 3, True, False),
           R.render_normal_tensor("float16", 2, False, True), R.render_normal_tensor("bfloat16", 0, True, True),
           *(R.render_multinomial_rows(d) for d in ("float64", "float32", "float16")),
           R.render_multinomial_draw(), R.render_race_keys("float64"), R.render_race_keys("float32"),
           R.render_sort_keys()]  # fmt: skip
# a counter whose low word is about to wrap, so the carry into the next words is exercised
KEY, COUNTER = 0x0123456789ABCDEF_FEDCBA9876543210, (5 << 64) | (2**64 - 3)


@pytest.fixture(scope="module")
def emulator():
    try:
        emulation.find_cxx()
    except emulation.EmulationUnavailableError as error:  # pragma: no cover - CI has g++
        pytest.skip(str(error))
    return emulation.Emulator(SOURCES)


class _Generator:
    """The CPU kernels' view of a generator: fixed (key, counter) blocks."""

    def philox_advance(self, blocks):
        return KEY, COUNTER


def _run(emulator, src, n, out, **scalars):
    args = [v for _, v in src.arguments(KEY, COUNTER, n, out, **scalars)]
    emulator.run(src, src.blocks(n), args)


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_words_are_numpys_philox_stream(emulator, n):
    out = np.zeros(n, np.uint64)
    _run(emulator, SOURCES[0], n, out)
    np.testing.assert_array_equal(out, cpu.random_words(_Generator(), n))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_uniform_is_the_cpu_kernels_bits(emulator, dtype):
    low, high = -0.3, 2.1
    src = R.render_uniform(dtype)
    out = np.zeros((5, 41), ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    _run(emulator, src, out.size, out, scale=high - low, low=low)
    want = cpu.uniform(shape=out.shape, dtype=getattr(munet, dtype), low=low, high=high, generator=_Generator())
    assert out.tobytes() == want.tobytes()


@pytest.mark.parametrize(("dtype", "low", "high"), [("int64", -(2**40), 2**41), ("int32", -5, 7), ("int8", 0, 300)])
def test_randint_is_the_cpu_kernels_values(emulator, dtype, low, high):
    src = R.render_randint(dtype)
    out = np.zeros(333, dtype)
    _run(emulator, src, out.size, out, span=high - low, low=low % 2**64)
    want = cpu.randint(shape=out.shape, dtype=getattr(munet, dtype), low=low, high=high, generator=_Generator())
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize(("dtype", "n"), [("float64", 1001), ("float32", 64), ("bfloat16", 9)])
def test_normal_is_the_cpu_kernels_box_muller(emulator, dtype, n):
    """The same words and formula; log/cos/sin from another math library: float64 to 1e-14 (|z| < 9)."""
    src = R.render_normal(dtype)
    out = np.zeros(n, ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    emulator.run(src, n, [v for _, v in src.arguments(KEY, COUNTER, n, out, std=2.0, mean=0.5)])
    want = cpu.normal(shape=(n,), dtype=getattr(munet, dtype), mean=0.5, std=2.0, generator=_Generator())
    _agrees(out, want, dtype, 1e-14, 1e-14)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_random_kernels_compile(arch):
    assert nvrtc.compile_source(nvrtc.combine(SOURCES), arch).data[:4] == b"\x7fELF"


def _np_dtype(dtype: str):
    return ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)


def _agrees(got, want, dtype: str, float64_rtol: float, atol: float = 0.0) -> None:
    """float64 within ``float64_rtol`` (the device's libm against NumPy's); a narrower dtype exactly: its
    value is the rounding of a double within a few float64 ulps of the CPU's, which differs only when
    that double lies within those ulps of a rounding boundary of the dtype (probability below 2**-25
    per value, so none of the few thousand values here)."""
    got, want = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
    if dtype == "float64":
        np.testing.assert_allclose(got, want, rtol=float64_rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


def _u53(n: int) -> np.ndarray:
    """The CPU's float64 uniforms of the first ``n`` words at KEY/COUNTER."""
    return cpu.uniform_open(cpu.random_words(_Generator(), n), np.float64)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_exponential_is_the_cpu_kernels_to_an_ulp(emulator, dtype):
    """-log1p(-u) / lambd in double from the same 53-bit uniforms: CUDA's log1p and NumPy's are within an
    ulp each and the division rounds once, so float64 agrees to 4 ulps (2**-50 relative)."""
    src = R.render_exponential(dtype)
    out = np.zeros((7, 143), _np_dtype(dtype))
    _run(emulator, src, out.size, out, lambd=1.75)
    want = cpu.exponential(shape=out.shape, dtype=getattr(munet, dtype), lambd=1.75, generator=_Generator())
    _agrees(out, want, dtype, 2.0**-50)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_bernoulli_compares_the_53_bit_uniform_with_p_exactly(emulator, dtype):
    """p at the uniform itself (gives 0), one float64 step above it (1), the uniform rounded to the dtype
    (either side), 0 and 1: the result is the CPU's everywhere."""
    n = 400
    u = _u53(n)
    p = np.random.default_rng(4).random(n)
    p[0::5], p[1::5] = u[0::5], np.nextafter(u[1::5], 2.0)
    p[2::5] = u[2::5].astype(dtype)  # rounded: above or below u
    p[3], p[4], p[8] = 0.0, 1.0, 1.0
    p = p.astype(dtype)
    src = R.render_bernoulli(dtype)
    out = np.full(n, 7, dtype)
    fault = np.zeros(3, np.uint64)
    _run(emulator, src, n, out, p=p, fault=fault, site=5)
    want = cpu.bernoulli(p, generator=_Generator())
    np.testing.assert_array_equal(out, want)
    assert fault.tolist() == [0, 0, 0]
    if dtype == "float64":  # the constructed cases are exact only in float64
        assert (out[0::5] == 0).all() and (out[1::5] == 1).all()


def test_bernoulli_records_the_first_probability_outside_0_1(emulator):
    p = np.full(20, 0.5, np.float32)
    p[6], p[9], p[13] = 1.5, np.nan, -0.25
    fault = np.zeros(3, np.uint64)
    _run(emulator, R.render_bernoulli("float32"), p.size, np.zeros_like(p), p=p, fault=fault, site=9)
    assert fault.tolist() == [9, 0, 6]  # (site, value, flat index) of the first failing element


def _broadcast_strides(a: np.ndarray, shape) -> list:
    return [s // a.itemsize for s in np.broadcast_to(a, shape).strides]


@pytest.mark.parametrize(
    ("dtype", "mean_shape", "std_shape"),
    [("float64", (3, 1, 5), (4, 1)), ("float32", (2, 3, 4), None), ("float16", None, (6, 7)), ("bfloat16", (), ())],
)
def test_normal_tensor_is_the_cpu_kernels_to_an_ulp(emulator, dtype, mean_shape, std_shape):
    """Broadcast tensor (or number) mean and std: z from the same Box-Muller (float64 within 1e-14,
    as render_normal's test), rounded to float32 or kept in double, times std plus mean in that dtype
    as the CPU's NumPy arithmetic (|result| < 16 here: float64 to 1e-14 * 16)."""
    rng = np.random.default_rng(5)
    # 0-dim ones as arrays: NumPy's arithmetic would give scalars
    mean = np.array(rng.standard_normal(mean_shape) * 3, _np_dtype(dtype)) if mean_shape is not None else -1.25
    std = np.array(rng.random(std_shape) * 2, _np_dtype(dtype)) if std_shape is not None else 2.5
    shape = np.broadcast_shapes(*(np.shape(v) for v in (mean, std)))
    src = R.render_normal_tensor(dtype, len(shape), mean_shape is not None, std_shape is not None)
    out = np.zeros(shape, _np_dtype(dtype))
    geometry = {f"size{d}": s for d, s in enumerate(shape)}
    for name, value in (("mean", mean), ("std", std)):
        strides = _broadcast_strides(value, shape) if isinstance(value, np.ndarray) else [0] * len(shape)
        geometry.update({f"{name[0]}s{d}": s for d, s in enumerate(strides)})
    fault = np.zeros(3, np.uint64)
    args = src.arguments(KEY, COUNTER, out.size, out, fault=fault, site=3, mean=mean, std=std, **geometry)
    emulator.run(src, out.size, [v for _, v in args])
    want = cpu.normal_tensor(mean, std, generator=_Generator())
    assert want.dtype == out.dtype and want.shape == out.shape
    _agrees(out, want, dtype, 1.6e-13, 1.6e-13)
    assert fault.tolist() == [0, 0, 0]


def test_normal_tensor_records_a_negative_or_nan_std(emulator):
    src = R.render_normal_tensor("float16", 2, False, True)
    std = np.ones((6, 7), np.float16)
    std[2, 3], std[4, 0] = -1.0, np.nan
    fault = np.zeros(3, np.uint64)
    geometry = {"size0": 6, "size1": 7, "ms0": 0, "ms1": 0, "ss0": 7, "ss1": 1}
    args = src.arguments(KEY, COUNTER, 42, np.zeros((6, 7), np.float16), fault=fault, site=4, mean=0.0, std=std,
                         **geometry)  # fmt: skip
    emulator.run(src, 42, [v for _, v in args])
    assert fault.tolist() == [4, 0, 17]


def _rows(emulator, probs, num_samples=0, with_cdf=True):
    rows, k = probs.shape
    src = R.render_multinomial_rows(str(probs.dtype))
    cdf = np.full((rows, k), -1.0) if with_cdf else 0
    fault = np.zeros(3, np.uint64)
    emulator.run(src, rows, [probs, rows, k, num_samples, cdf, fault, 11, 12, 13])
    return cdf, fault.tolist()


@pytest.mark.parametrize("k", [1, 5, 8, 100, 129, 300, 1000, 3001])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_multinomial_cdf_is_numpys_bit_for_bit(emulator, k, dtype):
    """Row sums in NumPy's pairwise order (a plain running sum differs in the last bit for most of
    these rows), then p / total and their running sum, the last set to 1.0: equal to the CPU's."""
    probs = (np.random.default_rng(k).random((3, k)) ** 3).astype(dtype)
    probs[1, 1::3] = 0.0
    cdf, fault = _rows(emulator, probs)
    rows = probs.astype(np.float64)
    want = np.cumsum(rows / rows.sum(axis=1)[:, None], axis=1)
    want[:, -1] = 1.0
    np.testing.assert_array_equal(cdf, want)
    assert fault == [0, 0, 0]


@pytest.mark.parametrize(
    ("row", "samples", "fault"),
    [((0.5, np.nan, 1.0), 0, 11), ((0.5, -0.1, 1.0), 0, 11), ((0.5, np.inf, 1.0), 0, 11), ((0.0, 0.0, 0.0), 0, 12),
     ((0.0, 2.0, 0.0), 2, 13), ((0.0, 2.0, 1.0), 2, 0)],
)  # fmt: skip
def test_multinomial_rows_record_the_cpus_checks(emulator, row, samples, fault):
    probs = np.array([[0.2, 0.3, 0.5], row])
    _, got = _rows(emulator, probs, samples, with_cdf=False)
    assert got == ([fault, 0, 1] if fault else [0, 0, 0])


@pytest.mark.parametrize(("shape", "samples"), [((1, 4), 1000), ((5, 3000), 7), ((9, 1), 3)])
def test_multinomial_with_replacement_is_the_cpu_kernels(emulator, shape, samples):
    probs = np.random.default_rng(6).random(shape).astype(np.float32)
    probs[:, 1::4] = 0.0
    probs[:, 0] += 0.1  # no row sums to 0
    cdf, _ = _rows(emulator, probs)
    src = R.render_multinomial_draw()
    out = np.full((shape[0], samples), -1, np.int64)
    n = out.size
    _run(emulator, src, n, out, cdf=cdf, num_samples=samples, k=shape[1])
    want = cpu.multinomial(probs, num_samples=samples, replacement=True, generator=_Generator())
    np.testing.assert_array_equal(out, want)
    assert (probs[np.arange(shape[0])[:, None], out] > 0).all()  # no category of probability 0


def test_race_keys_are_the_cpus_to_an_ulp(emulator):
    probs = np.random.default_rng(7).random((6, 50))
    probs[:, ::7] = 0.0
    keys = np.zeros_like(probs)
    _run(emulator, R.render_race_keys("float64"), probs.size, keys, probs=probs)
    with np.errstate(divide="ignore"):
        want = -np.log1p(-_u53(probs.size).reshape(probs.shape)) / probs
    assert np.isinf(keys[:, ::7]).all()
    np.testing.assert_allclose(keys, want, rtol=2.0**-50, atol=0)


@pytest.mark.parametrize("n", [1, 5, 1000])
def test_randperm_keys_sort_as_the_cpus_words(emulator, n):
    keys = np.zeros(n, np.int64)
    _run(emulator, R.render_sort_keys(), n, keys)
    words = cpu.random_words(_Generator(), n)
    np.testing.assert_array_equal(keys.view(np.uint64) ^ np.uint64(1 << 63), words)
    want = cpu.randperm(n=n, dtype=munet.int64, generator=_Generator())
    np.testing.assert_array_equal(np.argsort(keys, kind="stable"), want)


# every random op through the eager path: (device -> tensor, float64 tolerance or None for exact; a
# narrower dtype is always compared exactly, see _agrees) ---------------------------------------------

_RNG = np.random.default_rng(8)
_P = np.concatenate([_RNG.random(40), [0.0, 1.0, 0.0, 1.0]]).reshape(4, 11)
_PROBS = _RNG.random((5, 9)) ** 2
_PROBS[:, ::4] = 0.0


def _on(device, values, dtype=munet.float32):
    return munet.tensor(np.asarray(values)).to(dtype).to(device)


EAGER = {
    "exponential_ float32": (lambda d: munet.empty(3, 7, device=d).exponential_(0.5), None),
    "exponential_ float64": (lambda d: munet.empty(33, dtype=munet.float64, device=d).exponential_(), 2.0**-50),
    "exponential_ float16": (lambda d: munet.empty(5, dtype=munet.float16, device=d).exponential_(3.0), None),
    "exponential_ bfloat16": (lambda d: munet.empty(9, dtype=munet.bfloat16, device=d).exponential_(), None),
    "exponential_ size 0": (lambda d: munet.empty(0, 4, device=d).exponential_(), None),
    "bernoulli float32": (lambda d: munet.bernoulli(_on(d, _P)), None),
    "bernoulli float64 transposed": (lambda d: munet.bernoulli(_on(d, _P, munet.float64).t()), None),
    "bernoulli float16, p=": (lambda d: munet.bernoulli(munet.empty(6, 2, dtype=munet.float16, device=d), 0.3), None),
    "bernoulli_": (lambda d: munet.empty(3, 5, device=d).bernoulli_(0.75), None),
    "bernoulli size 0": (lambda d: munet.bernoulli(munet.empty(2, 0, device=d)), None),
    "bernoulli bfloat16": (lambda d: munet.bernoulli(_on(d, _P, munet.bfloat16)), None),
    "bernoulli_ int64, expanded p": (lambda d: munet.empty(3, 11, dtype=munet.int64, device=d).bernoulli_(_on(d, _P[0])), None),
    "normal tensor, tensor (broadcast)": (lambda d: munet.normal(_on(d, _P[:3, :1]), _on(d, _P[0]) + 0.5), None),
    "normal float64 tensor, number": (lambda d: munet.normal(_on(d, _P, munet.float64), 0.25), 1e-14),
    "normal number, float16 tensor": (lambda d: munet.normal(2.0, _on(d, _P, munet.float16)), None),
    "normal 0-dim": (lambda d: munet.normal(_on(d, 1.5), _on(d, 2.0)), None),
    "normal size 0": (lambda d: munet.normal(munet.zeros(0, 3, device=d), 1.0), None),
    "randperm": (lambda d: munet.randperm(300, device=d), None),
    "randperm past the merge sort's 2048": (lambda d: munet.randperm(5000, device=d), None),
    "randperm int32": (lambda d: munet.randperm(17, dtype=munet.int32, device=d), None),
    "randperm float32": (lambda d: munet.randperm(9, dtype=munet.float32, device=d), None),
    "randperm 0 and 1": (lambda d: munet.cat([munet.randperm(0, device=d), munet.randperm(1, device=d)]), None),
    "multinomial with replacement, 1-d": (lambda d: munet.multinomial(_on(d, _PROBS[1]), 500, True), None),
    "multinomial with replacement, float64": (lambda d: munet.multinomial(_on(d, _PROBS, munet.float64), 6, True), None),
    "multinomial with replacement, transposed": (lambda d: munet.multinomial(_on(d, _PROBS[:, 1:4].T), 5, True), None),
    "multinomial without replacement": (lambda d: munet.multinomial(_on(d, _PROBS), 3), None),
    "multinomial without replacement, every category": (lambda d: munet.multinomial(_on(d, _PROBS[:, 1:4]), 3), None),
    "multinomial without replacement, float16 1-d": (lambda d: munet.multinomial(_on(d, _PROBS[2], munet.float16), 4), None),
    "multinomial of no rows": (lambda d: munet.multinomial(munet.ones(0, 4, device=d), 2), None),
}  # fmt: skip


def _after_the_same_seed(draw, device):
    munet.manual_seed(11)
    value = draw(device)
    return value, munet.rand(6, device=device)  # the generator's next draw: it advanced as on the cpu


def _same_draw(case, device):
    draw, tol = EAGER[case]
    want, want_next = _after_the_same_seed(draw, "cpu")
    got, got_next = _after_the_same_seed(draw, device)
    assert got.device.type == "cuda" and got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    values = [t.cpu().to(munet.float64).numpy() if t.dtype.is_floating_point else t.cpu().numpy() for t in (got, want)]
    if tol is None:
        np.testing.assert_array_equal(*values)
    else:
        np.testing.assert_allclose(*values, rtol=tol, atol=tol)
    np.testing.assert_array_equal(got_next.cpu().numpy(), want_next.numpy())


@pytest.fixture(params=["fake", pytest.param("gpu", marks=pytest.mark.cuda)])
def device(request):
    """``cuda:0`` of the fake devices (kernels emulated on the CPU), or of a GPU (marker ``cuda``)."""
    if request.param == "gpu":
        return "cuda:0"
    fake_cupy.skip_without_emulation()
    request.getfixturevalue("fake_gpus")
    return "cuda:0"


@pytest.mark.parametrize("case", EAGER)
def test_each_op_is_the_cpus_draw(device, case):
    _same_draw(case, device)


_DATA_ERRORS = {
    "bernoulli p outside [0, 1]": lambda d: munet.bernoulli(_on(d, [0.5, 1.5, 0.25])),
    "bernoulli p nan": lambda d: munet.bernoulli(_on(d, [0.5, np.nan])),
    "normal negative std": lambda d: munet.normal(_on(d, [0.0, 1.0]), _on(d, [1.0, -2.0])),
    "normal nan std": lambda d: munet.normal(_on(d, [0.0, 1.0]), float("nan")),
    "multinomial nan": lambda d: munet.multinomial(_on(d, [[0.5, 0.5], [np.nan, 1.0]]), 1),
    "multinomial negative": lambda d: munet.multinomial(_on(d, [0.5, -0.5, 1.0]), 2, True),
    "multinomial zero row": lambda d: munet.multinomial(_on(d, [[0.5, 0.5], [0.0, 0.0]]), 1, True),
    "multinomial too few categories": lambda d: munet.multinomial(_on(d, [0.5, 0.0, 0.0, 0.5]), 3),
}


def _raises_the_cpus_error(case, device):
    draw = _DATA_ERRORS[case]
    with pytest.raises(RuntimeError) as cpu_error:
        draw("cpu")
    with pytest.raises(RuntimeError, match=re.escape(str(cpu_error.value))):
        draw(device).cpu()  # at the op or, for a device check, at the next synchronization
    same_after = munet.rand(3, device=device)  # the device stays usable
    assert same_after.cpu().numpy().shape == (3,)


@pytest.mark.parametrize("case", _DATA_ERRORS)
def test_data_checks_raise_the_cpus_errors(device, case):
    _raises_the_cpus_error(case, device)


def test_a_compiled_step_draws_afresh_at_every_call(fake_gpus):
    """A plan holding random ops replays as a CUDA graph whose random kernels read their (key, counter)
    from device slots filled before each launch: each call draws the cpu's next numbers
    (test_cuda_graph_random.py has the training steps, reseeding and the fallbacks)."""
    fake_cupy.skip_without_emulation()

    def step(x):
        return munet.nn.functional.dropout(x, 0.5, True) + munet.rand(4, device=x.device)

    draws, compiled = {}, None
    for device in ("cpu", "cuda:0"):
        munet.manual_seed(5)
        compiled = munet.compile(step)
        x = munet.ones(4, device=device)
        draws[device] = [compiled(x).cpu().numpy() for _ in range(4)]
    np.testing.assert_array_equal(draws["cuda:0"], draws["cpu"])
    assert not np.array_equal(draws["cuda:0"][2], draws["cuda:0"][3])
    assert compiled.stats()["cuda_graphs"] is True, compiled.stats()["cuda_graph"]
    assert "2 random kernels read their Philox counters" in compiled.stats()["cuda_graph"]

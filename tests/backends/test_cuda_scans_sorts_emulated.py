"""The scan kernels (``kernels_scan.py``: ``cumsum``, ``cumprod``, ``cummax``, ``cummin``), ``cat`` and the
ranking kernel and the merge passes of ``sort``/``topk`` (``kernels_sort.py``) on the fake cuda devices, run by the CPU
emulation through the whole eager path, equal to the cpu backend (strided inputs, 16-bit floats,
wrapping integers, NaN and ties in the cpu's stable order, size 0), with their gradients (``cumsum``
reversed, ``cumprod`` with zeros, ``cummax`` through a scatter, ``sort``/``topk`` through their
indices) and ``logcumsumexp``/``argsort``/``kthvalue``, which compose them; NVRTC compiles every scan
ranking and merge kernel for sm_80 and sm_90."""

import pytest

import munet
from munet.backends.cuda import kernels_elementwise as E
from munet.backends.cuda import kernels_scan, kernels_sort, nvrtc
from munet.backends.cuda.kernels_scan import OPS, render_scan, render_scan_carries
from munet.backends.cuda.kernels_sort import render_merge_pass, render_rank
from tests.backends import fake_cupy
from tests.backends.cuda_cases import EAGER_SCANS, EAGER_SORTS, pair, same_within

fake_cupy.skip_without_emulation()


@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_the_scan_kernels_compile(arch):
    sources = [render_scan(op, dtype, rank) for op in OPS for dtype in E.DTYPES for rank in (0, 2)]
    sources += [render_scan_carries(op, dtype) for op in OPS for dtype in E.DTYPES]
    sources += [render_rank(dtype, rank) for dtype in E.DTYPES for rank in (0, 2)]
    sources += [render_merge_pass(dtype) for dtype in E.DTYPES]
    assert nvrtc.compile_source(nvrtc.combine(sources), arch, name=f"scans_{arch}.cu").data


def test_an_unknown_scan_is_refused():
    with pytest.raises(ValueError, match="render_scan: op must be one of cumsum, cumprod, cummax, cummin"):
        render_scan("cumlogsumexp", "float32", 1)


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("case", {**EAGER_SCANS, **EAGER_SORTS})
def test_scans_sorts_and_cat_equal_the_cpu(case):
    fn, rtol = {**EAGER_SCANS, **EAGER_SORTS}[case]
    same_within(fn(lambda t: t.to("cuda:0")), fn(lambda t: t), rtol)


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("case", EAGER_SORTS)
def test_sorts_by_merge_passes_equal_the_cpu(case, monkeypatch):
    """Every sort case again with the merge passes serving rows of any length (from 2 elements)."""
    monkeypatch.setattr(kernels_sort, "MERGE_MIN_LENGTH", 1)
    fn, rtol = EAGER_SORTS[case]
    same_within(fn(lambda t: t.to("cuda:0")), fn(lambda t: t), rtol)


def _segmented(monkeypatch):
    """Every line of more than 4 elements scans in segments of 3 to sqrt(len) elements."""
    monkeypatch.setattr(kernels_scan, "SEGMENTED_MIN_LENGTH", 4)
    monkeypatch.setattr(kernels_scan, "MIN_SEGMENT", 3)
    monkeypatch.setattr(kernels_scan, "FEW_LINES", 10**9)


def _launched(prefix: str) -> bool:
    return any(name.startswith(prefix) for name, _, _ in fake_cupy.LAUNCHES)


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", [munet.float32, munet.float16, munet.int64])
def test_segmented_cummax_cummin_equal_the_cpu(op, dtype, monkeypatch):
    """Exact in any grouping: values and the cpu's indices (the latest tie, the latest NaN after a NaN)."""
    _segmented(monkeypatch)
    gen = munet.Generator().manual_seed(40)
    x = munet.randint(0, 6, (3, 200), generator=gen).to(dtype)
    if dtype.is_floating_point:
        x[0, 50], x[0, 120], x[2, 199] = float("nan"), float("nan"), float("nan")
    fake_cupy.LAUNCHES.clear()
    for layout in (x, x.t().contiguous().t()):  # rows, then the same values read through strides
        for got, want in zip(getattr(munet, op)(layout.to("cuda:0"), 1), getattr(munet, op)(layout, 1)):
            same_within(got, want, 0)
    assert _launched(f"munet_{op}_carries")


@pytest.mark.usefixtures("fake_gpus")
def test_segmented_integer_sums_and_products_equal_the_cpu(monkeypatch):
    """Integer arithmetic wraps the same in any grouping."""
    _segmented(monkeypatch)
    gen = munet.Generator().manual_seed(41)
    x = munet.randint(-100, 100, (2, 150), generator=gen).to(munet.int32)
    same_within(x.to("cuda:0").cumsum(1), x.cumsum(1), 0)
    small = x.to(munet.int8)
    same_within(small.to("cuda:0").cumsum(1, dtype=munet.int8), small.cumsum(1, dtype=munet.int8), 0)
    same_within(small.to("cuda:0").cumprod(1), small.cumprod(1), 0)


def _prefix_bound(x, dim: int, dtype) -> "munet.Tensor":
    """How far a segmented float cumsum may be from the cpu's sequential one: each is within
    ``gamma_n = n u / (1 - n u)`` times the prefix sum of magnitudes of the exact prefix (any order of
    summation; ``u`` of the accumulating float32 or float64), plus one rounding of each to a 16-bit output."""
    n = x.shape[dim]
    u = 2.0**-53 if dtype is munet.float64 else 2.0**-24
    gamma = n * u / (1 - n * u)
    magnitudes = x.double().abs().cumsum(dim)
    out_u = {munet.float16: 2.0**-11, munet.bfloat16: 2.0**-8}.get(dtype, 0.0)
    return 2 * gamma * magnitudes + 2 * out_u * magnitudes


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("dtype", [munet.float32, munet.float64, munet.float16])
def test_segmented_float_cumsum_agrees_to_rounding(dtype, monkeypatch):
    """Forward along both dims (strided reads) and the reversed cumsum of its gradient."""
    _segmented(monkeypatch)
    x = munet.randn(5, 300, generator=munet.Generator().manual_seed(42)).to(dtype)
    for dim in (1, 0):
        got, want = x.to("cuda:0").cumsum(dim).cpu().double(), x.cumsum(dim).double()
        assert ((got - want).abs() <= _prefix_bound(x, dim, dtype)).all()
    w = munet.randn(5, 300, generator=munet.Generator().manual_seed(43)).to(dtype)
    xc = x.to("cuda:0").requires_grad_()
    (xc.cumsum(1) * w.to("cuda:0")).sum().backward()
    reversed_sum = w.flip(1).cumsum(1).flip(1).double()  # the gradient, in the cpu's order
    assert ((xc.grad.cpu().double() - reversed_sum).abs() <= _prefix_bound(w.flip(1), 1, dtype).flip(1)).all()


@pytest.mark.usefixtures("fake_gpus")
def test_segmented_float_cumprod_agrees_to_rounding(monkeypatch):
    """Each prefix product is within gamma_n of the exact one relatively, for either order."""
    _segmented(monkeypatch)
    x = 1 + 0.01 * munet.randn(2, 400, generator=munet.Generator().manual_seed(44))
    got, want = x.to("cuda:0").cumprod(1).cpu().double(), x.cumprod(1).double()
    n, u = 400, 2.0**-24
    assert ((got - want).abs() <= 2 * (n * u / (1 - n * u)) * want.abs()).all()


SCAN_LOSSES = {
    "cumsum": lambda x: (x.cumsum(1) * x).sum(),
    "cumprod with zeros": lambda x: (munet.where(x > 1, 0.0, x).cumprod(1) * x).sum(),
    "cummax": lambda x: (munet.cummax(x, 0).values ** 2).sum(),
    "logcumsumexp": lambda x: munet.logcumsumexp(x, 1).sum(),
    "sort": lambda x: (munet.sort(x, 1).values * munet.arange(5.0, device=x.device)).sum(),
    "topk": lambda x: munet.topk(x, 2, dim=0).values.square().sum(),
}


@pytest.mark.usefixtures("fake_gpus")
@pytest.mark.parametrize("loss", SCAN_LOSSES)
def test_scan_gradients_equal_the_cpu(loss):
    x, xc = pair((4, 5), seed=35)
    x.requires_grad_()
    xc.requires_grad_()
    SCAN_LOSSES[loss](xc).backward()
    SCAN_LOSSES[loss](x).backward()
    same_within(xc.grad, x.grad, 1e-5)

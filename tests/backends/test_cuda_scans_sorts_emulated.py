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
from munet.backends.cuda import kernels_sort, nvrtc
from munet.backends.cuda.kernels_scan import OPS, render_scan
from munet.backends.cuda.kernels_sort import render_merge_pass, render_rank
from tests.backends import fake_cupy
from tests.backends.cuda_cases import EAGER_SCANS, EAGER_SORTS, pair, same_within

fake_cupy.skip_without_emulation()


@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_the_scan_kernels_compile(arch):
    sources = [render_scan(op, dtype, rank) for op in OPS for dtype in E.DTYPES for rank in (0, 2)]
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

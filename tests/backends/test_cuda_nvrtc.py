"""NVRTC compiles every eager kernel the cuda renderers produce, for sm_80 and sm_90 (no GPU needed).

One NVRTC program holds the whole op suite (``nvrtc.combine``), so NVRTC starts once per
architecture; cubins are cached on disk (``MUNET_CACHE_DIR``), so a re-run is quick.
"""

from __future__ import annotations

import pytest

from munet.backends.cuda import kernels_elementwise as E
from munet.backends.cuda import nvrtc
from munet.ops._registry import OPS
from tests.backends.cuda_cases import eager_sources, formula_cases

ARCHS = ("sm_80", "sm_90")


def test_the_suite_covers_every_formula_op():
    covered = {name for name, _ in formula_cases()}
    assert covered == {name for name, op in OPS.items() if op.formula is not None}
    assert ("add", "bfloat16") in formula_cases() and ("exp", "float16") in formula_cases()
    assert ("exp", "int32") not in formula_cases()  # exp has no integer form: the vocabulary says so


@pytest.mark.parametrize("arch", ARCHS)
def test_every_eager_kernel_compiles(arch):
    sources = eager_sources()
    assert len({s.name for s in sources}) == len(sources)  # distinct kernels, distinct names
    cubin = nvrtc.compile_source(nvrtc.combine(sources), arch, name=f"eager_suite_{arch}.cu")
    assert cubin.arch == arch and cubin.data[:4] == b"\x7fELF"
    for src in sources[:3]:
        assert f"void {src.name}(" in src.source


def test_a_compile_error_carries_nvrtc_log():
    with pytest.raises(nvrtc.NvrtcError, match="undefined_thing") as info:
        nvrtc.compile_source('extern "C" __global__ void k(float *x) { x[0] = undefined_thing; }\n', "sm_80")
    assert "undefined_thing" in info.value.log


def test_the_cache_serves_a_second_compile_and_rebuilds_a_corrupt_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    source = E.render_elementwise("add", ("float32", "float32"), rank=1).source
    first = nvrtc.compile_source(source, "sm_80")
    second = nvrtc.compile_source(source, "sm_80")
    assert not first.cache_hit and second.cache_hit and second.data == first.data
    other = nvrtc.compile_source(source, "sm_90")  # the options are part of the key
    assert not other.cache_hit
    (entry,) = [p for p in (tmp_path / "kernels").glob("*.cubin") if p.read_bytes() == first.data]
    entry.write_bytes(b"garbage")
    assert not nvrtc.compile_source(source, "sm_80").cache_hit


def test_headers_and_architectures():
    assert (nvrtc.include_dir() / "cuda_bf16.h").is_file()
    assert nvrtc.arch_for((9, 0)) == "sm_90"
    with pytest.raises(nvrtc.NvrtcUnavailableError, match="sm_12"):
        nvrtc.arch_for((1, 2))


def test_reading_nvrtc_outputs_leaves_shared_bytes_alone(tmp_path, monkeypatch):
    # an empty log has size 1: NVRTC writing into b" " * 1 (the interpreter's shared b" ") corrupts it
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))  # a real NVRTC run, not a cache hit
    cubin = nvrtc.compile_source('extern "C" __global__ void k_shared_bytes(float *x) { x[0] = 1.0f; }\n', "sm_80")
    assert not cubin.cache_hit
    assert repr(b" ") == "b' '" and b" ".decode() == " "

"""docs/rtc.md's examples that run on the CPU run as written (the guide cannot drift from the code)."""

import re
from pathlib import Path

import numpy as np
import pytest

import munet
from munet.compiler.codegen import build

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "rtc.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)


@pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler")
def test_the_c_examples_run():
    c_blocks = [b for b in _python_blocks() if "munet.rtc.CModule(" in b]
    assert len(c_blocks) == 2  # axpy, and the fused op with gradients
    namespace = {"munet": munet, "x": munet.ones(10), "y": munet.zeros(10)}
    exec(compile(c_blocks[0], "docs/rtc.md (C axpy)", "exec"), namespace)
    np.testing.assert_array_equal(namespace["y"].numpy(), np.full(10, 3.0, np.float32))
    namespace = {}
    exec(compile(c_blocks[1], "docs/rtc.md (fused op)", "exec"), namespace)
    x = namespace["x"].detach().numpy()
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(namespace["x"].grad.numpy(), s + x * s * (1 - s), rtol=1e-12)


def test_the_cuda_kernels_of_the_guide_compile():
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-bindings) is not installed")
    text = GUIDE.read_text()
    (cuda_block,) = re.findall(r"```cuda\n(.*?)```", text, re.S)
    module = munet.rtc.CudaModule(cuda_block)
    module.get_kernel("swish_forward", "const float *x, float *y, int n")
    module.get_kernel("swish_backward", "const float *x, const float *dy, float *dx, int n")
    first = _python_blocks()[0]
    source = re.search(r'CudaModule\(r"""(.*?)"""\)', first, re.S).group(1)
    munet.rtc.CudaModule(source).get_kernel("axpy", "const float *x, float *y, float a")


def test_the_wgsl_example_runs(vulkan):
    (block,) = [b for b in _python_blocks() if "munet.rtc.WGSLModule(" in b]
    namespace = {"munet": munet, "x": munet.ones(100).to(vulkan), "y": munet.zeros(100).to(vulkan)}
    exec(compile(block.replace('"vulkan:0"', "x.device"), "docs/rtc.md (WGSL axpy)", "exec"), namespace)
    np.testing.assert_array_equal(namespace["y"].cpu().numpy(), np.full(100, 3.0, np.float32))

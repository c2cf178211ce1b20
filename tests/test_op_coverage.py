"""docs/op_coverage.md is generated from the registry and must not go stale."""

from pathlib import Path

from munet import ops
from munet._coverage import render_op_coverage

DOC = Path(__file__).resolve().parents[1] / "docs" / "op_coverage.md"


def test_op_coverage_doc_is_current():
    expected = render_op_coverage()
    actual = DOC.read_text() if DOC.exists() else ""
    assert actual == expected, "docs/op_coverage.md is stale: run `python -m munet._coverage > docs/op_coverage.md`"


def test_every_primitive_has_a_cpu_kernel():
    from munet.backends.cpu.registry import KERNELS, load_kernel_modules

    load_kernel_modules()
    missing = sorted(name for name, op in ops.OPS.items() if op.primitive and name not in KERNELS)
    assert not missing, f"primitives without a cpu kernel: {missing}"

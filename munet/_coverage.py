"""Renders ``docs/op_coverage.md`` from the op registry and the backends' kernel tables.

Run ``python -m munet._coverage > docs/op_coverage.md``; a test fails when the file is stale.
"""

from __future__ import annotations

import munet
from munet import ops
from munet._device import _BACKENDS


def _kernel_tables() -> dict[str, set]:
    """Kernel names per device type, read from each backend's table without needing a device."""
    from munet.backends.cpu.registry import KERNELS, load_kernel_modules

    load_kernel_modules()
    tables = {"cpu": set(KERNELS)}
    for name in sorted(_BACKENDS):
        package = _BACKENDS[name].package
        if package not in tables:  # device types sharing a backend (vulkan, webgpu) share a column
            module = __import__(f"munet.backends.{package}.registry", fromlist=["KERNELS"])
            tables[package] = set(module.KERNELS)
    return tables


def _table(columns: list[str], rows: list[str]) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns), *rows]


def _primitive_rows(tables: dict) -> list[str]:
    rows = []
    for name in sorted(n for n, op in ops.OPS.items() if op.decomposition is None):
        op = ops.OPS[name]
        kind = "view" if op.view is not None else "primitive"
        grad = "yes" if op.backward is not None else "no"
        cells = []
        for table in tables.values():
            if op.view is not None:
                cells.append("n/a")
            elif name in table:
                cells.append("yes (in-place)" if name + "_" in table else "yes")
            else:
                cells.append("**missing**")
        rows.append(f"| `{name}` | {kind} | {grad} | " + " | ".join(cells) + " |")
    return rows


def _composite_rows(tables: dict) -> list[str]:
    rows = []
    for name in sorted(n for n, op in ops.OPS.items() if op.decomposition is not None):
        op = ops.OPS[name]
        grad = "own rule" if op.backward is not None else "from its ops"
        cells = ["fast kernel" if name in table else "decomposition" for table in tables.values()]
        where = op.decomposition.__module__.removeprefix("munet.").replace(".", "/") + ".py"
        rows.append(f"| `{name}` | {grad} | `{where}` | " + " | ".join(cells) + " |")
    return rows


def render_op_coverage() -> str:
    tables = _kernel_tables()
    devices = list(tables)
    composites = sum(op.decomposition is not None for op in ops.OPS.values())
    lines = [
        "# Op coverage",
        "",
        "Generated from the op registry by `python -m munet._coverage > docs/op_coverage.md`;",
        "`tests/test_op_coverage.py` fails when this file is stale.",
        "",
        "## Primitives",
        "",
        "A primitive needs a kernel on every backend; a view op is shape/stride arithmetic and needs",
        "none. `grad` says whether the op has a gradient rule. `yes (in-place)` means the backend also",
        "has an in-place kernel (`op_`).",
        "",
        "The non-elementwise primitives are DESIGN's list: casts (`cast`, `copy`, `clone`), reductions",
        "(`sum`, `prod`, `amax`, `amin`, `argmax`, `argmin`, `all`, `any`), scans (`cumsum`, `cumprod`,",
        "`cummax`, `cummin`), batched `matmul`, `convolution`, gather/scatter/index ops, `sort`/`topk`,",
        "random bits, fill and creation (`full`, `empty`, `arange`), and strided copy (`cat`,",
        "`as_strided_scatter`, `strided_scatter_add`). The `linalg_*` factorizations are BLAS-like",
        "primitives beside `matmul`: each backend calls its LAPACK (cpu: NumPy) rather than composing",
        "them from smaller ops. Ops with data-dependent sizes (`nonzero`, `unique`) or effects",
        "(`check`, `all_reduce`, `rtc_launch`) stay primitives, and so do the random ops that",
        "transform random bits in float64 (`bernoulli`, `exponential`, `normal_tensor`,",
        "`multinomial`, `randperm`; `docs/decisions.md` says why).",
        "",
        *_table(["op", "kind", "grad", *devices], _primitive_rows(tables)),
        "",
        "## Composites",
        "",
        "A composite is defined by its decomposition into the ops above, written in public ops in the",
        "file named; it needs no kernel. Eager mode runs a backend's fast kernel where it registers one",
        "(tested against the decomposition: `tests/ops/test_composites.py`), else the decomposition;",
        "a fusing compiled plan decomposes composites before fusion on every device",
        "(`compiler/passes/decompose.py`). `grad`: the composite's own gradient rule, or the gradient of",
        "its decomposition's ops; a composite of the second kind runs its decomposition in every mode",
        "(traces and ONNX exports hold its ops), so it has no fast kernel.",
        "",
        *_table(["op", "grad", "decomposition", *devices], _composite_rows(tables)),
    ]
    lines += ["", "## Public functions", "", "Composite functions are built from the ops above.", ""]
    for title, names in (
        ("`munet`", sorted(n for m in ops.MODULES for n in getattr(m, "__all__", ()))),
        ("`munet.nn.functional`", sorted(n for m in ops.MODULES for n in getattr(m, "__functional__", ()))),
        ("`munet.linalg`", sorted(n for m in ops.MODULES for n in getattr(m, "__linalg__", ()))),
        ("`munet.special`", sorted(n for m in ops.MODULES for n in getattr(m, "__special__", ()))),
        ("`munet.fft`", sorted(n for m in ops.MODULES for n in getattr(m, "__fft__", ()))),
        ("`Tensor` methods", sorted(n for m in ops.MODULES for n in getattr(m, "__tensor_methods__", ()))),
    ):
        lines.append(f"### {title} ({len(names)})")
        lines.append("")
        lines.append(", ".join(f"`{n}`" for n in names))
        lines.append("")
    views = sum(op.view is not None for op in ops.OPS.values())
    primitives = len(ops.OPS) - composites - views
    lines.append(
        f"_{len(ops.OPS)} registered ops ({primitives} primitives, {views} views, {composites} composites); "
        f"MuNet {munet.__version__}._"
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_op_coverage(), end="")

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


def render_op_coverage() -> str:
    tables = _kernel_tables()
    devices = list(tables)
    lines = [
        "# Op coverage",
        "",
        "Generated from the op registry by `python -m munet._coverage > docs/op_coverage.md`;",
        "`tests/test_op_coverage.py` fails when this file is stale.",
        "",
        "## Registered ops",
        "",
        "A primitive needs a kernel on every backend; a view op is shape/stride arithmetic and needs",
        "none. `grad` says whether the op has a gradient rule. `yes (in-place)` means the backend also",
        "has an in-place kernel (`op_`).",
        "",
        "| op | kind | grad | " + " | ".join(devices) + " |",
        "|---|---|---|" + "---|" * len(devices),
    ]
    for name in sorted(ops.OPS):
        op = ops.OPS[name]
        kind = "view" if op.view is not None else "primitive"
        grad = "yes" if op.backward is not None else "no"
        cells = []
        for dev in devices:
            if op.view is not None:
                cells.append("n/a")
            elif name in tables[dev]:
                cells.append("yes (in-place)" if name + "_" in tables[dev] else "yes")
            else:
                cells.append("**missing**")
        lines.append(f"| `{name}` | {kind} | {grad} | " + " | ".join(cells) + " |")
    lines += ["", "## Public functions", "", "Composite functions are built from the ops above.", ""]
    for title, names in (
        ("`munet`", sorted(n for m in ops.MODULES for n in getattr(m, "__all__", ()))),
        ("`munet.nn.functional`", sorted(n for m in ops.MODULES for n in getattr(m, "__functional__", ()))),
        ("`munet.linalg`", sorted(n for m in ops.MODULES for n in getattr(m, "__linalg__", ()))),
        ("`Tensor` methods", sorted(n for m in ops.MODULES for n in getattr(m, "__tensor_methods__", ()))),
    ):
        lines.append(f"### {title} ({len(names)})")
        lines.append("")
        lines.append(", ".join(f"`{n}`" for n in names))
        lines.append("")
    lines.append(f"_{len(ops.OPS)} registered ops; MuNet {munet.__version__}._")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_op_coverage(), end="")

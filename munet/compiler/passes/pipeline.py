"""The default pass order: simplify and fold expose duplicates and dead nodes, so CSE and DCE run after them."""

from __future__ import annotations

from munet.compiler.ir import Graph
from munet.compiler.passes.cse import eliminate_common_subexpressions
from munet.compiler.passes.dce import eliminate_dead_code
from munet.compiler.passes.fold import fold_constants
from munet.compiler.passes.simplify import simplify_algebra


def run_default(graph: Graph) -> dict:
    """Run dce, cse, fold, simplify, cse, dce; returns {pass: nodes removed or rewritten}."""
    report = {}
    for name, fn in (
        ("dce", eliminate_dead_code),
        ("cse", eliminate_common_subexpressions),
        ("fold", fold_constants),
        ("simplify", simplify_algebra),
        ("cse2", eliminate_common_subexpressions),
        ("dce2", eliminate_dead_code),
    ):
        report[name] = fn(graph)
    return report

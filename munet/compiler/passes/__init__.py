"""Graph passes, one per file; ``run_default`` applies them in the order DESIGN.md gives."""

from munet.compiler.passes.cse import eliminate_common_subexpressions
from munet.compiler.passes.dce import eliminate_dead_code
from munet.compiler.passes.fold import fold_constants
from munet.compiler.passes.pipeline import run_default
from munet.compiler.passes.simplify import simplify_algebra

__all__ = [
    "eliminate_dead_code",
    "eliminate_common_subexpressions",
    "fold_constants",
    "simplify_algebra",
    "run_default",
]

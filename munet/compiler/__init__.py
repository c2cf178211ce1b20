"""The compiler: trace a step into an SSA graph, optimize it, replay it (see docs/compiler.md)."""

from munet.compiler.breaks import GraphBreak
from munet.compiler.compiled import CompiledFunction, compile
from munet.compiler.eager_regions import disable, is_compiling
from munet.compiler.explain import ExplainOutput, explain
from munet.compiler.ir import Graph, Node, Value, VerificationError, verify
from munet.compiler.trace import HostReadError

__all__ = [
    "compile",
    "disable",
    "is_compiling",
    "explain",
    "ExplainOutput",
    "GraphBreak",
    "CompiledFunction",
    "Graph",
    "Node",
    "Value",
    "verify",
    "VerificationError",
    "HostReadError",
]

"""The compiler: trace a step into an SSA graph, optimize it, replay it (see docs/compiler.md)."""

from munet.compiler.compiled import CompiledFunction, compile
from munet.compiler.ir import Graph, Node, Value, VerificationError, verify
from munet.compiler.trace import HostReadError

__all__ = ["compile", "CompiledFunction", "Graph", "Node", "Value", "verify", "VerificationError", "HostReadError"]

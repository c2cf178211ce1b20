"""``munet.compiler.explain(fn)(*args)``: the graphs and graph breaks of one compiled call, as
``torch._dynamo.explain``.

It compiles ``fn`` (``fullgraph=False``, the other settings as given), calls it once with the
arguments (so the call's side effects happen, an optimizer step included, as PyTorch's explain
runs the function) and describes what that call did: how many graphs ran, each break with its
reason and the user's source line, and the ops traced per graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ExplainOutput:
    """What :func:`explain` found: ``graphs`` (optimized, in order), ``graph_count``,
    ``graph_break_count``, ``break_reasons`` (:class:`~munet.compiler.breaks.GraphBreak`: ``reason``,
    ``location``, ``where``), ``op_count`` and ``ops_per_graph`` (ops as traced, before optimization)."""

    graphs: list = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = field(default_factory=list)
    op_count: int = 0
    ops_per_graph: list = field(default_factory=list)
    compile_times: str = ""

    def __str__(self) -> str:
        lines = [
            f"Graph Count: {self.graph_count}",
            f"Graph Break Count: {self.graph_break_count}",
            f"Op Count: {self.op_count}",
            "Break Reasons:",
        ]
        for k, reason in enumerate(self.break_reasons, 1):
            lines += [f"  Break Reason {k}:", f"    Reason: {reason.reason}", f"    User Stack: {reason.where}"]
        lines.append("Ops per Graph:")
        lines += [f"  Graph {k}: {n} ops" for k, n in enumerate(self.ops_per_graph, 1)]
        if self.compile_times:
            lines.append(f"Compile Times: {self.compile_times}")
        return "\n".join(lines)


def explain(fn, **compile_kwargs):
    """``explain(fn)(*args, **kwargs)`` runs ``fn`` compiled once and returns an :class:`ExplainOutput`.

    ``compile_kwargs`` go to ``munet.compile`` (``fullgraph=True`` is refused: explain reports breaks).
    Example::

        out = munet.compiler.explain(step)(x, y)
        print(out.graph_break_count, out.break_reasons[0].reason)
    """
    from munet.compiler.compiled import compile as compile_

    if compile_kwargs.get("fullgraph"):
        raise ValueError("munet.compiler.explain: fullgraph=True raises at the first break; explain reports breaks")
    compiled = compile_(fn, fullgraph=False, **compile_kwargs)
    compiled = getattr(compiled, "_compiled", compiled)  # a module: its CompiledFunction

    def run(*args, **kwargs) -> ExplainOutput:
        compiled(*args, **kwargs)
        return _describe(compiled)

    return run


def _describe(compiled) -> ExplainOutput:
    stats = compiled.stats()
    times = f"trace {stats['trace_ms']:.1f} ms, compile {stats['compile_ms']:.1f} ms"
    record = compiled._last_call
    if record is None:  # one whole graph
        graph = compiled.graph
        ops = [compiled._last.nodes_traced]
        return ExplainOutput([graph], 1, 0, [], ops[0], ops, times)
    ops = list(record.ops_per_graph)
    return ExplainOutput(list(record.graphs), len(ops), len(record.breaks), list(record.breaks), sum(ops), ops, times)

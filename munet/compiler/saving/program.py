"""The program description: what a saved program holds, the same whether extracted or loaded.

``Program`` is the graph with the roles of its inputs and outputs, the state, hyperparameters,
generators and guards; ``GuardScalar`` a loaded guard's scalar; ``result_structure`` and
``rebuild_result`` the nesting of a call's result; ``registry_nodes`` the graph with fused
groups opened into their members (the file holds the unfused graph).
"""

from __future__ import annotations

from collections import OrderedDict

from munet.compiler.ir import Graph
from munet.compiler.saving.encoding import encode

PROGRAM_VERSION = 2  # 2: host placement marks and to_device nodes (version 1 files still load)


class Program:
    """Everything a saved program holds, in the same form whether extracted or loaded.

    ``roles[i]`` says where graph input ``i`` comes from: ``("arg", position)``,
    ``("state", name)`` or ``("hyper", name)``. ``state_outputs`` lists ``(output index, name)``
    pairs written into state after a run, ``cleared`` the state names set to None (gradients
    dropped by ``zero_grad``). ``results`` holds, per result leaf, an output index or
    ``("const", value)``; ``tree`` is the structure of the result (see ``result_structure``).
    """

    def __init__(self):
        self.graph: Graph | None = None
        self.roles: list = []
        self.state: OrderedDict = OrderedDict()  # name -> NumPy array (host memory, as in the file)
        self.state_dtypes: dict = {}  # name -> munet dtype
        self.state_kinds: dict = {}  # name -> parameter / buffer / optimizer / grad / tensor
        self.hyper: OrderedDict = OrderedDict()  # name -> float
        self.generators: list = []  # (name, Generator)
        self.state_outputs: list = []
        self.cleared: list = []
        self.results: list = []
        self.tree = None
        self.guards: list = []  # (scalar Value, comparison, other, outcome)
        self.device = None
        self.host: set = set()  # ids of the tensor values that live on the host cpu whatever the device
        self.fuse = False  # fuse elementwise chains when lowering (the file holds the unfused graph)


class GuardScalar:
    """A loaded guard's scalar: its JSON expression (to save again) and an evaluator over hyperparameters."""

    __slots__ = ("expression", "evaluate")

    def __init__(self, expression, evaluate):
        self.expression = expression
        self.evaluate = evaluate

    def __call__(self, hyper):
        return self.evaluate(hyper)


def registry_nodes(graph: Graph):
    """The graph's nodes with every ``fused`` node replaced by its members (registry ops only).

    Fusion is a lowering decision: the file keeps the unfused graph and ``load`` fuses again.
    """
    for node in graph.nodes:
        group = node.attrs.get("group") if node.name == "fused" else None
        if group is not None and hasattr(group, "members"):
            yield from group.members
        else:
            yield node


class _Leaf:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def result_structure(rebuild, n: int):
    """The result's nesting (lists, tuples, dicts) as JSON, with ``{"leaf": i}`` for each leaf."""
    built = rebuild([_Leaf(i) for i in range(n)])

    def walk(x):
        if isinstance(x, _Leaf):
            return {"leaf": x.index}
        if isinstance(x, (list, tuple)):
            return {"list" if isinstance(x, list) else "tuple": [walk(v) for v in x]}
        if isinstance(x, dict):
            for k in x:
                if not isinstance(k, (str, int, float, bool)) and k is not None:
                    raise TypeError(f"munet.save: result dict keys must be str, int, float, bool or None, got {k!r}")
            return {"dict": [[encode(k, None), walk(v)] for k, v in x.items()]}
        raise TypeError(f"munet.save: unexpected {type(x).__name__} in the compiled function's result")

    return walk(built)


def rebuild_result(tree, leaves: list):
    if "leaf" in tree:
        return leaves[tree["leaf"]]
    if "list" in tree:
        return [rebuild_result(v, leaves) for v in tree["list"]]
    if "tuple" in tree:
        return tuple(rebuild_result(v, leaves) for v in tree["tuple"])
    return {k: rebuild_result(v, leaves) for k, v in tree["dict"]}

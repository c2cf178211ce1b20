"""The backward engine: walks recorded nodes in reverse topological order.

``run_backward`` serves both ``Tensor.backward`` (accumulate into leaves' ``.grad``) and
``autograd.grad`` (capture the gradients of given inputs, accumulate nothing). Gradient
rules run under one grad-mode guard: disabled, unless ``create_graph`` asks for a graph of
the backward pass itself (higher-order derivatives).
"""

from __future__ import annotations

import heapq

from munet.autograd import anomaly_mode
from munet.autograd.grad_mode import _State
from munet.autograd.node import Node


def _edge_of(t):
    if t._grad_fn is not None:
        return (t._grad_fn, t._output_nr)
    if t._requires_grad:
        return (t, -1)
    return None


def _collect(root_nodes, wanted_keys):
    """Dependency counts of the nodes reachable from ``root_nodes``.

    With ``wanted_keys`` (autograd.grad), only nodes from which a wanted input can be reached
    are kept, so unrelated parts of the graph are not executed.
    """
    deps: dict[Node, int] = {}
    capture_only: set = set()
    seen = set()
    order = []
    stack = list(root_nodes)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        for edge in node.next_edges:
            if edge is not None and edge[1] >= 0:
                stack.append(edge[0])
    useful = None
    if wanted_keys is not None:
        useful = set()
        for node in sorted(order, key=lambda n: n.seq):  # producers before consumers
            for edge in node.next_edges:
                if edge is None:
                    continue
                if edge[1] < 0:
                    if id(edge[0]) in wanted_keys:
                        useful.add(node)
                elif edge[0] in useful or (id(edge[0]), edge[1]) in wanted_keys:
                    useful.add(node)
        # Nodes whose outputs are wanted but lead to no wanted input: collect their incoming
        # gradient, never run them.
        capture_only = {
            n
            for n in order
            if n not in useful and any((id(n), nr) in wanted_keys for nr in range(len(n.output_shapes)))
        }
        useful |= capture_only
    for node in order:
        if useful is not None and node not in useful:
            continue
        deps.setdefault(node, 0)
        if node in capture_only:
            continue
        for edge in node.next_edges:
            if edge is not None and edge[1] >= 0 and (useful is None or edge[0] in useful):
                deps[edge[0]] = deps.get(edge[0], 0) + 1
    return deps, capture_only


def _accumulate(buffer: list, index: int, grad) -> None:
    prev = buffer[index]
    buffer[index] = grad if prev is None else _sum_grads(prev, grad)


def _sum_grads(a, b):
    """``a + b``, with a sparse ``a`` and dense ``b`` added as ``b + a`` (PyTorch adds a sparse gradient
    to a dense one, not the other way round; the sum is dense)."""
    return b + a if a.is_sparse and not b.is_sparse else a + b


def _validate(node: Node, index: int, grad, flat_index_shape, flat_index_dtype):
    if grad._shape != flat_index_shape and tuple(grad.shape) != tuple(flat_index_shape):
        raise RuntimeError(
            f"Function {node.name()} returned an invalid gradient at index {index} - got {list(grad.shape)} "
            f"but expected shape compatible with {list(flat_index_shape)}"
        )
    if grad.dtype is not flat_index_dtype:
        grad = grad.to(flat_index_dtype)
    return grad


def run_backward(roots, root_grads, *, retain_graph: bool, create_graph: bool, inputs=None, allow_unused=False):
    """Propagate ``root_grads`` from ``roots`` (tensors) back through the graph.

    Returns the captured gradients of ``inputs`` when given, else accumulates into leaves.
    """
    capture = inputs is not None
    wanted = None
    captured: dict = {}
    if capture:
        wanted = {}
        for i, t in enumerate(inputs):
            key = (id(t._grad_fn), t._output_nr) if t._grad_fn is not None else id(t)
            wanted.setdefault(key, []).append(i)

    leaf_grads: dict[int, list] = {}  # id(leaf) -> [leaf, grad]
    buffers: dict[Node, list] = {}
    root_nodes = []
    for t, g in zip(roots, root_grads):
        edge = _edge_of(t)
        if edge is None:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        if edge[1] < 0:
            _add_leaf(leaf_grads, t, g)
            continue
        node, nr = edge
        buf = buffers.setdefault(node, [None] * len(node.output_shapes))
        _accumulate(buf, nr, g)
        root_nodes.append(node)

    deps, capture_only = _collect(root_nodes, wanted)
    ready = []
    for n in set(root_nodes) if len(root_nodes) > 1 else root_nodes:
        if deps.get(n, 0) == 0 and n in deps:
            ready.append((-n.seq, n))
    heapq.heapify(ready)
    prev_enabled = _State.enabled
    _State.enabled = create_graph
    try:
        while ready:
            _, node = heapq.heappop(ready)
            grads = buffers.pop(node, None) or [None] * len(node.output_shapes)
            if node.pre_hooks or node.retained:
                grads = _run_pre_hooks(node, grads)
            if capture:
                for nr, g in enumerate(grads):
                    for i in wanted.get((id(node), nr), ()):
                        captured[i] = g
            if node in capture_only:
                continue
            if (grads and grads[0] is not None) or any(g is not None for g in grads):
                _execute(node, grads, buffers, leaf_grads, deps, ready, retain_graph)
            elif not retain_graph:
                node.release()
            for edge in node.next_edges:
                if edge is None or edge[1] < 0 or edge[0] not in deps:
                    continue
                deps[edge[0]] -= 1
                if deps[edge[0]] == 0:
                    heapq.heappush(ready, (-edge[0].seq, edge[0]))
    finally:
        _State.enabled = prev_enabled

    if capture:
        for key, (leaf, g) in leaf_grads.items():
            for i in wanted.get(key, ()):
                captured[i] = _run_leaf_hooks(leaf, g)
        result = []
        for i in range(len(inputs)):
            g = captured.get(i)
            if g is None and not allow_unused:
                raise RuntimeError(
                    f"One of the differentiated Tensors (input {i}) appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior."
                )
            result.append(g)
        return tuple(result)

    _store_leaf_grads(leaf_grads, create_graph)
    return None


def _add_leaf(leaf_grads, leaf, g):
    entry = leaf_grads.get(id(leaf))
    if entry is None:
        leaf_grads[id(leaf)] = [leaf, g]
    else:
        entry[1] = _sum_grads(entry[1], g)


def _run_pre_hooks(node: Node, grads: list) -> list:
    if node.pre_hooks:
        for nr, hooks in node.pre_hooks.items():
            for hook in list(hooks.values()):
                if grads[nr] is None:
                    break
                out = hook(grads[nr])
                if out is not None:
                    grads[nr] = out
    if node.retained:
        for nr, ref in node.retained.items():
            t = ref()
            if t is not None and grads[nr] is not None:
                g = grads[nr] if _State.enabled else grads[nr].detach()
                t.grad = g.clone() if t.grad is None else t.grad + g
    return grads


def _input_grads(node, grads) -> list:
    """Run ``node``'s gradient rule and its post hooks: the gradients of its inputs, flat."""
    node.check_saved_versions()
    if getattr(node.op, "complex_rule", None) == "analytic" and _complex_output(node):
        out = _conjugated_rule(node, grads)
    else:
        out = node.op.backward(node, *grads) if len(grads) > 1 else node.op.backward(node, grads[0])
    if not isinstance(out, (tuple, list)):
        out = (out,)
    # one gradient per input as the rule returned them (zip stops at the inputs), or spread out / padded
    flat = out if not node.op.variadic and len(out) >= len(node.next_edges) else _flatten_grads(node, out)
    if node.post_hooks:
        for hook in list(node.post_hooks.values()):
            replaced = hook(tuple(flat), tuple(grads))
            if replaced is not None:
                flat = list(replaced)
    return flat


def _complex_output(node) -> bool:
    """Whether an analytic rule needs conjugating: only where it gets complex gradients (a cast from
    complex to real gets real ones, for which the conjugations cancel)."""
    for d in node.output_dtypes:  # (a loop: a generator costs a frame, and every view's node asks)
        if d.is_complex:
            return True
    return False


def _conjugated_rule(node, grads):
    """PyTorch's complex gradient from a rule written for real numbers: for an op whose rule is
    ``g * f'(z)`` (linear in ``g``, analytic in the inputs), the conjugate Wirtinger gradient is
    ``g * conj(f'(z))`` = ``conj(rule(conj(g)))``."""
    from munet.ops.complex import conj

    def flip(g):
        if isinstance(g, (tuple, list)):  # a variadic op's gradients
            return [flip(x) for x in g]
        return None if g is None else conj(g)

    out = node.op.backward(node, *[flip(g) for g in grads])
    return flip(out) if isinstance(out, (tuple, list)) else (flip(out),)


def _input_grads_checked(node, grads) -> list:
    """``_input_grads`` in anomaly mode: NaN gradients raise, errors show the forward stack."""
    try:
        flat = _input_grads(node, grads)
        if anomaly_mode.is_anomaly_check_nan_enabled():
            anomaly_mode.check_for_nan(node.name(), flat)
    except Exception:
        anomaly_mode.warn_forward_stack(node.name(), node.forward_stack)
        raise
    return flat


def _execute(node, grads, buffers, leaf_grads, deps, ready, retain_graph):
    flat = _input_grads_checked(node, grads) if anomaly_mode.is_anomaly_enabled() else _input_grads(node, grads)
    if not retain_graph:
        node.release()
    for i, (edge, g) in enumerate(zip(node.next_edges, flat)):
        if edge is None or g is None:
            continue
        if g._dtype is not node.input_dtypes[i] or g._shape != node.input_shapes[i]:  # (the common case: as expected)
            g = _validate(node, i, g, node.input_shapes[i], node.input_dtypes[i])
        if edge[1] < 0:
            _add_leaf(leaf_grads, edge[0], g)
            continue
        target = edge[0]
        if target not in deps:
            continue
        buf = buffers.get(target)
        if buf is None:
            buf = buffers[target] = [None] * len(target.output_shapes)
        _accumulate(buf, edge[1], g)


def _flatten_grads(node, out) -> list:
    if not node.op.variadic:
        if len(out) < len(node.next_edges):
            out = list(out) + [None] * (len(node.next_edges) - len(out))
        return list(out)
    flat = []
    for g in out:
        if isinstance(g, (list, tuple)):
            flat.extend(g)
        else:
            flat.append(g)
    return flat


def _run_leaf_hooks(leaf, g):
    if not leaf._hooks:
        return g
    for hook in list(leaf._hooks.values()):
        out = hook(g)
        if out is not None:
            g = out
    return g


def _store_leaf_grads(leaf_grads, create_graph: bool) -> None:
    stored_storages = set()
    for leaf, g in leaf_grads.values():
        g = _run_leaf_hooks(leaf, g)
        if not create_graph and (leaf.grad is None or g._requires_grad):  # (a sum needs no history-free alias)
            g = g.detach()
        if leaf.grad is None:
            # A gradient tensor may be shared (one grad fed to two leaves) or a broadcast view;
            # each leaf gets storage of its own so in-place updates of .grad stay private.
            if g.is_sparse:  # its values may be a view of the incoming gradient
                g = g.clone()
            else:
                sid = id(g._storage)
                if sid in stored_storages or not g.is_contiguous() or g._base is not None:
                    g = g.clone()
                stored_storages.add(id(g._storage))
            leaf.grad = g
        else:
            leaf.grad = _sum_grads(leaf.grad, g)
        if leaf._post_acc_hooks:
            for hook in list(leaf._post_acc_hooks.values()):
                hook(leaf)

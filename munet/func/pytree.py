"""Flatten nested tuples, lists and dicts of tensors into leaves and back (``torch.utils._pytree``'s idea).

A spec records the containers; ``tree_unflatten(leaves, spec)`` rebuilds the same nesting with
new leaves. Dicts keep their insertion order. Anything that is not a tuple, list or dict is a leaf.
"""

from __future__ import annotations

from typing import Any

LEAF = None  # the spec of a leaf


def tree_flatten(tree) -> tuple[list, Any]:
    """``(leaves, spec)`` of ``tree``."""
    leaves: list = []
    return leaves, _flatten_into(tree, leaves)


def _flatten_into(tree, leaves: list):
    if isinstance(tree, dict):
        return (dict, list(tree.keys()), [_flatten_into(v, leaves) for v in tree.values()])
    if isinstance(tree, (tuple, list)):
        return (type(tree), None, [_flatten_into(v, leaves) for v in tree])
    leaves.append(tree)
    return LEAF


def tree_unflatten(leaves, spec):
    """The tree of ``spec``'s shape holding ``leaves`` in order."""
    it = iter(leaves)
    return _build(it, spec)


def _build(it, spec):
    if spec is LEAF:
        return next(it)
    kind, keys, children = spec
    values = [_build(it, c) for c in children]
    if kind is dict:
        return dict(zip(keys, values))
    return values if kind is list else tuple(values)


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)

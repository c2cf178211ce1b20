"""Operators of the ``ai.onnx.ml`` domain that MuNet runs: ``ML_RULES[op_type](call)``, as RULES.

``Binarizer`` and ``ArrayFeatureExtractor`` are tensor ops. ``LabelEncoder`` (a lookup table, often of
strings) and ``TreeEnsemble`` (a walk down each decision tree per row) run on the host. Each follows
onnx's reference implementation (``onnx/reference/ops/aionnxml``), which its node tests check; the
other ML operators (classifiers, SVMs, ``TreeEnsembleRegressor``...) are refused naming the operator.
"""

from __future__ import annotations

import math

import numpy as np

import munet

ML_DOMAIN = "ai.onnx.ml"
ML_RULES: dict = {}


def ml_rule(op_type: str):
    def register(fn):
        ML_RULES[op_type] = fn
        return fn

    return register


@ml_rule("Binarizer")
def _binarizer(call):
    x = call.input(0)
    return (x > call.attr("threshold", 0.0)).to(x.dtype)


@ml_rule("ArrayFeatureExtractor")
def _array_feature_extractor(call):
    """The elements of the last axis that the indices name (a 1-d input gives one row)."""
    x, indices = call.input(0), call.input(1).to(munet.int64).reshape(-1)
    picked = x.index_select(x.ndim - 1, indices)
    return picked.reshape(1, -1) if x.ndim == 1 else picked


@ml_rule("LabelEncoder")
def _label_encoder(call):
    """Each element replaced by its value in the keys -> values table, the default when absent."""
    attrs = call.node.attrs
    keys = next((attrs[k] for k in ("keys_floats", "keys_int64s", "keys_strings", "keys_tensor") if k in attrs), None)
    values, kind = next(
        ((attrs[k], k) for k in ("values_floats", "values_int64s", "values_strings", "values_tensor") if k in attrs),
        (None, None),
    )
    if keys is None or values is None:
        raise call.unsupported("a LabelEncoder without keys or values")
    table = dict(zip(_items(keys), _items(values)))
    if kind == "values_tensor":
        default = np.asarray(attrs.get("default_tensor", np.zeros(1, np.asarray(values).dtype)))
        dtype, fallback = default.dtype, default.reshape(-1)[0].item()
    elif kind == "values_floats":
        dtype, fallback = np.float32, attrs.get("default_float", -0.0)
    elif kind == "values_int64s":
        dtype, fallback = np.int64, attrs.get("default_int64", -1)
    else:
        dtype, fallback = object, attrs.get("default_string", "_Unused")
    x = np.asarray(call.host(0))
    looked_up = [table.get(v, fallback) for v in _items(x)]
    return np.asarray(looked_up, dtype=dtype).reshape(x.shape)


def _items(values) -> list:
    """Python values of an attribute list or array (NaN keys match NaN, as in the reference's dict)."""
    return [v.item() if isinstance(v, np.generic) else v for v in np.asarray(values, dtype=object).reshape(-1)]


_COMPARE = {
    0: lambda x, s: x <= s,
    1: lambda x, s: x < s,
    2: lambda x, s: x >= s,
    3: lambda x, s: x > s,
    4: lambda x, s: x == s,
    5: lambda x, s: x != s,
    6: lambda x, s: x in s,
}


@ml_rule("TreeEnsemble")
def _tree_ensemble(call):
    """Each row walks every tree from its root (a node sends it to its true or false child, a node
    or a leaf, by comparing one feature with its split or set); the leaves' weights are aggregated
    per target (sum, average, min, max). Only ``post_transform=0`` (none)."""
    if call.attr("post_transform", 0):
        raise call.unsupported(f"post_transform={call.attr('post_transform')}")
    x = np.asarray(call.host(0))
    modes = [int(m) for m in np.asarray(call.attr("nodes_modes")).reshape(-1)]
    splits = np.asarray(call.attr("nodes_splits")).reshape(-1)
    members = list(np.asarray(call.attr("membership_values", np.zeros(0))).reshape(-1))
    sets, at = {}, 0
    for i, mode in enumerate(modes):  # the membership values list each MEMBER node's set, NaN-terminated
        if mode == 6:
            end = next(j for j in range(at, len(members)) if math.isnan(members[j]))
            sets[i], at = set(members[at:end]), end + 1
    features = call.attr("nodes_featureids")
    children = (call.attr("nodes_truenodeids"), call.attr("nodes_falsenodeids"))
    leafs = (call.attr("nodes_trueleafs"), call.attr("nodes_falseleafs"))
    missing = call.attr("nodes_missing_value_tracks_true", None) or [0] * len(modes)
    weights = np.asarray(call.attr("leaf_weights")).reshape(-1)
    targets = call.attr("leaf_targetids")
    roots = call.attr("tree_roots")
    aggregate = call.attr("aggregate_function", 1)
    n_targets = call.attr("n_targets")
    if aggregate in (0, 1):
        out = np.zeros((len(x), n_targets), dtype=x.dtype)
    elif aggregate in (2, 3):
        info = np.finfo(x.dtype)
        out = np.full((len(x), n_targets), info.max if aggregate == 2 else info.min, dtype=x.dtype)
    else:
        raise call.unsupported(f"aggregate_function={aggregate}")
    for r, row in enumerate(x):
        for root in roots:
            node, is_leaf = root, leafs[0][root] and leafs[1][root] and children[0][root] == children[1][root]
            while not is_leaf:
                value = row[features[node]].item()
                split = sets.get(node, splits[node] if node < len(splits) else None)
                branch = 0 if _COMPARE[modes[node]](value, split) or (missing[node] and math.isnan(value)) else 1
                node, is_leaf = children[branch][node], leafs[branch][node]
            weight, target = weights[node], targets[node]
            if aggregate == 1:
                out[r, target] += weight
            elif aggregate == 0:
                out[r, target] += weight / len(roots)
            elif aggregate == 2:
                out[r, target] = min(out[r, target], weight)
            else:
                out[r, target] = max(out[r, target], weight)
    return out

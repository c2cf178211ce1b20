"""ONNX operators an imported program runs on the host: strings, sequences, optionals, NonMaxSuppression.

Strings are not tensor math: they are NumPy object arrays of ``str`` on the host (values.py), and only
the operators in :data:`STRING_OPS` read them (load refuses a string input anywhere else). A sequence
is a Python list of values and an optional is its value or None (empty); sequence and optional
operators only move values around, so the tensors inside stay on the program's device.
``NonMaxSuppression`` has a data-dependent output size and is a greedy sequential loop: it runs on the
host (under ``munet.compile`` it ends the graph, as ``NonZero`` does). Each rule follows onnx's
reference implementation (``onnx/reference/ops``), which its backend node tests check.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

import munet
from munet.onnx import values as held
from munet.onnx.import_ops import rule

# strings -------------------------------------------------------------------------------------------------


@rule("StringConcat")
def _string_concat(call):
    return np.asarray(call.host(0), dtype=object) + np.asarray(call.host(1), dtype=object)


@rule("StringSplit")
def _string_split(call):
    """Each string split at ``delimiter`` (runs of whitespace when absent or empty), at most
    ``maxsplit`` times; the pieces padded with "" to the longest, and how many each string gave."""
    x = np.asarray(call.host(0), dtype=object)
    delimiter = call.attr("delimiter", None) or None
    maxsplit = call.attr("maxsplit", None)
    pieces = [s.split(delimiter, -1 if maxsplit is None else maxsplit) for s in x.reshape(-1)]
    counts = np.array([len(p) for p in pieces], dtype=np.int64).reshape(x.shape)
    width = max((len(p) for p in pieces), default=0)
    out = np.empty((len(pieces), width), dtype=object)
    for i, p in enumerate(pieces):
        out[i] = p + [""] * (width - len(p))
    return [out.reshape(*x.shape, width), counts]


@rule("RegexFullMatch")
def _regex_full_match(call):
    """Whether each string matches ``pattern`` entirely (Python's ``re``, which reads the RE2 patterns
    ONNX names for the common syntax; a pattern ``re`` cannot compile is refused)."""
    pattern = call.attr("pattern")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise call.unsupported(f"pattern {pattern!r} ({exc})") from None
    x = np.asarray(call.host(0), dtype=object)
    return np.array([compiled.fullmatch(s) is not None for s in x.reshape(-1)], dtype=bool).reshape(x.shape)


@rule("StringNormalizer")
def _string_normalizer(call):
    """Accents stripped, stop words removed (before or after the case change, as ``is_case_sensitive``
    says), case changed; a 1-row or 1-d input drops the strings left empty (one "" if none is left).
    ``locale`` is not read: case changes are Unicode's."""
    x = np.asarray(call.host(0), dtype=object)
    if x.ndim not in (1, 2):
        raise call.unsupported(f"a {x.ndim}-d input (expected 1-d or 2-d)")
    action = call.attr("case_change_action", "NONE")
    change = {"LOWER": str.lower, "UPPER": str.upper, "NONE": lambda s: s}.get(action)
    if change is None:
        raise call.unsupported(f"case_change_action={action!r}")
    sensitive = bool(call.attr("is_case_sensitive", 0))
    stopwords = list(call.attr("stopwords", []) or [])
    stops = set(stopwords) if sensitive or action == "NONE" else {change(w) for w in stopwords}

    def normalize(s: str) -> str:
        s = _strip_accents(s)
        if sensitive and stops:
            s = _drop_words(s, stops)
        s = change(s)
        if not sensitive and stops:
            s = _drop_words(s, stops)
        return s

    out = np.array([normalize(s) for s in x.reshape(-1)], dtype=object).reshape(x.shape)
    if out.ndim == 2 and out.shape[0] == 1:
        kept = [s for s in out[0] if s]
        return np.array([kept or [""]], dtype=object)
    if out.ndim == 1:
        kept = [s for s in out if s]
        return np.array(kept or [""], dtype=object)
    return out


def _strip_accents(s: str) -> str:
    if s.isascii():
        return s
    return "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c))


def _drop_words(text: str, stops: set) -> str:
    return " ".join(w for w in text.split(" ") if w not in stops)


@rule("Equal")
def _equal(call):
    if held.is_string(call.value(0)) or held.is_string(call.value(1)):
        a, b = np.asarray(call.host(0), dtype=object), np.asarray(call.host(1), dtype=object)
        return np.asarray(a == b, dtype=bool)
    return munet.eq(call.input(0), call.input(1))


@rule("Identity")
def _identity(call):
    value = call.value(0)
    if isinstance(value, list):
        return held.Sequence(value)
    return value if held.is_string(value) else call.input(0)


# sequences and optionals --------------------------------------------------------------------------------


def _sequence(call, i: int) -> list:
    value = call.value(i)
    if not isinstance(value, list):
        raise call.unsupported(f"input {call.node.input[i]!r} that is not a sequence")
    return value


def _position(call, i: int, length: int, default: int, end_inclusive: bool = False) -> int:
    """Input ``i`` as a position in a sequence of ``length`` (negative counts from the end)."""
    if not call.has(i):
        return default
    position = int(call.scalar(i))
    limit = length + 1 if end_inclusive else length
    if not -length <= position < limit:
        raise IndexError(f"munet.onnx: node {call.node.name!r}: {call.op_type} position {position} is out of range")
    return position + length if position < 0 else position


@rule("SequenceEmpty")
def _sequence_empty(call):
    return held.Sequence()


@rule("SequenceConstruct")
def _sequence_construct(call):
    return held.Sequence(call.value(i) for i in range(call.n_inputs))


@rule("SequenceInsert")
def _sequence_insert(call):
    sequence = held.Sequence(_sequence(call, 0))
    sequence.insert(_position(call, 2, len(sequence), len(sequence), end_inclusive=True), call.value(1))
    return sequence


@rule("SequenceAt")
def _sequence_at(call):
    sequence = _sequence(call, 0)
    return sequence[_position(call, 1, len(sequence), 0)]


@rule("SequenceErase")
def _sequence_erase(call):
    sequence = held.Sequence(_sequence(call, 0))
    del sequence[_position(call, 1, len(sequence), len(sequence) - 1)]
    return sequence


@rule("SequenceLength")
def _sequence_length(call):
    return np.asarray(len(_sequence(call, 0)), dtype=np.int64)


@rule("SplitToSequence")
def _split_to_sequence(call):
    x = call.input(0)
    axis = call.attr("axis", 0) % x.ndim
    if not call.has(1):
        parts = munet.split(x, 1, axis)
        return held.Sequence(p.squeeze(axis) if not call.attr("keepdims", 1) else p for p in parts)
    split = np.asarray(call.host(1)).reshape(-1)
    if np.ndim(call.host(1)) == 0:
        return held.Sequence(munet.split(x, int(split[0]), axis))
    return held.Sequence(munet.split(x, [int(s) for s in split], axis))


@rule("ConcatFromSequence")
def _concat_from_sequence(call):
    tensors = [munet.from_numpy(np.array(t)) if isinstance(t, np.ndarray) else t for t in _sequence(call, 0)]
    tensors = [t.to(call.device) for t in tensors]
    axis = call.attr("axis")
    if call.attr("new_axis", 0):
        return munet.stack(tensors, axis % (tensors[0].ndim + 1))
    return munet.cat(tensors, axis)


@rule("SequenceMap")
def _sequence_map(call):
    """The body once per element of the first input; other sequence inputs give their element of the
    same index, tensor inputs are passed whole. Each body output collects into a sequence."""
    body = call.attr("body")
    sequence = _sequence(call, 0)
    extra = [call.value(i) for i in range(1, call.n_inputs)]
    collected = [held.Sequence() for _ in body.outputs]
    for k, element in enumerate(sequence):
        inputs = [element, *(v[k] if isinstance(v, list) else v for v in extra)]
        for parts, out in zip(collected, call.run_subgraph(body, inputs)):
            parts.append(out)
    return collected


@rule("Optional")
def _optional(call):
    return call.value(0) if call.has(0) else None


@rule("OptionalHasElement")
def _optional_has_element(call):
    return np.asarray(call.has(0))


@rule("OptionalGetElement")
def _optional_get_element(call):
    if not call.has(0):
        raise ValueError(f"munet.onnx: node {call.node.name!r}: OptionalGetElement of an empty optional")
    return call.value(0)


# operators that read strings (the load check refuses them anywhere else)
STRING_OPS = {
    *(
        "StringConcat",
        "StringSplit",
        "RegexFullMatch",
        "StringNormalizer",
        "Equal",
        "Identity",
        "TfIdfVectorizer",
        "LabelEncoder",
    ),
    *("SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase", "SequenceLength"),
    *("Optional", "OptionalHasElement", "OptionalGetElement", "If", "Loop", "SequenceMap"),
}


# NonMaxSuppression ---------------------------------------------------------------------------------------


@rule("NonMaxSuppression")
def _non_max_suppression(call):
    """Per batch and class: boxes in descending score order (ties: lower index first), above
    ``score_threshold`` when given, each kept unless its IoU with a kept box exceeds ``iou_threshold``,
    at most ``max_output_boxes_per_class``. Computed in the boxes' float type, as onnx's reference."""
    boxes, scores = call.host(0), call.host(1)
    limit = max(int(call.scalar(2)), 0) if call.has(2) and np.size(call.host(2)) else 0
    iou_threshold = np.asarray(call.host(3)).reshape(-1)[0] if call.has(3) and np.size(call.host(3)) else 0
    score_threshold = np.asarray(call.host(4)).reshape(-1)[0] if call.has(4) and np.size(call.host(4)) else None
    corners = _box_corners(boxes, call.attr("center_point_box", 0))
    selected = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = sorted(range(len(s)), key=lambda i: (-s[i], i))
            if score_threshold is not None:
                order = [i for i in order if s[i] > score_threshold]
            kept = []
            for i in order:
                if len(kept) >= limit:
                    break
                if all(not _suppresses(corners[b, i], corners[b, j], iou_threshold) for j in kept):
                    kept.append(i)
                    selected.append((b, c, i))
    return np.asarray(selected, dtype=np.int64).reshape(-1, 3)


def _box_corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """``(x_min, x_max, y_min, y_max)`` of each box, in the boxes' float type."""
    if center_point_box:
        x, y, half_w, half_h = boxes[..., 0], boxes[..., 1], boxes[..., 2] / 2, boxes[..., 3] / 2
        return np.stack([x - half_w, x + half_w, y - half_h, y + half_h], -1)
    y1, x1, y2, x2 = (boxes[..., k] for k in range(4))
    return np.stack([np.minimum(x1, x2), np.maximum(x1, x2), np.minimum(y1, y2), np.maximum(y1, y2)], -1)


def _suppresses(a: np.ndarray, b: np.ndarray, threshold) -> bool:
    width = min(a[1], b[1]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[2], b[2])
    if width <= 0 or height <= 0:
        return False
    intersection = width * height
    area_a, area_b = (a[1] - a[0]) * (a[3] - a[2]), (b[1] - b[0]) * (b[3] - b[2])
    union = area_a + area_b - intersection
    if intersection <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return intersection / union > threshold


# TfIdfVectorizer -----------------------------------------------------------------------------------------


@rule("TfIdfVectorizer")
def _tfidf_vectorizer(call):
    """n-gram counts of each row (1-d input: one row) over the pool's n-grams, weighted by ``mode``.
    An n-gram of n >= 2 items may skip up to ``max_skip_count`` items between each (every skip distance
    counts), a 1-gram counts once per position; n runs over [min_gram_length, max_gram_length]."""
    x = np.asarray(call.host(0))
    pool = list(call.attr("pool_strings", None) or call.attr("pool_int64s", None) or [])
    counts_at = list(call.attr("ngram_counts"))
    columns = list(call.attr("ngram_indexes"))
    low, high = call.attr("min_gram_length"), call.attr("max_gram_length")
    grams = _pool_ngrams(pool, counts_at, low, high)
    width = max(columns) + 1
    rows = x.reshape(1, -1) if x.ndim <= 1 else x.reshape(x.shape[0], -1)
    frequencies = np.zeros((rows.shape[0], width), dtype=np.int64)
    for r, row in enumerate(rows):
        items = [v.item() if isinstance(v, np.generic) else v for v in row]
        for distance in range(1, call.attr("max_skip_count", 0) + 2):
            for start in range(len(items)):
                for n in range(max(low, 1 if distance == 1 else 2), high + 1):
                    last = start + (n - 1) * distance
                    if last >= len(items):
                        break
                    gram_id = grams.get(tuple(items[start : last + 1 : distance]))
                    if gram_id is not None:
                        frequencies[r, columns[gram_id]] += 1
    return _tfidf_weights(call, frequencies).reshape((width,) if x.ndim <= 1 else (rows.shape[0], width))


def _pool_ngrams(pool: list, counts_at: list, low: int, high: int) -> dict:
    """n-gram (tuple) -> its position among all the pool's n-grams, for n in [low, high]."""
    grams, index = {}, 0
    for i, begin in enumerate(counts_at):
        end = counts_at[i + 1] if i + 1 < len(counts_at) else len(pool)
        n = i + 1
        for at in range(begin, end - n + 1, n):
            if low <= n <= high:
                grams[tuple(pool[at : at + n])] = index  # a repeated n-gram keeps its last position, as the reference
            index += 1
    return grams


def _tfidf_weights(call, frequencies: np.ndarray) -> np.ndarray:
    mode = call.attr("mode")
    weights = call.attr("weights", None)
    weights = None if weights is None or len(weights) == 0 else np.asarray(weights, np.float32)
    if mode == "TF":
        return frequencies.astype(np.float32)
    if mode == "IDF":
        present = (frequencies > 0).astype(np.float32)
        return present * weights if weights is not None else present
    if mode == "TFIDF":
        return frequencies.astype(np.float32) * weights if weights is not None else frequencies.astype(np.float32)
    raise call.unsupported(f"mode={mode!r}")


# MelWeightMatrix -----------------------------------------------------------------------------------------


@rule("MelWeightMatrix")
def _mel_weight_matrix(call):
    """The (dft_length // 2 + 1, num_mel_bins) matrix of triangular mel filters, computed on the host
    from its scalar inputs in their own types, step for step as onnx's reference (which spaces the
    num_mel_bins + 2 edges by (high - low) / (num_mel_bins + 2) on the mel scale)."""
    bins, dft_length, rate, low, high = (np.asarray(call.host(i)).reshape(()) for i in range(5))
    bins, dft_length = int(bins), int(dft_length)
    edges = np.arange(0, bins + 2)
    low_mel = 2595 * np.log1p(low / 700) / np.log(10)
    high_mel = 2595 * np.log1p(high / 700) / np.log(10)
    edges = edges * ((high_mel - low_mel) / edges.shape[0]) + low_mel
    edges = 700 * np.expm1(edges / 2595 * np.log(10))
    edges = (((dft_length + 1) * edges) // rate).astype(int)
    out = np.zeros((dft_length // 2 + 1, bins))
    for i in range(bins):
        left, center, right = edges[i], edges[i + 1], edges[i + 2]
        if center == left:
            out[center, i] = 1
        else:
            out[left : center + 1, i] = (np.arange(left, center + 1) - left) / float(center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / float(right - center)
    return out.astype(call.dtype_attr("output_datatype").np if "output_datatype" in call.node.attrs else np.float32)

"""Attribute encoding: node arguments and attributes as JSON, and back.

``encode`` tags what JSON cannot hold (tuples, floats as hex, dtypes, devices, generators,
graph values by id); ``Decoder`` turns the tagged forms back into Python objects and raises
``CheckpointError`` on anything unexpected. ``COMPARISONS`` names the comparisons a guard may use.
"""

from __future__ import annotations

import operator

import numpy as np

from munet import _dtype as D
from munet._device import as_device
from munet._device import device as Device
from munet.compiler.ir import Value
from munet.ops.random import Generator
from munet.serialization import CheckpointError

COMPARISONS = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


COMPARISON_NAMES = {fn: name for name, fn in COMPARISONS.items()}


def encode(x, generator_index, program_device=None):
    """A JSON form of an argument or attribute; tuples, floats, dtypes, devices, generators tagged.

    A device equal to the program's is written as ``"program"`` (it becomes the device the
    program is loaded onto), any other by name.
    """
    if isinstance(x, Value):
        return {"value": x.id}
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return {"float": float(x).hex()}
    if isinstance(x, tuple):
        return {"tuple": [encode(v, generator_index, program_device) for v in x]}
    if isinstance(x, list):
        return {"list": [encode(v, generator_index, program_device) for v in x]}
    if isinstance(x, D.dtype):
        return {"dtype": x.name}
    if isinstance(x, Device):
        return {"device": "program" if program_device is not None and x == program_device else str(x)}
    if isinstance(x, Generator):
        return {"generator": generator_index(x)}
    raise TypeError(f"munet.save: cannot save a compiled program holding a {type(x).__name__} ({x!r}) in its graph")


class Decoder:
    """Turns the JSON forms back into Python objects, raising ``CheckpointError`` on anything unexpected."""

    def __init__(self, path, values: dict, generators: list, device=None):
        self.path = path
        self.values = values
        self.generators = generators
        self.device = device  # what "program" devices become

    def fail(self, where: str, message: str):
        raise CheckpointError(f"munet.load: {self.path}: {where}: {message}")

    def decode(self, x, where: str):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return x
        if not isinstance(x, dict) or len(x) != 1:
            self.fail(where, f"malformed value {x!r} (expected null, a bool, an int, a string or a tagged object)")
        ((tag, body),) = x.items()
        if tag == "value":
            if type(body) is not int or body not in self.values:
                self.fail(where, f"refers to value %{body}, which the graph does not define")
            return self.values[body]
        if tag == "float":
            try:
                return float.fromhex(body)
            except (TypeError, ValueError):
                self.fail(where, f"malformed float {body!r}")
        if tag in ("tuple", "list"):
            if not isinstance(body, list):
                self.fail(where, f"malformed {tag} {body!r}")
            items = [self.decode(v, where) for v in body]
            return tuple(items) if tag == "tuple" else items
        if tag == "dtype":
            return self.dtype(body, where)
        if tag == "device":
            if body == "program" and self.device is not None:
                return self.device
            try:
                return as_device(body)
            except Exception as exc:  # noqa: BLE001 - any failure is a bad file
                self.fail(where, f"invalid device {body!r} ({exc})")
        if tag == "generator":
            if type(body) is not int or not 0 <= body < len(self.generators):
                self.fail(where, f"refers to generator {body!r}; the file has {len(self.generators)}")
            return self.generators[body]
        self.fail(where, f"unknown tag {tag!r} in {x!r}")

    def dtype(self, name, where: str):
        try:
            return D._by_name(name)
        except (KeyError, TypeError):
            self.fail(where, f"unknown dtype {name!r}")

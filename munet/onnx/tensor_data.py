"""An ONNX ``TensorProto``'s data as a NumPy array, read without trusting the file.

Data is inline (``raw_data`` or a typed field) or external (``data_location = EXTERNAL``: a file named
by ``location``, with optional ``offset`` and ``length``). External files are read only from the
model's own directory: a location that resolves outside it (``..``, an absolute path, a link
pointing out) is refused, as is a missing or short file, and a model given as bytes or a ModelProto
has no directory, so its external data is refused. The declared shape is checked against the data
before anything is allocated, so absurd dimensions give an error, not a huge allocation.
"""

from __future__ import annotations

import math
import os

import numpy as np

MAX_ELEMENTS = 2**40  # no tensor of a loadable model comes near this many elements


def inline_external_data(onnx, model, base_dir: str | None, where: str):
    """``model`` with the data of every external tensor (initializers, tensor attributes, in subgraphs
    too) read in and inlined, after the checks above; ``model`` itself when it has none (a copy
    otherwise: a caller's ModelProto is not changed)."""
    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in _tensors(onnx, model.graph)):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for tensor in _tensors(onnx, copy.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            tensor.CopyFrom(_with_external_data(onnx, tensor, base_dir, f"{where}: tensor {tensor.name!r}"))
    return copy


def _tensors(onnx, graph):
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t
            yield from a.tensors
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _tensors(onnx, a.g)
            for g in a.graphs:
                yield from _tensors(onnx, g)


def tensor_array(onnx, tensor, base_dir: str | None, what: str) -> np.ndarray:
    """``tensor``'s data as NumPy (``what`` names it in errors: file and initializer or node)."""
    dims = list(tensor.dims)
    if any(d < 0 for d in dims) or math.prod(dims) > MAX_ELEMENTS:
        raise ValueError(f"munet.onnx.load: {what} declares the impossible shape {dims}")
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        tensor = _with_external_data(onnx, tensor, base_dir, what)
    _check_size(onnx, tensor, dims, what)
    try:
        return onnx.numpy_helper.to_array(tensor)
    except Exception as exc:  # a malformed tensor: NumPy's or onnx's own error, named here
        raise ValueError(f"munet.onnx.load: {what} holds data that does not fit its type and shape: {exc}") from None


def _check_size(onnx, tensor, dims: list, what: str) -> None:
    """The declared element count against what is stored (fixed-width types with raw data)."""
    if not tensor.HasField("raw_data"):
        return
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except Exception:  # an unknown element type: the type check names it
        return
    if tensor.data_type in (onnx.TensorProto.STRING,) or itemsize == 0:
        return
    expected = math.prod(dims) * itemsize
    packed = {getattr(onnx.TensorProto, n, None) for n in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")}
    if tensor.data_type not in packed and len(tensor.raw_data) != expected:
        raise ValueError(
            f"munet.onnx.load: {what} declares shape {dims} ({expected} bytes) but holds {len(tensor.raw_data)} bytes"
        )


def _with_external_data(onnx, tensor, base_dir: str | None, what: str):
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location")
    if not location:
        raise ValueError(f"munet.onnx.load: {what} keeps its data externally but names no location")
    if base_dir is None:
        raise ValueError(
            f"munet.onnx.load: {what} keeps its data in the external file {location!r}: load the model from its "
            "path so the file beside it can be read"
        )
    root = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, path]) != root:
        raise ValueError(
            f"munet.onnx.load: {what}: external data location {location!r} points outside the model's directory"
        )
    if not os.path.isfile(path):
        raise ValueError(f"munet.onnx.load: {what}: external data file {location!r} is missing beside the model")
    try:
        offset, length = int(info.get("offset", 0)), int(info.get("length", -1))
    except ValueError:
        raise ValueError(f"munet.onnx.load: {what}: external data offset/length are not integers") from None
    size = os.path.getsize(path)
    if offset < 0 or offset > size or (length >= 0 and offset + length > size):
        raise ValueError(
            f"munet.onnx.load: {what}: external data ({location!r}, offset {offset}) runs past the file's end"
        )
    with open(path, "rb") as stream:
        stream.seek(offset)
        data = stream.read(length if length >= 0 else size - offset)
    inline = onnx.TensorProto()
    inline.CopyFrom(tensor)
    inline.ClearField("external_data")
    inline.data_location = onnx.TensorProto.DEFAULT
    inline.raw_data = data
    return inline

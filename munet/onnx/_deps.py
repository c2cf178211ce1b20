"""The optional ``onnx`` dependency, imported on first use so ``import munet`` works without it."""

from __future__ import annotations


def require_onnx():
    """The ``onnx`` module, or an ImportError saying how to install it."""
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - the test environment has onnx
        raise ImportError("munet.onnx needs the onnx package: pip install 'munet[onnx]' (or pip install onnx)") from exc
    return onnx


def tensor_type(dtype) -> int:
    """The ONNX ``TensorProto`` element type of a MuNet dtype."""
    onnx = require_onnx()
    name = dtype.np.name if hasattr(dtype, "np") else str(dtype)
    code = _ELEMENT_TYPES.get(name)
    if code is None:
        raise TypeError(f"munet.onnx: dtype {name} has no ONNX element type")
    return getattr(onnx.TensorProto, code)


_ELEMENT_TYPES = {
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "float16": "FLOAT16",
    "bfloat16": "BFLOAT16",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "uint8": "UINT8",
    "uint16": "UINT16",
    "uint32": "UINT32",
    "uint64": "UINT64",
    "bool": "BOOL",
}


def munet_dtype(element_type: int):
    """The MuNet dtype of an ONNX element type, or None when MuNet has none (strings, complex, float8...)."""
    import munet

    onnx = require_onnx()
    for name, code in _ELEMENT_TYPES.items():
        if getattr(onnx.TensorProto, code) == element_type:
            return getattr(munet, name, None)
    return None

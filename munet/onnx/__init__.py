"""ONNX interchange: ``export`` a traced model, ``load`` an ONNX model as a MuNet program.

The ``onnx`` package is imported on first use, so ``import munet`` works without it.
"""

from munet.onnx.emitter import ExportError
from munet.onnx.export import export
from munet.onnx.from_torch import from_torch
from munet.onnx.import_ops import UnsupportedError
from munet.onnx.load import load
from munet.onnx.program import Program

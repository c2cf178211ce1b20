"""``munet.onnx.from_torch``: a PyTorch module as a MuNet program, through ``torch.onnx.export``.

torch is optional: it is imported here, on the call, and its absence is an ImportError naming
the extra that installs it.
"""

from __future__ import annotations

import io
import warnings


def from_torch(module, example_args, *, opset_version: int = 18, dynamo: bool = False, device="cpu", optimize=True):
    """Export ``module(*example_args)`` with ``torch.onnx.export`` (TorchScript exporter by default;
    ``dynamo=True`` uses the dynamo exporter, which needs onnxscript) and load the result with
    :func:`munet.onnx.load`. ``example_args`` are torch tensors (a single tensor or a tuple).
    The program's inputs are named ``input_0, input_1, ...`` in the order of ``example_args``."""
    try:
        import torch
    except ImportError as exc:
        raise ImportError(
            "munet.onnx.from_torch needs PyTorch: pip install 'munet[onnx-torch]' (or pip install torch)"
        ) from exc
    from munet.onnx.load import load

    if not isinstance(example_args, tuple):
        example_args = (example_args,)
    if not all(isinstance(a, torch.Tensor) for a in example_args):
        kinds = [type(a).__name__ for a in example_args]
        raise TypeError(f"munet.onnx.from_torch: example_args must be torch tensors, got {kinds}")
    buffer = io.BytesIO()
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter's notice
            torch.onnx.export(
                module,
                example_args,
                buffer,
                opset_version=opset_version,
                input_names=[f"input_{i}" for i in range(len(example_args))],
                dynamo=dynamo,
            )
    finally:
        module.train(was_training)
    return load(buffer.getvalue(), device=device, optimize=optimize)

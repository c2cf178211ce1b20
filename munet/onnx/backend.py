"""``onnx.backend.base.Backend`` over :func:`munet.onnx.load`, so onnx's own backend tests run MuNet.

``prepare(model, device)`` imports the model (everything is checked then) and returns a
:class:`MunetRep` whose ``run(inputs)`` takes NumPy arrays by position (or a dict by name) and
returns NumPy arrays in the declared ONNX types (lists for sequences, None for an empty optional),
as onnx's test runner expects::

    from munet.onnx.backend import MunetBackend
    outputs = MunetBackend.run_model(model, [x])
"""

from __future__ import annotations

from munet.onnx._deps import require_onnx

require_onnx()

from onnx.backend.base import Backend, BackendRep  # noqa: E402 - the clear ImportError above comes first

# onnx's device names -> MuNet's device types
DEVICES = {"CPU": "cpu", "CUDA": "cuda"}


class MunetRep(BackendRep):
    def __init__(self, program):
        self.program = program

    def run(self, inputs, **kwargs):
        import munet

        args = (inputs,) if isinstance(inputs, dict) else tuple(inputs)
        with munet.no_grad():
            outputs = self.program(*args)
        return self.program.to_numpy(outputs)


class MunetBackend(Backend):
    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs):
        from munet.onnx.load import load

        return MunetRep(load(model, device=_munet_device(device), **kwargs))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        import munet
        from munet._device import get_backend

        kind = DEVICES.get(str(device).split(":")[0].upper())
        if kind is None:
            return False
        try:
            get_backend(munet.device(kind))
        except Exception:  # no such MuNet backend, or no device of that kind on this machine
            return False
        return True


def _munet_device(device: str) -> str:
    kind, _, index = str(device).partition(":")
    munet_kind = DEVICES.get(kind.upper())
    if munet_kind is None:
        raise ValueError(f"munet.onnx.backend: unknown device {device!r}; expected one of {sorted(DEVICES)}")
    return munet_kind + (f":{index}" if index else "")


prepare = MunetBackend.prepare
run_model = MunetBackend.run_model
supports_device = MunetBackend.supports_device

"""``DataParallel``: one process, several devices; each forward splits the batch over replicas.

As PyTorch's ``nn.DataParallel``: the module lives on ``device_ids[0]``; a forward chunks the
inputs along ``dim``, copies the module to each device (its parameters moved there through
differentiable copies), runs the replicas in threads and concatenates the outputs on
``output_device``. Backward flows through those copies into the module's own parameters, so
their ``.grad`` is the gradient of the loss on the gathered output.
"""

from __future__ import annotations

from itertools import chain

from munet._device import as_device, device
from munet.autograd.grad_mode import is_grad_enabled
from munet.nn.module import Module
from munet.nn.parallel.replicate import parallel_apply, replicate_module
from munet.nn.parallel.scatter_gather import gather, scatter_kwargs
from munet.ops.convert import to_device


def resolve_devices(device_ids, default: device, what: str) -> list[device]:
    """Devices from names, ``munet.device`` objects or indices (of ``default``'s device type)."""
    resolved = []
    for d in device_ids:
        if isinstance(d, int) and not isinstance(d, bool):
            resolved.append(default if default.type == "cpu" else device(default.type, d))
        elif isinstance(d, (str, device)):
            resolved.append(as_device(d))
        else:
            raise TypeError(f"{what}: devices must be names, munet.device or ints, got {type(d).__name__}")
    return resolved


def module_device(module: Module) -> device:
    first = next(chain(module.parameters(), module.buffers()), None)
    return as_device("cpu") if first is None else first.device


class DataParallel(Module):
    """Run ``module`` on ``device_ids`` in parallel, splitting each batch along ``dim``.

    ``device_ids=None`` uses the device the module is on (a plain call). Integers are indices of
    the module's device type. ``output_device`` (default ``device_ids[0]``) receives the outputs.
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be a munet.nn.Module, got {type(module).__name__}")
        home = module_device(module)
        ids = [home] if device_ids is None else resolve_devices(device_ids, home, "DataParallel")
        if not ids:
            raise ValueError("DataParallel: device_ids must name at least one device")
        self.module = module
        self.dim = dim
        self.device_ids = ids
        self.output_device = (
            ids[0] if output_device is None else resolve_devices([output_device], home, "DataParallel")[0]
        )
        self.src_device_obj = ids[0]

    def forward(self, *inputs, **kwargs):
        for t in chain(self.module.parameters(), self.module.buffers()):
            if t.device != self.src_device_obj:
                raise RuntimeError(
                    f"module must have its parameters and buffers on device {self.src_device_obj} (device_ids[0]) "
                    f"but found one of them on device: {t.device}"
                )
        inputs, module_kwargs = scatter_kwargs(inputs, kwargs, self.device_ids, self.dim)
        if not inputs and not module_kwargs:
            inputs, module_kwargs = ((),), ({},)
        if len(self.device_ids) == 1:
            return self.module(*inputs[0], **module_kwargs[0])
        devices = self.device_ids[: len(inputs)]
        replicas = self.replicate(self.module, devices)
        outputs = parallel_apply(replicas, list(inputs), list(module_kwargs), devices)
        return gather(outputs, self.output_device, self.dim)

    def replicate(self, module: Module, devices: list[device]) -> list[Module]:
        """Replica 0 shares the module's buffers (so running statistics update it), the others copy them.

        Under grad mode, parameters reach each device through a differentiable copy (the parameter
        itself on its own device); without it, through a detached one.
        """
        grad = is_grad_enabled()
        replicas = []
        for i, d in enumerate(devices):

            def param_on(p, d=d):
                return to_device(p if grad else p.detach(), d)

            def buffer_on(b, d=d, first=i == 0):
                return b if first and b.device == d else b.detach().to(d, copy=True)

            replicas.append(replicate_module(module, param_on, buffer_on))
        return replicas

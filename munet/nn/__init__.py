"""Neural-network building blocks: modules, layers, containers, functional, init and utils."""

from munet.nn import attention, functional, init, modules, utils
from munet.nn.containers import Container, ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from munet.nn.factory import factory_kwargs
from munet.nn.module import Module
from munet.nn.parameter import Buffer, Parameter

__all__ = [
    "Buffer",
    "Container",
    "Module",
    "ModuleDict",
    "ModuleList",
    "Parameter",
    "ParameterDict",
    "ParameterList",
    "Sequential",
    "attention",
    "factory_kwargs",
    "functional",
    "init",
    "utils",
]


def _export_layers(namespace: dict) -> None:
    for family in modules.FAMILIES:
        for name in family.__all__:
            namespace[name] = getattr(family, name)
            __all__.append(name)


_export_layers(globals())

from munet.nn import parallel  # after the layers: DistributedDataParallel is a Module
from munet.nn.parallel import DataParallel, SyncBatchNorm

__all__ += ["DataParallel", "SyncBatchNorm", "parallel"]

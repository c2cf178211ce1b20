"""Neural-network building blocks: modules, containers, functional, init and utils."""

from munet.nn import functional, init, utils
from munet.nn.containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from munet.nn.module import Module
from munet.nn.parameter import Buffer, Parameter

__all__ = [
    "Buffer",
    "Module",
    "ModuleDict",
    "ModuleList",
    "Parameter",
    "ParameterDict",
    "ParameterList",
    "Sequential",
    "functional",
    "init",
    "utils",
]

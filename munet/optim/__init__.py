"""``munet.optim``: optimizers over parameter groups, with PyTorch's update rules and defaults."""

from munet.optim import lr_scheduler, swa_utils
from munet.optim.adadelta import Adadelta
from munet.optim.adafactor import Adafactor
from munet.optim.adagrad import Adagrad
from munet.optim.adam import Adam, AdamW
from munet.optim.adamax import Adamax
from munet.optim.asgd import ASGD
from munet.optim.lbfgs import LBFGS
from munet.optim.muon import Muon
from munet.optim.nadam import NAdam
from munet.optim.optimizer import Optimizer, required
from munet.optim.radam import RAdam
from munet.optim.rmsprop import RMSprop
from munet.optim.rprop import Rprop
from munet.optim.sgd import SGD
from munet.optim.sparse_adam import SparseAdam

__all__ = [
    "ASGD",
    "SGD",
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "LBFGS",
    "Muon",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "SparseAdam",
    "lr_scheduler",
    "required",
    "swa_utils",
]

"""``munet.optim``: optimizers over parameter groups, with PyTorch's update rules and defaults."""

from munet.optim import lr_scheduler, swa_utils
from munet.optim.adadelta import Adadelta
from munet.optim.adagrad import Adagrad
from munet.optim.adam import Adam, AdamW
from munet.optim.adamax import Adamax
from munet.optim.asgd import ASGD
from munet.optim.lbfgs import LBFGS
from munet.optim.nadam import NAdam
from munet.optim.optimizer import Optimizer, required
from munet.optim.radam import RAdam
from munet.optim.rmsprop import RMSprop
from munet.optim.rprop import Rprop
from munet.optim.sgd import SGD

__all__ = [
    "ASGD",
    "SGD",
    "Adadelta",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "LBFGS",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "lr_scheduler",
    "required",
    "swa_utils",
]

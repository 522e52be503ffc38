"""ember.optim: optimizers with PyTorch's update formulas, and learning-rate schedulers."""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW
from .rmsprop import RMSprop
from .adagrad import Adagrad
from .adadelta import Adadelta
from .adamax import Adamax
from .nadam import NAdam
from .radam import RAdam
from .rprop import Rprop
from .asgd import ASGD
from .lbfgs import LBFGS
from .adafactor import Adafactor
from .muon import Muon
from .sparse_adam import SparseAdam
from . import lr_scheduler, swa_utils
from ._swap_in import swap_in_optimizer_params_and_state

__all__ = ["Optimizer", "SparseAdam", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
           "Rprop", "ASGD", "LBFGS", "Adafactor", "Muon", "lr_scheduler", "swa_utils",
           "swap_in_optimizer_params_and_state"]

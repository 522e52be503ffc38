"""``ember.ao.pruning``: sparsifiers that learn weight masks during training (torch.ao.pruning).

A sparsifier ``prepare``s a model by attaching a ``FakeSparsity`` parametrization (``weight =
mask * original``) to each configured tensor; ``step()`` recomputes the masks (``update_mask``:
the lowest-norm blocks for ``WeightNormSparsifier``, a band for ``NearlyDiagonalSparsifier``);
``squash_mask()`` bakes the masks into the weights and removes the parametrizations. Schedulers
(``LambdaSL``, ``CubicSL``) move each group's ``sparsity_level`` over the steps, as learning-rate
schedulers move an optimizer's learning rate.
"""
from ._mappings import get_dynamic_sparse_quantized_mapping, get_static_sparse_quantized_mapping  # noqa: F401
from .scheduler.base_scheduler import BaseScheduler  # noqa: F401
from .scheduler.cubic_scheduler import CubicSL  # noqa: F401
from .scheduler.lambda_scheduler import LambdaSL  # noqa: F401
from .sparsifier.base_sparsifier import BaseSparsifier  # noqa: F401
from .sparsifier.nearly_diagonal_sparsifier import NearlyDiagonalSparsifier  # noqa: F401
from .sparsifier.utils import FakeSparsity, fqn_to_module, get_arg_info_from_tensor_fqn, module_to_fqn  # noqa: F401
from .sparsifier.weight_norm_sparsifier import WeightNormSparsifier  # noqa: F401

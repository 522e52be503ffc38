"""Graph passes: small, independent analyses and rewrites over fx graphs.

Why a package of tiny modules: each pass is something a compiler stage
(dynamo, aot, inductor) picks individually; none of them should drag in the
others.
"""

from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .dot import to_dot
from .shape_prop import ShapeProp, TensorMetadata
from .tabular import format_tabular, print_tabular

__all__ = [
    "eliminate_dead_code",
    "eliminate_common_subexpressions",
    "ShapeProp",
    "TensorMetadata",
    "print_tabular",
    "format_tabular",
    "to_dot",
]

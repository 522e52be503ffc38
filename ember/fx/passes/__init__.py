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

# torch.fx.passes exposes its pass modules as attributes; ember imports them on
# first access so ``import ember.fx`` stays light.
_SUBMODULES = (
    "annotate_getitem_nodes", "backends", "fake_tensor_prop", "graph_drawer", "graph_manipulation",
    "graph_transform_observer", "infra", "net_min_base", "operator_support", "param_fetch", "reinplace",
    "runtime_assert", "shape_prop", "split_module", "split_utils", "splitter_base", "tools_common", "utils",
)


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Collect the attributes a lowering backend needs from each leaf module
(``torch.fx.passes.param_fetch``).

Why a fixed table: a backend lowering ``call_module`` nodes needs the
module's parameters and hyper-parameters (a Conv2d's weight, stride,
padding...), and must refuse modules whose layout it does not know -- a newer
module ``_version`` may have changed what its attributes mean.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

__all__ = ["default_matching", "extract_attrs_for_lowering", "lift_lowering_attrs_to_nodes"]


def default_matching(name: str, target_version: int) -> str:
    """Attribute ``name`` is called the same in every module version."""
    return name


def _fetch_book() -> Dict[type, Tuple[int, List[str], Callable[[str, int], str]]]:
    from ... import nn

    return {
        nn.Linear: (1, ["weight", "bias"], default_matching),
        nn.Conv2d: (1, ["weight", "bias", "kernel_size", "stride", "padding", "dilation", "groups", "padding_mode"],
                    default_matching),
        nn.BatchNorm2d: (2, ["weight", "bias", "running_mean", "running_var", "eps"], default_matching),
        nn.AdaptiveAvgPool2d: (1, [], default_matching),
        nn.MaxPool2d: (1, ["kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode"],
                       default_matching),
        nn.ReLU: (1, ["inplace"], default_matching),
    }


def extract_attrs_for_lowering(mod: Any) -> Dict[str, Any]:
    """``{"name": typename, <attr>: value...}`` for a module in the fetch
    table; RuntimeError for other modules or newer module versions."""
    from ... import typename

    book = _fetch_book()
    attrs: Dict[str, Any] = {"name": typename(mod)}
    if type(mod) not in book:
        raise RuntimeError(
            f"{typename(mod)} is not in the module_fetch_book yet; ember.fx.passes.param_fetch knows "
            f"{sorted(c.__name__ for c in book)}"
        )
    version, names, matching = book[type(mod)]
    mod_version = getattr(mod, "_version", 1)
    if version < mod_version:
        raise RuntimeError(
            f"Fetcher version {version} try to fetch {typename(mod)} version {mod_version}, "
            "please upgrade the module_fetch_book"
        )
    for attr in names:
        attrs[attr] = getattr(mod, matching(attr, mod_version))
    return attrs


def lift_lowering_attrs_to_nodes(fx_module: Any) -> None:
    """Set ``node.attrs_for_lowering`` on every ``call_module`` node of
    ``fx_module`` (recursing into GraphModule submodules)."""
    from ..graph_module import GraphModule

    submodules = dict(fx_module.named_modules())
    for node in fx_module.graph.nodes:
        if node.op != "call_module":
            continue
        sub = submodules[node.target]
        if isinstance(sub, GraphModule):
            lift_lowering_attrs_to_nodes(sub)
        else:
            node.attrs_for_lowering = extract_attrs_for_lowering(sub)

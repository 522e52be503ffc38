"""``fuse_fx``'s pass: find chains of modules the backend fuses (conv-bn-relu, linear-relu,
bn-relu ...) where each link's output feeds only the next, build the fused module with the
pattern's fuser method (eval: the batch norm folded in; QAT: ConvBn2d ... keep it), put it
where the first module was and drop the rest from the graph."""
from __future__ import annotations

from ember import nn
from ember.fx import GraphModule

from ._patterns import match_chain, pattern_configs

__all__ = ["fuse_graph"]


def _module_of(node, modules, training):
    """The module a chain link stands for (a functional relu becomes an ``nn.ReLU``)."""
    if node.op == "call_module":
        return modules[node.target]
    relu = nn.ReLU()
    relu.training = training
    return relu


def _set_module(root, qualified_name, module):
    *parents, last = qualified_name.split(".")
    owner = root
    for p in parents:
        owner = getattr(owner, p)
    setattr(owner, last, module)


def fuse_graph(gm, backend_config, is_qat, preserved=()):
    """The fused GraphModule (``gm``'s graph and submodules are edited on the way)."""
    modules = dict(gm.named_modules())
    fusions = [(chain, conf) for chain, conf in pattern_configs(backend_config)
               if conf.fuser_method is not None and len(chain) > 1]
    claimed = set()
    for node in list(gm.graph.nodes):
        if node in claimed or node.op != "call_module":
            continue
        for chain, conf in fusions:
            nodes = match_chain(node, chain, modules, claimed)
            if nodes is None:
                continue
            first = modules[node.target]
            mods = [_module_of(n, modules, first.training) for n in nodes]
            fused = conf.fuser_method(is_qat, *mods)
            _set_module(gm, node.target, fused)
            modules[node.target] = fused
            last = nodes[-1]
            last.replace_all_uses_with(node)
            for n in reversed(nodes[1:]):
                gm.graph.erase_node(n)
            claimed.update(nodes)
            break
    gm.graph.lint()
    # a fresh GraphModule holds just the modules the graph calls (the fused modules' parts
    # included: ember.fx's delete_all_unused_submodules would drop those)
    out = GraphModule(gm, gm.graph, type(gm).__name__)
    out.meta.update(gm.meta)
    for attr in preserved:
        if hasattr(gm, attr):
            setattr(out, attr, getattr(gm, attr))
    return out

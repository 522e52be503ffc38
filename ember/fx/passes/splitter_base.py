"""Split a GraphModule into accelerator and CPU submodules
(``torch.fx.passes.splitter_base``).

Why a class with overridable steps: a backend that lowers "what it can" to an
accelerator needs the graph cut into as few alternating pieces as possible
(``_run_on_acc_<i>`` / ``_run_on_cpu_<i>``), with backend-specific rules on
top (a minimum acc piece size, no non-tensor values crossing a boundary, its
own lowering for the preview). :class:`_SplitterBase` does the generic part:

1. :class:`FxNetAccNodesFinder` asks the :class:`OperatorSupportBase` which
   nodes the accelerator runs, then (unless ``allow_non_tensor``) drops acc
   nodes that would exchange a non-tensor value with a CPU node;
2. :class:`~ember.fx.passes.tools_common.FxNetAccFusionsFinder` groups acc
   nodes that pass non-tensors among themselves, and the dependency graph makes
   each group move as one;
3. :meth:`_SplitterBase.put_nodes_into_subgraphs` walks the graph from its
   inputs, taking ready nodes of the current kind until none is left, then
   switching kind; small acc pieces are merged into their CPU neighbours;
4. the nodes are tagged and :func:`~ember.fx.passes.split_utils.split_by_tags`
   builds the split module.
"""

from __future__ import annotations

import argparse
import copy
import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from ..node import Node, map_arg
from .graph_manipulation import get_size_of_node
from .operator_support import OperatorSupportBase, get_node_target
from .shape_prop import ShapeProp
from .split_utils import move_non_tensor_nodes_on_boundary, split_by_tags
from .tools_common import (
    CALLABLE_NODE_OPS,
    FxNetAccFusionsFinder,
    NodeList,
    NodeSet,
    Tensors,
    is_node_output_tensor,
)

__all__ = [
    "FxNetAccNodesFinder",
    "FxNetSplitterInternalError",
    "Subgraph",
    "SplitResult",
    "generate_inputs_for_submodules",
    "NodeEvent",
    "NodeEventTracker",
]

DEFAULT_MIN_ACC_MODULE_SIZE = 1
DEFAULT_SKIP_FUSION = False
DEFAULT_ALLOW_NON_TENSOR = False

TRACKER_DUMP_PATH = "_fx_net_tracker"
NODES_SUFFIX = "_nodes.txt"
ALL_SUFFIX = "_all.txt"
ENV_FX_NET_ACC_SPLITTER_TRACKER_MODE = "FX_NET_ACC_SPLITTER_TRACKER_MODE"
ENV_FX_NET_ACC_SPLITTER_TRACKER_DUMP_PATH = "FX_NET_ACC_SPLITTER_TRACKER_DUMP_PATH"
ENV_FX_NET_ACC_SPLITTER_TRACKER_TRACKED_NODES = "FX_NET_ACC_SPLITTER_TRACKER_TRACKED_NODES"
DUMP_PREFIX = os.environ.get(ENV_FX_NET_ACC_SPLITTER_TRACKER_DUMP_PATH, TRACKER_DUMP_PATH)
#: "0": keep events in memory only; "1": also write them all to DUMP_PREFIX_all.txt;
#: "2": also follow the nodes named in FX_NET_ACC_SPLITTER_TRACKER_TRACKED_NODES (comma
#: separated) to DUMP_PREFIX_nodes.txt; "3": follow every node with more than one event
TRACKER_MODE = os.environ.get(ENV_FX_NET_ACC_SPLITTER_TRACKER_MODE, "0")


class _SplitterSettingBase:
    """Splitter options. Each can also come from the command line
    (``--min-acc-module-size N``, ``--skip-fusion``, ``--allow-non-tensor``,
    ``--max-acc-splits N``, ``--move-non-tensor-nodes-on-boundary``; unknown
    arguments are ignored), which then wins over the constructor's value."""

    def __init__(self, min_acc_module_size: int = DEFAULT_MIN_ACC_MODULE_SIZE, skip_fusion: bool = DEFAULT_SKIP_FUSION,
                 allow_non_tensor: bool = DEFAULT_ALLOW_NON_TENSOR, max_acc_splits: int = -1,
                 move_non_tensor_nodes_on_boundary: bool = False) -> None:
        parser = argparse.ArgumentParser()
        parser.add_argument("--min-acc-module-size", "--min_acc_module_size", required=False, type=int,
                            help="Minimum size limit of an accelerator subgraph.")
        parser.add_argument("--max-acc-splits", "--max_acc_splits", required=False, type=int,
                            help="Enforce a maximum number of split subgraphs.")
        parser.add_argument("--skip-fusion", "--skip_fusion", default=False, action="store_true",
                            help="No fusion groups (non-tensor data may flow between submodules).")
        parser.add_argument("--allow-non-tensor", "--allow_non_tensor", default=False, action="store_true",
                            help="Keep acc nodes that exchange non-tensor values with cpu nodes.")
        parser.add_argument("--move-non-tensor-nodes-on-boundary", "--move_non_tensor_nodes_on_boundary",
                            required=False, action="store_true",
                            help="Move non-tensor nodes on an acc boundary downstream.")
        args, _unknown = parser.parse_known_args()
        self.min_acc_module_size: int = args.min_acc_module_size or min_acc_module_size
        self.skip_fusion: bool = args.skip_fusion or skip_fusion
        self.allow_non_tensor: bool = args.allow_non_tensor or allow_non_tensor
        self.max_acc_splits: int = max_acc_splits
        self.move_non_tensor_nodes_on_boundary: bool = (
            args.move_non_tensor_nodes_on_boundary or move_non_tensor_nodes_on_boundary)


class NodeEvent:
    """One decision the acc-node finder made about a node (``desc``), and
    the node that caused it (``dep``), if any."""

    def __init__(self, source: Node, desc: str, dep: Optional[Node] = None) -> None:
        self.source = source
        self.desc = desc
        self.dep = dep

    def to_str(self) -> str:
        return f"{self.source.name}: {self.desc} {self.dep.name if self.dep is not None else '#'}"


class NodeEventTracker:
    """Why each node ended up acc or cpu: the events of every node, written
    to files per ``TRACKER_MODE`` (see the module constants)."""

    def __init__(self, tracker_mode: int, dump_prefix: str) -> None:
        self.tracker_mode = tracker_mode
        self.dump_prefix = dump_prefix
        self.events: List[NodeEvent] = []
        self.node_events: Dict[str, List[int]] = defaultdict(list)
        self.writer = print

    def add(self, node: Node, desc: str, dep: Optional[Node] = None) -> None:
        self.events.append(NodeEvent(node, desc, dep))
        self.node_events[node.name].append(len(self.events) - 1)

    def print_node(self, node_name: str, recursive: bool = False, tab: str = "", writer: Optional[Callable] = None) -> None:
        writer = writer or self.writer
        for idx in self.node_events.get(node_name, []):
            event = self.events[idx]
            writer(tab + event.to_str())
            if recursive and event.dep is not None:
                self.print_node(event.dep.name, recursive=True, tab="| " + tab, writer=writer)

    def to_dict(self) -> Dict[str, List[str]]:
        return {name: [self.events[i].to_str() for i in idxs] for name, idxs in self.node_events.items()}

    def print_all(self, writer: Optional[Callable] = None) -> None:
        writer = writer or self.writer
        for name in self.node_events:
            writer(f"Node: {name}:")
            self.print_node(name, recursive=False, tab="  ", writer=writer)

    def dump(self) -> None:
        if self.tracker_mode <= 0:
            return
        with open(self.dump_prefix + ALL_SUFFIX, "w") as f:
            self.print_all(lambda s: f.write(s + "\n"))
        if self.tracker_mode == 1:
            return
        if self.tracker_mode == 2:
            wanted = os.environ.get(ENV_FX_NET_ACC_SPLITTER_TRACKER_TRACKED_NODES, "")
            names = [n for n in wanted.split(",") if n]
        else:
            names = [n for n, idxs in self.node_events.items() if len(idxs) > 1]
        with open(self.dump_prefix + NODES_SUFFIX, "w") as f:
            for name in names:
                f.write(f"Node: {name}:\n")
                self.print_node(name, recursive=True, tab="  ", writer=lambda s: f.write(s + "\n"))


class FxNetAccNodesFinder:
    """The set of nodes to run on the accelerator: callable nodes the
    operator support accepts, less (unless ``allow_non_tensor``) those that
    would exchange a non-tensor value with a CPU node. A chain of acc nodes
    producing non-tensors that ends in a CPU node goes to the CPU whole."""

    def __init__(self, module: Any, operator_support: OperatorSupportBase, allow_non_tensor: bool) -> None:
        self.module = module
        self.operator_support = operator_support
        self.allow_non_tensor = allow_non_tensor
        self.acc_nodes: NodeSet = set()
        self.tracker = NodeEventTracker(int(TRACKER_MODE), DUMP_PREFIX)

    def reduce_acc_nodes_non_tensor_input_helper(self, cpu_worklist: NodeList) -> None:
        """Readers of the CPU nodes in ``cpu_worklist`` leave the acc set; those
        of them producing non-tensors join the worklist."""
        while cpu_worklist:
            node = cpu_worklist.pop(0)
            for user in node.users:
                if user not in self.acc_nodes:
                    continue
                self.acc_nodes.remove(user)
                self.tracker.add(user, "acc_del|user_of_new_cpu_node", node)
                if not is_node_output_tensor(user):
                    self.tracker.add(user, "new_cpu_node|non_tensor_output")
                    cpu_worklist.append(user)

    def reduce_acc_nodes_non_tensor_input(self) -> None:
        """Acc nodes reading a non-tensor made by a CPU node go to the CPU."""
        worklist: NodeList = []
        for node in self.module.graph.nodes:
            if node.op in CALLABLE_NODE_OPS and node not in self.acc_nodes and not is_node_output_tensor(node):
                self.tracker.add(node, "new_cpu_node|callable_non_tensor_input")
                worklist.append(node)
        self.reduce_acc_nodes_non_tensor_input_helper(worklist)

    def reduce_acc_nodes_non_tensor_output(self) -> None:
        """Acc nodes producing a non-tensor read by a CPU node go to the CPU
        (repeated until nothing changes)."""
        while True:
            moved: NodeList = []
            for acc_node in self.acc_nodes:
                if is_node_output_tensor(acc_node):
                    continue
                for user in acc_node.users:
                    if user not in self.acc_nodes:
                        moved.append(acc_node)
                        self.tracker.add(acc_node, "acc_del|non_tensor_output_with_cpu_user", user)
                        break
            if not moved:
                return
            for n in moved:
                self.acc_nodes.remove(n)
            self.reduce_acc_nodes_non_tensor_input_helper(moved)

    def __call__(self) -> NodeSet:
        submodules = dict(self.module.named_modules())
        self.acc_nodes = set()
        for n in self.module.graph.nodes:
            if n.op not in CALLABLE_NODE_OPS:
                self.tracker.add(n, "init_cpu|not_callable")
            elif not self.operator_support.is_node_supported(submodules, n):
                self.tracker.add(n, "init_cpu|operator_support")
            else:
                self.tracker.add(n, "init_acc|callable_and_operator_supported")
                self.acc_nodes.add(n)
        if not self.allow_non_tensor:
            self.reduce_acc_nodes_non_tensor_input()
            self.reduce_acc_nodes_non_tensor_output()
        self.tracker.dump()
        return self.acc_nodes


class FxNetSplitterInternalError(Exception):
    pass


@dataclass
class Subgraph:
    is_acc: bool
    nodes: NodeList
    device_ordinal: Optional[int] = None


class SplitResult(NamedTuple):
    """What :meth:`_SplitterBase.generate_split_results` returns: the split
    module, ``{submodule name: its inputs on the sample input}``, and the
    prefix of the non-acc submodules (acc ones start with ``_run_on_acc_``)."""

    split_module: Any
    submodule_inputs: Dict[str, Any]
    non_acc_submodule_prefix: str


def generate_inputs_for_submodules(model: Any, inputs: Sequence[Any], target_submodules: Iterable[str],
                                   deepcopy: bool = False) -> Dict[str, Any]:
    """``{name: args}`` for each submodule of ``model`` named in
    ``target_submodules``: the positional arguments it received while
    ``model(*inputs)`` ran (under no_grad; deep-copied with ``deepcopy``).
    A module reachable under two names is recorded under one of them."""
    from ...autograd import no_grad

    wanted = set(target_submodules)
    results: Dict[str, Any] = {}
    names = {id(mod): name for name, mod in model.named_modules()}
    handles = []

    def record(module: Any, module_inputs: Tuple[Any, ...]) -> None:
        results[names[id(module)]] = copy.deepcopy(module_inputs) if deepcopy else module_inputs

    for name, mod in model.named_modules():
        if name in wanted:
            handles.append(mod.register_forward_pre_hook(record))
    try:
        with no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return results


class _SplitterBase:
    """Splits ``module`` into ``_run_on_acc_<i>`` submodules (nodes
    ``operator_support`` accepts) and ``<non_acc_submodule_name><i>`` ones
    (the rest), as few and as large as the data flow allows; ``i`` counts
    all pieces in order. For ``d = sin(a) + cos(a)`` with sin and cos on the
    accelerator::

        def forward(self, a):
            _run_on_acc_0 = self._run_on_acc_0(a)
            getitem = _run_on_acc_0[0]
            getitem_1 = _run_on_acc_0[1]
            _run_on_cpu_1 = self._run_on_cpu_1(getitem, getitem_1)
            return _run_on_cpu_1

    ``splitter()`` returns the split module; :meth:`node_support_preview` and
    :meth:`split_preview` report what would happen. Subclasses override
    :meth:`_lower_model_to_backend` / :meth:`_find_culprit` for the preview.
    The constructor runs ShapeProp on ``sample_input``.
    """

    #: bytes per second between host and accelerator, for the preview's bound
    PCIe_BW = 100 * 2**30

    def __init__(self, module: Any, sample_input: Sequence[Any], operator_support: OperatorSupportBase,
                 settings: _SplitterSettingBase, non_acc_submodule_name: str = "_run_on_cpu_",
                 return_tuple: bool = False, nodes_finder: Optional[FxNetAccNodesFinder] = None) -> None:
        from ..graph_module import GraphModule

        if not isinstance(module, GraphModule):
            raise AssertionError(f"Expected GraphModule, got {type(module)}")
        self.module = module
        ShapeProp(self.module).propagate(*sample_input)
        self.settings = settings
        self.operator_support = operator_support
        self.sample_input = sample_input
        if nodes_finder is None:
            nodes_finder = FxNetAccNodesFinder(self.module, self.operator_support, self.settings.allow_non_tensor)
        self.acc_nodes = nodes_finder()
        if self.settings.skip_fusion:
            self.fusions: Dict[Node, NodeSet] = {}
        else:
            self.fusions = FxNetAccFusionsFinder(module, self.acc_nodes)()
        self.deps = self.find_deps()
        self.update_deps_for_fusions()
        self.non_acc_submodule_name = non_acc_submodule_name
        self._node_submodule_map: Dict[str, str] = {}
        self._return_tuple = return_tuple
        self.tags: List[str] = []

    # -- dependencies -------------------------------------------------------------
    def get_node_submodule_map(self) -> Dict[str, str]:
        """``{node name: submodule name}`` after tagging."""
        return self._node_submodule_map

    def find_deps(self) -> Dict[Node, NodeSet]:
        """``{node: the callable nodes it reads directly}`` (output node left out)."""
        deps: Dict[Node, NodeSet] = defaultdict(set)
        for node in self.module.graph.nodes:
            if node.op not in CALLABLE_NODE_OPS:
                continue
            for user in node.users:
                if user.op != "output":
                    deps[user].add(node)
        return deps

    def update_deps_for_fusions(self) -> None:
        """Members of a fusion group share the group's outside dependencies,
        and readers of any member depend on every member."""
        for node, fusion in self.fusions.items():
            for member in fusion:
                self.deps[node].update(self.deps[member] - fusion)
                for user in member.users:
                    if user not in fusion:
                        self.deps[user].add(node)

    # -- preview ----------------------------------------------------------------------
    def _lower_model_to_backend(self, mod: Any, inputs: Tensors) -> Any:
        """Lower ``mod`` to the backend (the base class keeps it as it is)."""
        return mod

    def _find_culprit(self, mod: Any, inputs: Tensors) -> str:
        """Explain a lowering/running failure of ``mod`` (subclasses)."""
        return "Unable to find a culprit because _find_culprit() function is not implemented."

    def _draw_graph_based_on_node_support(self, mod: Any, supported_nodes: NodeList) -> None:
        from .graph_drawer import FxGraphDrawer

        supported = set(supported_nodes)

        class _SupportDrawer(FxGraphDrawer):
            def _style(self, node: Node) -> Dict[str, str]:
                style = super()._style(node)
                if node.op in CALLABLE_NODE_OPS:
                    style["fillcolor"] = "chartreuse" if node in supported else "crimson"
                return style

        dot_graph = _SupportDrawer(mod, "node_support").get_main_dot_graph()
        dot_graph.write_raw("node_support.dot")

    def node_support_preview(self, dump_graph: bool = False) -> str:
        """A report of the supported and unsupported node types, each with the
        dtypes of its tensor arguments (printed and returned)."""
        submodules = dict(self.module.named_modules())
        supported_nodes: NodeList = []
        supported_types: Dict[str, set] = defaultdict(set)
        unsupported_types: Dict[str, set] = defaultdict(set)

        def dtype_of(arg: Node) -> Any:
            return getattr(arg.meta.get("tensor_meta"), "dtype", None)

        for node in self.module.graph.nodes:
            if node.op not in CALLABLE_NODE_OPS:
                continue
            target = get_node_target(submodules, node)
            arg_dtypes = [dtype_of(a) if isinstance(a, Node) else None for a in node.args]
            while arg_dtypes and arg_dtypes[-1] is None:
                arg_dtypes.pop()
            kwarg_dtypes = tuple((k, dtype_of(a)) for k, a in node.kwargs.items() if isinstance(a, Node))
            entry = (tuple(arg_dtypes), kwarg_dtypes)
            if self.operator_support.is_node_supported(submodules, node):
                supported_nodes.append(node)
                supported_types[target].add(entry)
            else:
                unsupported_types[target].add(entry)
        if dump_graph:
            self._draw_graph_based_on_node_support(self.module, supported_nodes)

        reports = "\nSupported node types in the model:\n"
        for t, entries in supported_types.items():
            for args_t, kwargs_t in entries:
                reports += f"{t}: ({args_t}, {dict(kwargs_t)})\n"
        reports += "\nUnsupported node types in the model:\n"
        for t, entries in unsupported_types.items():
            for args_t, kwargs_t in entries:
                reports += f"{t}: ({args_t}, {dict(kwargs_t)})\n"
        print(reports)
        return reports

    def split_preview(self, dump_graph: bool = False) -> str:
        """Split (tags are removed afterwards), then for each acc submodule
        report its input/output bytes, the PCIe-bound throughput, and whether
        :meth:`_lower_model_to_backend` and a run of the result succeed."""
        reports = ""
        subgraphs = self.put_nodes_into_subgraphs()
        n_acc = sum(1 for g in subgraphs if g.is_acc)
        reports += f"Before removing small acc subgraphs, total {len(subgraphs)} subgraphs are created:"
        reports += f" {n_acc} acc subgraphs and {len(subgraphs) - n_acc} cpu subgraphs.\n"
        subgraphs = self.remove_small_acc_subgraphs(subgraphs)
        n_acc = sum(1 for g in subgraphs if g.is_acc)
        reports += f"After removing small acc subgraphs, total {len(subgraphs)} subgraphs are created:"
        reports += f" {n_acc} acc subgraphs and {len(subgraphs) - n_acc} cpu subgraphs.\n"
        for i, sg in enumerate(subgraphs):
            reports += f"_run_on_acc_{i}: " if sg.is_acc else f"{self.non_acc_submodule_name}{i}: "
            reports += f"{len(sg.nodes)} node(s)\n"
        self.tag(subgraphs)
        split_mod = self.split(remove_tag=True)
        split_mod.eval()
        if dump_graph:
            from .graph_drawer import FxGraphDrawer

            for name, dot_graph in FxGraphDrawer(split_mod, "preview", ignore_getattr=True).get_all_dot_graphs().items():
                dot_graph.write_raw(f"{name}.dot")

        max_qps: float = self.PCIe_BW
        bottleneck = ""
        names = [n.target for n in split_mod.graph.nodes if n.op == "call_module" and "acc" in n.target]
        all_inputs = generate_inputs_for_submodules(split_mod, self.sample_input, names)
        for name in names:
            reports += f"\nProcessing acc submodule {name}\n"
            submod = getattr(split_mod, name)
            submod_inputs = all_inputs[name]
            ShapeProp(submod).propagate(*submod_inputs)
            in_bytes = out_bytes = 0
            output_node = None
            reports += "Checking inputs...\n"
            for n in submod.graph.nodes:
                if n.op == "placeholder":
                    if not is_node_output_tensor(n):
                        reports += f"Input {n.name} is not a tensor, this might cause problems during lowering!\n"
                    else:
                        in_bytes += get_size_of_node(submod, n)[0]
                elif n.op == "output":
                    output_node = n
            reports += "Checking outputs...\n"
            outs: NodeList = []
            map_arg(output_node.args, outs.append)
            for n in outs:
                if not is_node_output_tensor(n):
                    reports += f"Output {n.name} is not a tensor, this might cause problems during lowering!\n"
                else:
                    out_bytes += get_size_of_node(submod, n)[0]
            qps = self.PCIe_BW / max(in_bytes, out_bytes, 1)
            reports += (f"Total input size in bytes is {in_bytes}, total output size in bytes is {out_bytes},"
                        f" theoretical max qps (bounds by PCIe bandwidth) for this submodule is {qps}.\n")
            if qps < max_qps:
                max_qps, bottleneck = qps, name
            try:
                lowered = self._lower_model_to_backend(submod, submod_inputs)
            except RuntimeError:
                reports += "Run into an error during lowering!\n"
                reports += self._find_culprit(submod, submod_inputs)
                continue
            try:
                lowered(*submod_inputs)
            except RuntimeError:
                reports += "Run into an error during inference!\n"
                reports += self._find_culprit(submod, submod_inputs)
            else:
                reports += "Lowering and running succeed!\n"
        reports += f"\nTheoretical max qps (bounds by PCIe bandwidth) for this model is {max_qps},"
        reports += f" bottleneck is submodule {bottleneck}."
        print(reports)
        return reports

    # -- growing an acc subgraph upwards ---------------------------------------------
    def find_reverse_deps(self, tag_id: Optional[int] = None) -> Dict[Node, NodeSet]:
        """``{node: its callable readers}``; with ``tag_id``, only readers whose
        tag number is below it."""
        result: Dict[Node, NodeSet] = defaultdict(set)
        for node in self.module.graph.nodes:
            if node.op not in CALLABLE_NODE_OPS:
                continue
            for user in node.users:
                if user.op not in CALLABLE_NODE_OPS:
                    continue
                if tag_id is None or int(user.tag.split("_")[-1]) < tag_id:
                    result[node].add(user)
        return result

    def update_reverse_deps_for_fusions(self, deps: Dict[Node, NodeSet]) -> None:
        done: NodeSet = set()
        for node, fusion in self.fusions.items():
            if node in done:
                continue
            shared: NodeSet = set()
            for n in fusion:
                shared.update(deps[n])
            shared -= fusion
            for n in fusion:
                deps[n] = shared
                for arg in n.all_input_nodes:
                    if arg not in fusion:
                        deps[arg].update(fusion)
                done.add(n)

    def find_parent_nodes_of_subgraph(self, tag: str) -> NodeSet:
        """Callable nodes outside subgraph ``tag`` that its nodes read."""
        parents: NodeSet = set()
        for node in self.module.graph.nodes:
            if node.op in CALLABLE_NODE_OPS and node.tag == tag:
                for arg in node.all_input_nodes:
                    if arg.op in CALLABLE_NODE_OPS and arg.tag != tag:
                        parents.add(arg)
        return parents

    def extend_acc_subgraph(self, tag: str) -> None:
        """Pull acc parents of subgraph ``tag`` into it, going upwards, as long
        as all of a parent's readers (in earlier subgraphs) are already in."""
        deps = self.find_reverse_deps(tag_id=int(tag.rsplit("_", maxsplit=1)[-1]))
        self.update_reverse_deps_for_fusions(deps)
        parents = self.find_parent_nodes_of_subgraph(tag)
        visited: NodeSet = set()
        while parents:
            node = next((n for n in parents if deps[n] <= visited and n in self.acc_nodes), None)
            if node is None:
                break
            node.tag = tag
            parents.remove(node)
            visited.add(node)
            if node in self.fusions:
                parents.update(n for n in self.fusions[node] if n not in visited)
            parents.update(a for a in node.all_input_nodes if a.op in CALLABLE_NODE_OPS and a not in visited)

    # -- splitting ------------------------------------------------------------------------
    def starter_nodes(self) -> Tuple[NodeSet, NodeSet]:
        """(cpu, acc) nodes reading inputs or attributes (and argument-less calls)."""
        cpu: NodeSet = set()
        acc: NodeSet = set()
        for node in self.module.graph.nodes:
            if node.op == "call_function" and not node.all_input_nodes:
                (acc if node in self.acc_nodes else cpu).add(node)
            if node.op not in ("placeholder", "get_attr"):
                continue
            for user in node.users:
                (acc if user in self.acc_nodes else cpu).add(user)
        return cpu, acc

    def put_nodes_into_subgraphs(self) -> List[Subgraph]:
        """Alternating acc/cpu subgraphs covering every callable node: take
        ready nodes (all dependencies placed) of the current kind while there
        are any, then switch kind."""
        cpu_ready, acc_ready = self.starter_nodes()
        visited: NodeSet = set()
        # start on the acc side unless a cpu node can run right away
        on_acc = not any(len(self.deps[n]) == 0 for n in cpu_ready)
        current: NodeList = []
        subgraphs: List[Subgraph] = []
        order = {n: i for i, n in enumerate(self.module.graph.nodes)}
        while cpu_ready or acc_ready:
            pool = acc_ready if on_acc else cpu_ready
            node = next((n for n in sorted(pool, key=order.__getitem__) if self.deps[n] <= visited), None)
            if node is None:
                if not current:
                    raise FxNetSplitterInternalError("Subgraph can't be empty")
                subgraphs.append(Subgraph(is_acc=on_acc, nodes=current))
                on_acc = not on_acc
                current = []
                continue
            pool.remove(node)
            visited.add(node)
            current.append(node)
            if node in self.fusions:
                (acc_ready if node in self.acc_nodes else cpu_ready).update(self.fusions[node] - visited)
            for user in node.users:
                if user.op in CALLABLE_NODE_OPS:
                    (acc_ready if user in self.acc_nodes else cpu_ready).add(user)
        if current:
            subgraphs.append(Subgraph(is_acc=on_acc, nodes=current))
        if not subgraphs:
            raise FxNetSplitterInternalError("Couldn't create subgraphs")
        return subgraphs

    def remove_small_acc_subgraphs(self, subgraphs: List[Subgraph]) -> List[Subgraph]:
        """Merge acc subgraphs smaller than ``min_acc_module_size`` (and
        adjacent cpu subgraphs) into the cpu subgraph before them."""
        result: List[Subgraph] = []
        for sg in subgraphs:
            if sg.is_acc:
                if len(sg.nodes) >= self.settings.min_acc_module_size:
                    result.append(sg)
                    continue
                print("Eliminating acc subgraph because it's smaller than the threshold: "
                      f"{len(sg.nodes)} < {self.settings.min_acc_module_size}")
                if result:
                    result[-1].nodes.extend(sg.nodes)
                else:
                    sg.is_acc = False
                    result.append(sg)
            elif result and not result[-1].is_acc:
                result[-1].nodes.extend(sg.nodes)
            else:
                result.append(sg)
        return result

    def tag(self, subgraphs: List[Subgraph]) -> None:
        """Give every node of subgraph ``i`` the tag ``_run_on_acc_<i>`` or
        ``<non_acc_submodule_name><i>``."""
        self.tags = []
        for sg in subgraphs:
            i = len(self.tags)
            tag = f"_run_on_acc_{i}" if sg.is_acc else f"{self.non_acc_submodule_name}{i}"
            self.tags.append(tag)
            for node in sg.nodes:
                if hasattr(node, "tag"):
                    raise FxNetSplitterInternalError(f"Node {node} was already tagged")
                node.tag = tag
                self._node_submodule_map[node.name] = tag

    def split(self, remove_tag: bool = False) -> Any:
        """The split module for the current tags (see :meth:`tag`)."""
        split_module = split_by_tags(self.module, self.tags, return_tuple=self._return_tuple)
        if remove_tag:
            for node in self.module.graph.nodes:
                if hasattr(node, "tag"):
                    del node.tag
        return split_module

    def __call__(self) -> Any:
        subgraphs = self.put_nodes_into_subgraphs()
        if self.settings.move_non_tensor_nodes_on_boundary:
            move_non_tensor_nodes_on_boundary(subgraphs)
        subgraphs = self.remove_small_acc_subgraphs(subgraphs)
        n_acc = sum(1 for s in subgraphs if s.is_acc)
        print(f"Got {n_acc} acc subgraphs and {len(subgraphs) - n_acc} non-acc subgraphs")
        self.tag(subgraphs)
        return self.split()

    def generate_split_results(self) -> SplitResult:
        """Split, check ``max_acc_splits``, and record each submodule's inputs
        on the sample input."""
        split_module = self()
        names = [name for name, _ in split_module.named_children()]
        if 0 < self.settings.max_acc_splits < len(names):
            raise ValueError("Cannot fulfill max_acc_splits limit. This may cause split fragmentation and "
                             "result in performance issues.")
        inputs = generate_inputs_for_submodules(split_module, self.sample_input, names)
        return SplitResult(split_module, inputs, self.non_acc_submodule_name)

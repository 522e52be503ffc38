"""Accuracy minimizer: find the nodes where two ways of running a graph
disagree (``torch.fx.passes.net_min_base``).

Why: a lowered model (an accelerator, a compiler, a lower precision) gives a
wrong answer and the graph has hundreds of nodes. :class:`_MinimizerBase`
cuts out pieces of the graph (``split_by_tags`` with the tags ``main_0`` /
``minimize`` / ``main_1``), runs the ``minimize`` piece with ``run_a`` and
``run_b`` (subclasses: the reference and the lowered way) on the inputs the
reference run produced, and compares the results with ``compare_fn``. The
``traverse_method`` decides which pieces: one node at a time
(``sequential``), halves (``binary``), a growing prefix (``accumulate``),
the smallest failing block (``block``), the runs between ``skip_nodes``
(``skip``), or just ``start..end`` (``defined``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..node import Node, map_arg
from .shape_prop import ShapeProp
from .split_utils import split_by_tags
from .tools_common import (
    CALLABLE_NODE_OPS,
    FxNetAccFusionsFinder,
    Names,
    NodeList,
    NodeSet,
    TensorOrTensors,
    Tensors,
)

__all__ = [
    "FxNetMinimizerBadModuleError",
    "FxNetMinimizerRunFuncError",
    "FxNetMinimizerResultMismatchError",
]

_LOGGER = logging.getLogger(__name__)


class FxNetMinimizerBadModuleError(Exception):
    """Raised if failed to split out a minimize module"""


class FxNetMinimizerRunFuncError(Exception):
    """Raised if error occurs during run_a or run_b functions"""


class FxNetMinimizerResultMismatchError(Exception):
    """Raised if comparing function thinks the results are mismatching."""


@dataclass
class _MinimizerSettingBase:
    """Minimizer options.

    ``accumulate_error``: run_b reads run_b's own earlier outputs (errors
    accumulate) instead of run_a's. ``traverse_method``: ``"sequential"``,
    ``"binary"``, ``"accumulate"``, ``"block"``, ``"skip"`` or ``"defined"``.
    ``find_all``: keep going after the first culprit. ``return_intermediate``:
    :meth:`_MinimizerBase.run_nodes` compares every node's result, not just
    the last. ``all_outputs``: compare all outputs of the piece.
    """

    accumulate_error: bool = False
    traverse_method: str = "sequential"
    find_all: bool = False
    return_intermediate: bool = False
    all_outputs: bool = False

    def __str__(self) -> str:
        out = "FX Minimizer Settings:\n"
        for k, v in vars(self).items():
            out += f"\t{k}: {v}\n"
        return out


class _MinimizerBase:
    """Finds the nodes of ``module`` where ``run_a`` and ``run_b`` disagree.

    ``compare_fn(a_result, b_result, names) -> (numeric, ok)``;
    ``module_exporter(inputs, submodule, name)`` is called on each
    mismatching piece (twice: ``<name>_cpu`` with run_a's inputs,
    ``<name>_acc`` with run_b's); ``exclusion_fn(nodes, start, end)`` may
    remove nodes from a candidate list in place. Subclasses implement
    :meth:`run_a` and :meth:`run_b`. :meth:`minimize` returns the culprit
    nodes; ``self.reports`` keeps what each iteration did.
    """

    def __init__(self, module: Any, sample_input: Tensors,
                 compare_fn: Callable[[TensorOrTensors, TensorOrTensors, Names], Tuple[float, bool]],
                 settings: _MinimizerSettingBase,
                 module_exporter: Optional[Callable[[Tensors, Any, str], None]] = None,
                 exclusion_fn: Optional[Callable[[NodeList, int, int], None]] = None) -> None:
        from ..graph_module import GraphModule

        if not isinstance(module, GraphModule):
            raise AssertionError(f"Expected GraphModule, got {type(module)}")
        self.module = module
        self.sample_input = sample_input
        self.compare_fn = compare_fn
        self.module_exporter = module_exporter
        self.settings = settings
        self.exclusion_fn = exclusion_fn
        #: outputs of run_a / run_b by node name (graph inputs included)
        self.a_outputs: Dict[str, Any] = {}
        self.b_outputs: Dict[str, Any] = {}
        #: compare_fn's numeric result by output name(s)
        self.results: Dict[Any, Any] = {}
        self.reports: List[List[str]] = []
        self.iteration: int = 0

        callable_nodes = {n for n in self.module.graph.nodes if n.op in CALLABLE_NODE_OPS}
        self.run_shape_prop()
        self.fusions = FxNetAccFusionsFinder(self.module, callable_nodes)()
        placeholders = [n.name for n in self.module.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(self.sample_input):
            raise AssertionError(
                f"Placeholder count ({len(placeholders)}) does not match sample_input count ({len(self.sample_input)})"
            )
        for name, value in zip(placeholders, sample_input):
            self.a_outputs[name] = value
            self.b_outputs[name] = value

    def run_shape_prop(self) -> None:
        """Shape propagation on the sample input (override for a custom one)."""
        ShapeProp(self.module).propagate(*self.sample_input)

    def run_a(self, mod: Any, inputs: Tensors, report_idx: int = -1) -> TensorOrTensors:
        """Run ``mod`` on ``inputs`` the first way (subclasses)."""
        raise RuntimeError("run_a() is not implemented.")

    def run_b(self, mod: Any, inputs: Tensors, report_idx: int = -1) -> TensorOrTensors:
        """Run ``mod`` on ``inputs`` the second way (subclasses)."""
        raise RuntimeError("run_b() is not implemented.")

    # -- pieces -------------------------------------------------------------------------------
    def _store_outputs(self, a_result: TensorOrTensors, b_result: TensorOrTensors, submodule: Any) -> None:
        """Keep the piece's results under its output nodes' names, for the pieces after it."""
        out = next(n for n in submodule.graph.nodes if n.op == "output").args[0]
        if isinstance(out, Node):
            self.a_outputs[out.name] = a_result
            self.b_outputs[out.name] = b_result
            return
        for i, arg in enumerate(out):
            self.a_outputs[arg.name] = a_result[i]
            self.b_outputs[arg.name] = b_result[i]

    def _get_submod_inputs(self, main_module: Any, submod_path: str) -> Tuple[Tensors, Tensors]:
        """Inputs of the piece for run_a and run_b: earlier stored outputs when
        all are known, else what the piece receives in a run of the split
        module on the sample input. Both are run_a's unless ``accumulate_error``."""
        submodule = getattr(main_module, submod_path)
        placeholders = [n.name for n in submodule.graph.nodes if n.op == "placeholder"]
        if set(placeholders) <= self.a_outputs.keys():
            a_input = [self.a_outputs[n] for n in placeholders]
            b_input = [self.b_outputs[n] for n in placeholders]
        else:
            if self.settings.accumulate_error:
                print(f"Can't find previous stored outputs named {placeholders}!")
            captured: List[Any] = []

            def grab(mod: Any, inputs: Tuple[Any, ...]) -> None:
                captured.append(inputs)

            handle = submodule.register_forward_pre_hook(grab)
            try:
                main_module(*self.sample_input)
            finally:
                handle.remove()
            a_input = b_input = captured[0]
        if not self.settings.accumulate_error:
            return a_input, a_input
        return a_input, b_input

    def _tag_nodes(self, selected_nodes: NodeSet) -> None:
        """Tag ``selected_nodes`` "minimize", the nodes depending on them
        "main_1" and the rest "main_0"."""
        for node in self.module.graph.nodes:
            if node.op not in CALLABLE_NODE_OPS:
                continue
            if node in selected_nodes:
                node.tag = "minimize"
            elif any(n.tag in ("minimize", "main_1") for n in node.all_input_nodes if n.op in CALLABLE_NODE_OPS):
                node.tag = "main_1"
            else:
                node.tag = "main_0"

    def _build_submodule(self, nodes: NodeSet) -> Tuple[Any, str]:
        """The split module and the name of its submodule made of ``nodes``."""
        self._tag_nodes(nodes)
        split_module = split_by_tags(self.module, ["main_0", "minimize", "main_1"])
        found = [name for name, _ in split_module.named_children() if "minimize" in name]
        if len(found) > 1:
            raise FxNetMinimizerBadModuleError(f"Expected only one minimize submodule with nodes {nodes}")
        if not found:
            raise FxNetMinimizerBadModuleError(f"Minimize submodule was not found with nodes {nodes}")
        return split_module, found[0]

    def _run_and_compare(self, split_module: Any, submod_name: str, output_names: Names, report_idx: int = -1) -> None:
        """Run piece ``submod_name`` both ways (outputs restricted to
        ``output_names`` unless empty or ``all_outputs``) and compare. Raises
        FxNetMinimizerRunFuncError if a run fails, FxNetMinimizerResultMismatchError
        if ``compare_fn`` says no."""
        submodule = getattr(split_module, submod_name)
        a_input, b_input = self._get_submod_inputs(split_module, submod_name)
        if not self.reports:
            self.reports.append([])
            self.iteration = 1
        report = self.reports[report_idx if report_idx >= 0 else self.iteration - 1]
        report.append("Run and compare ...")

        if output_names and not self.settings.all_outputs:
            wanted: NodeList = []
            for node in list(submodule.graph.nodes):
                if node.op == "output":
                    submodule.graph.erase_node(node)
                elif node.name in output_names:
                    wanted.append(node)
            submodule.graph.output(wanted[0] if len(wanted) == 1 else tuple(wanted))
            submodule.graph.lint()
            submodule.recompile()

        out_node = next(n for n in submodule.graph.nodes if n.op == "output")
        result_key = map_arg(out_node.args, lambda x: x.name)
        try:
            a_result = self.run_a(submodule, a_input, report_idx)
            b_result = self.run_b(submodule, b_input, report_idx)
            self._store_outputs(a_result, b_result, submodule)
        except Exception as e:
            report.append(f"Exception raised when running {submod_name}: {e}")
            raise FxNetMinimizerRunFuncError(f"Exception raised when running {submod_name}: {e}") from e

        names: Names = output_names
        if output_names is None:
            names = [str(v) for v in result_key]
        numeric, ok = self.compare_fn(a_result, b_result, names)
        self.results[result_key] = numeric
        report.append(f"Numerical accuracy = {numeric}")
        if ok:
            return
        report.append(f"Result mismatch for {result_key}")
        if self.module_exporter:
            key: Any = result_key
            if isinstance(key, tuple):
                key = key[-1]
            if isinstance(key, tuple):
                key = str(key[0])
            self.module_exporter(a_input, submodule, key + "_cpu")
            self.module_exporter(b_input, submodule, key + "_acc")
        raise FxNetMinimizerResultMismatchError(f"Result mismatch for {result_key}")

    # -- traversals --------------------------------------------------------------------------
    def _binary_search_impl(self, all_nodes: NodeList, start_idx: int, end_idx: int) -> NodeSet:
        """Check ``all_nodes[start_idx:end_idx]`` as one piece; if it fails,
        search both halves (the second only with ``find_all`` or when the
        first found nothing)."""
        nodes: NodeList = all_nodes[start_idx:end_idx]
        report: List[str] = []
        if self.exclusion_fn is not None:
            self.exclusion_fn(nodes, start_idx, end_idx)
            if not nodes:
                self.reports.append(["All nodes are excluded by user"])
                return set()
        first_name, last_name = nodes[0].name, nodes[-1].name
        self.iteration += 1
        self.reports.append(report)
        report.append(f"Binary search iteration {self.iteration}")
        report.append(f"From node index {start_idx}:{first_name} to {end_idx - 1}:{last_name}. "
                      f"Size of the interested node list is {len(nodes)}")
        cur_nodes: NodeSet = set(nodes)
        try:
            split_module, submod_name = self._build_submodule(cur_nodes)
            self._run_and_compare(split_module, submod_name, [last_name])
        except (FxNetMinimizerRunFuncError, FxNetMinimizerResultMismatchError):
            if len(nodes) == 1:
                report.append("This is the last node in the sub-module. "
                              f"Search in the current branch is successful with culprit = {cur_nodes}.")
                self.print_report(report)
                return cur_nodes
            report.append("Proceed to split and lower the halves of the current sub-module individually.")
            self.print_report(report)
            mid = len(nodes) // 2
            culprits = self._binary_search_impl(all_nodes, start_idx, start_idx + mid)
            if culprits and not self.settings.find_all:
                return culprits
            culprits = self._binary_search_impl(all_nodes, start_idx + mid, end_idx)
            if not culprits:
                report.append("Further split and lowering found no errors. "
                              f"Unable to minimize the submodule with list of nodes: {nodes}")
                self.print_report(report)
            return culprits
        report.append("No discrepancy found.")
        self.print_report(report)
        return set()

    def _binary_traverse(self, nodes: NodeList) -> NodeSet:
        return self._binary_search_impl(nodes, 0, len(nodes))

    def _sequential_traverse(self, nodes: NodeList) -> NodeSet:
        """Each node (with its fusion group) as its own piece."""
        culprits: NodeSet = set()
        for node in nodes:
            report: List[str] = []
            self.reports.append(report)
            self.iteration += 1
            report.append(f"Sequential traverse iteration {self.iteration}.")
            report.append(f"Visit node: {node.name}")
            _LOGGER.info("Visit node: %s", node.name)
            node_list: NodeList = [node]
            if self.exclusion_fn is not None:
                self.exclusion_fn(node_list, -1, -1)
                if not node_list:
                    report.append(f"User exclusion : {node.name}")
                    self.print_report(report)
                    if not self.settings.find_all:
                        return culprits
                    continue
            cur_nodes: NodeSet = self.fusions.get(node, {node})
            try:
                split_module, submod_name = self._build_submodule(cur_nodes)
                self._run_and_compare(split_module, submod_name, [node.name])
                self.print_report(report)
            except FxNetMinimizerResultMismatchError:
                culprits.add(node)
                report.append(f"Found culprit from numeric error: {node}")
                self.print_report(report)
                if not self.settings.find_all:
                    return culprits
            except FxNetMinimizerRunFuncError:
                culprits.update(cur_nodes)
                report.append(f"Found culprit from run error: {node}")
                self.print_report(report)
                if not self.settings.find_all:
                    return culprits
        return culprits

    def _block_traverse_impl(self, nodes: NodeList, start_idx: int, end_idx: int, find_last_node: bool) -> Optional[int]:
        """Bisect for the last node whose prefix ``nodes[:i+1]`` fails
        (``find_last_node``), or the first whose suffix ``nodes[i:]`` fails."""
        report: List[str] = []
        mid = (start_idx + end_idx) // 2
        cur_list: NodeList = nodes[: mid + 1] if find_last_node else nodes[mid:]
        if self.exclusion_fn:
            self.exclusion_fn(cur_list, -1, -1)
        cur_nodes = set(cur_list)
        first_name, last_name = cur_list[0].name, cur_list[-1].name
        target_name = last_name if find_last_node else first_name
        self.iteration += 1
        self.reports.append(report)
        report.extend(["=" * 30, f"Block search iteration {self.iteration}"])
        report.extend([
            f"Search for {'last' if find_last_node else 'first'} node in culprits",
            f"From node index {start_idx}:{nodes[start_idx].name} to {end_idx}:{nodes[end_idx].name}. ",
            f"Subgraph constructed by {first_name} to {last_name}",
            f"Targeting node: {target_name}",
            f"Size of the interested node list is {end_idx - start_idx + 1}",
        ])
        report_idx = len(self.reports) - 1
        try:
            split_module, submod_name = self._build_submodule(cur_nodes)
            self._run_and_compare(split_module, submod_name, [last_name], report_idx)
        except (FxNetMinimizerResultMismatchError, FxNetMinimizerRunFuncError):
            report.append(f"Culprits found from node {first_name} to {last_name}.")
            if start_idx == mid == end_idx:
                report.extend(["This is the last node in the sub-module. ",
                               "Search in the current branch is successful with node :",
                               f"{start_idx}, node name: {nodes[start_idx].name}."])
                self.print_report(report)
                return start_idx
            report.append("Proceed to split and lower the halves of the current sub-module individually.")
            self.print_report(report)
            if find_last_node:
                return self._block_traverse_impl(nodes, start_idx, mid, find_last_node)
            return self._block_traverse_impl(nodes, mid + 1, end_idx, find_last_node)
        report.append(f"Culprits not found from node start to {mid}:{nodes[mid].name}.")
        if start_idx == mid == end_idx:
            at_edge = (start_idx == 0 and not find_last_node) or (start_idx == len(nodes) - 1 and find_last_node)
            if at_edge:
                report.append(f"At {'last' if find_last_node else 'first'} node, no culprits found.")
                self.print_report(report)
                return None
            return start_idx + (1 if find_last_node else -1)
        report.append("Proceed to split and lower the halves of the current sub-module individually.")
        self.print_report(report)
        if find_last_node:
            return self._block_traverse_impl(nodes, mid + 1, end_idx, find_last_node)
        return self._block_traverse_impl(nodes, start_idx, mid, find_last_node)

    def _block_traverse(self, nodes: NodeList, find_last_node: Optional[bool]) -> NodeSet:
        """The smallest block ``nodes[s:e+1]`` that fails: first ``e`` (the
        last node of the shortest failing prefix), then ``s`` (the first
        node of the shortest failing suffix of ``nodes[:e+1]``). With
        ``find_last_node`` True/False only one of the two passes runs."""
        culprits: NodeSet = set()
        last_report = [f"Block search from {nodes[0].name} to {nodes[-1].name}", "*" * 50]
        self.reports.append(last_report)
        start_idx, end_idx = 0, len(nodes) - 1
        final_start: Optional[int] = start_idx
        final_end: Optional[int] = end_idx
        both = find_last_node is None
        if both or find_last_node:
            last_report.append("Start searching for last node in culprit")
            self.print_report(last_report)
            final_end = self._block_traverse_impl(nodes, start_idx, end_idx, True)
            if final_end is None:
                last_report.append("No culprits found")
                self.print_report(last_report)
                return culprits
            last_report.extend(["Finish Pass 1", f"Find end_idx = {final_end}:{nodes[final_end].name}"])
            self.print_report(last_report)
        if both or not find_last_node:
            first_report = ["Start searching for first node in culprit"]
            self.print_report(first_report)
            final_start = self._block_traverse_impl(nodes[: end_idx + 1], start_idx, final_end or end_idx, False)
            if final_start is None:
                last_report.append("No culprits found")
                self.print_report(last_report)
                return culprits
            first_report.append("*" * 50)
            self.reports.append(first_report)
            first_report.extend(["Finish Pass 2", f"Find start_idx = {final_start}:{nodes[final_start].name}"])
            self.print_report(first_report)
        culprits.update(nodes[final_start: final_end + 1])
        result_report = [f"Finish searching, found minimum block ({nodes[final_start]},{nodes[final_end]})"]
        self.reports.append(result_report)
        self.print_report(result_report)
        return culprits

    def _defined_traverse(self, nodes: NodeList) -> NodeSet:
        """``nodes`` as one piece. Returns an empty set either way (the report
        says whether it failed), as torch's does."""
        if self.exclusion_fn is not None:
            self.exclusion_fn(nodes, -1, -1)
        if not nodes:
            self.reports.append(["All nodes are excluded by user"])
            return set()
        report = [f"Defined graph from {nodes[0].name} to {nodes[-1].name}"]
        cur_nodes: NodeSet = set(nodes)
        try:
            split_module, submod_name = self._build_submodule(cur_nodes)
            self._run_and_compare(split_module, submod_name, [nodes[-1].name])
            self.print_report(report)
        except (FxNetMinimizerResultMismatchError, FxNetMinimizerRunFuncError):
            report.append(f"Found culprit {cur_nodes}")
            self.print_report(report)
        return set()

    def _accumulate_traverse(self, nodes: NodeList) -> NodeSet:
        """Growing prefixes ``nodes[:1]``, ``nodes[:2]``, ...; the culprit is
        the node whose addition makes the prefix fail."""
        culprits: NodeSet = set()
        if self.settings.find_all:
            print("'Find All' mode is not supported in accumulate traversal.")
            return culprits
        to_run: NodeSet = set()
        for node in nodes:
            report: List[str] = []
            self.reports.append(report)
            self.iteration += 1
            report.append(f"Accumulate traverse iteration {self.iteration}.")
            to_run.add(node)
            report.append(f"Add node: {node.name}")
            try:
                split_module, submod_name = self._build_submodule(to_run)
                self._run_and_compare(split_module, submod_name, [node.name])
                self.print_report(report)
            except (FxNetMinimizerResultMismatchError, FxNetMinimizerRunFuncError):
                culprits.add(node)
                report.append(f"Found culprit {node}")
                self.print_report(report)
                return culprits
        return culprits

    def _skip_traverse_impl(self, all_nodes: NodeList, start_idx: int, end_idx: int) -> NodeSet:
        nodes: NodeList = all_nodes[start_idx:end_idx]
        cur_nodes: NodeSet = set(nodes)
        if self.exclusion_fn is not None:
            self.exclusion_fn(nodes, start_idx, end_idx)
            cur_nodes = set(nodes)
        else:
            for node in nodes:
                if node in self.fusions:
                    cur_nodes.update(self.fusions[node])
        report: List[str] = []
        self.reports.append(report)
        self.iteration += 1
        report.append(f" Nodes block {self.iteration}.")
        report.append(f"From node index {start_idx} to {end_idx - 1}. Size of the interested node list is {len(nodes)}")
        try:
            split_module, submod_name = self._build_submodule(cur_nodes)
            self._run_and_compare(split_module, submod_name, [])
        except FxNetMinimizerResultMismatchError:
            report.append(f"Found culprit from numeric error: {cur_nodes}")
            self.print_report(report)
            return cur_nodes
        except FxNetMinimizerRunFuncError:
            report.append(f"Found culprit from run error: {cur_nodes}")
            self.print_report(report)
            return cur_nodes
        report.append("No discrepancy found.")
        self.print_report(report)
        return set()

    def _skip_traverse(self, all_nodes: NodeList, skip_nodes: List[str]) -> NodeSet:
        """Each run of nodes between two ``skip_nodes`` as one piece; the
        result is the last run's (as torch's)."""
        start_idx = 0
        culprits: NodeSet = set()
        for idx, node in enumerate(all_nodes):
            if node.name in skip_nodes:
                if idx > start_idx:
                    culprits = self._skip_traverse_impl(all_nodes, start_idx, idx)
                start_idx = idx + 1
            elif idx == len(all_nodes) - 1 and start_idx <= idx:
                culprits = self._skip_traverse_impl(all_nodes, start_idx, idx + 1)
        return culprits

    def _collect_nodes(self, start: Optional[str], end: Optional[str]) -> NodeList:
        """Callable nodes from the one named ``start`` to the one named ``end``
        (both included; None: the graph's first / last)."""
        nodes: NodeList = []
        adding = start is None
        for node in self.module.graph.nodes:
            if node.op not in CALLABLE_NODE_OPS:
                continue
            if node.name == start:
                adding = True
            if adding:
                nodes.append(node)
            if node.name == end:
                break
        return nodes

    def run_nodes(self, start: Optional[str] = None, end: Optional[str] = None) -> None:
        """Run and compare the nodes ``start..end`` as one piece (printing a
        failure instead of raising)."""
        nodes = self._collect_nodes(start, end)
        cur_nodes = set(nodes)
        for node in nodes:
            if node in self.fusions:
                cur_nodes.update(self.fusions[node])
        output_names: List[str] = [n.name for n in nodes] if self.settings.return_intermediate else []
        try:
            split_module, submod_name = self._build_submodule(cur_nodes)
            self._run_and_compare(split_module, submod_name, output_names)
        except (FxNetMinimizerRunFuncError, FxNetMinimizerResultMismatchError) as e:
            print(e)

    def print_report(self, report: List[str]) -> None:
        for i, line in enumerate(report):
            print(" . " + line if i > 0 else line)

    def print_reports(self) -> None:
        for report in self.reports:
            self.print_report(report)

    def minimize(self, start: Optional[str] = None, end: Optional[str] = None, skip_nodes: Optional[List[str]] = None,
                 find_last_node: Optional[bool] = None) -> NodeSet:
        """The culprit nodes between ``start`` and ``end`` (node names; None:
        the whole graph), found with ``settings.traverse_method``.
        ``skip_nodes`` is for ``"skip"``; ``find_last_node`` for ``"block"``."""
        print(self.settings)
        print(self.module.graph)
        nodes = self._collect_nodes(start, end)
        method = self.settings.traverse_method
        if method == "sequential":
            return self._sequential_traverse(nodes)
        if method == "binary":
            return self._binary_traverse(nodes)
        if method == "accumulate":
            return self._accumulate_traverse(nodes)
        if method == "skip":
            if skip_nodes is None:
                raise RuntimeError("'skip_nodes' can't be None when 'traverse_method' is 'skip'.")
            return self._skip_traverse(nodes, skip_nodes)
        if method == "defined":
            return self._defined_traverse(nodes)
        if method == "block":
            return self._block_traverse(nodes, find_last_node)
        raise RuntimeError(f"Unknown traverse method {method}!")

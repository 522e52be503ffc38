"""AOT: joint forward+backward graphs, functionalization, partitioning (ARCHITECTURE.md §7).

* ``joint.trace_joint``      forward + autograd backward traced into one FX graph (fake tensors,
                             functionalized, optionally decomposed to prims);
* ``partition``              default (save everything) and min-cut (recompute cheap ops) partitioners;
* ``runtime.aot_function``   compiled forward/backward plugged into eager autograd
                             (``CompiledFunctionBackward``), input mutations written back;
* ``backends``               ``aot_eager`` and ``aot_autograd(fw_compiler=, bw_compiler=)``.

``EMBER_LOGS=aot_graphs,aot_joint_graph`` prints the graphs.
"""
from . import config
from .backends import aot_autograd, aot_eager
from .joint import AOTUnsupported, JointGraph, trace_joint
from .partition import default_partition, min_cut_partition, partition, PartitionReport
from .runtime import AOTModule, aot_function

__all__ = ["config", "aot_autograd", "aot_eager", "AOTUnsupported", "JointGraph", "trace_joint",
           "default_partition", "min_cut_partition", "partition", "PartitionReport", "AOTModule",
           "aot_function"]

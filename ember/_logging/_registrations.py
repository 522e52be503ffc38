"""torch._logging's names, and which of ember's loggers each one drives.

Components take a log level (``set_logs(dynamo=logging.DEBUG)``, ``TORCH_LOGS=+dynamo``) and
map to ember's package loggers; artifacts are switches (``set_logs(graph_breaks=True)``,
``TORCH_LOGS=graph_breaks``) and map to the loggers that ember's ``EMBER_LOGS`` machinery
writes to (``ember/dynamo/logs.py``, ``ember/aot/runtime.py``, ``ember/inductor/config.py``).
An artifact with no ember logger behind it is still a valid name: it enables the loggers
made by ``getArtifactLogger(..., name)``, and set_logs warns that ember itself emits nothing
for it.
"""

# component -> the ember loggers it sets the level of
COMPONENTS = {
    "torch": ("ember",),
    "dynamo": ("ember.dynamo", "ember._dynamo", "ember.fx.experimental.symbolic_shapes"),
    "aot": ("ember.aot", "ember._functorch"),
    "autograd": ("ember.autograd",),
    "dynamic": ("ember.fx.experimental.symbolic_shapes",),
    "inductor": ("ember.inductor", "ember._inductor"),
    "distributed": ("ember.distributed",),
    "c10d": ("ember.distributed.distributed_c10d",),
    "ddp": ("ember.nn.parallel",),
    "fsdp": ("ember.distributed.fsdp",),
    "dtensor": ("ember.distributed.tensor",),
    "onnx": ("ember.onnx",),
    "export": ("ember.export",),
    "fake_tensor": ("ember._subclasses.fake_tensor",),
    "cache": ("ember.inductor.fx_graph_cache", "ember.aot.cache"),
    "async_compile": ("ember.runtime",),
    "pp": ("ember.distributed.pipelining",),
    "native_dsl": ("ember.inductor.native_dsl",),
}

# artifact -> (the component it belongs to, ember loggers that write it)
ARTIFACTS = {
    "bytecode": ("dynamo", ("ember.dynamo.bytecode",)),
    "graph_breaks": ("dynamo", ("ember.dynamo.graph_breaks", "ember.dynamo.fallback")),
    "guards": ("dynamo", ("ember.dynamo.guards",)),
    "verbose_guards": ("dynamo", ("ember.dynamo.guards",)),
    "recompiles": ("dynamo", ("ember.dynamo.recompiles",)),
    "recompiles_verbose": ("dynamo", ("ember.dynamo.recompiles",)),
    "graph_code": ("dynamo", ("ember.dynamo.graph_code",)),
    "graph_code_verbose": ("dynamo", ("ember.dynamo.graph_code",)),
    "graph": ("dynamo", ()),
    "graph_sizes": ("dynamo", ()),
    "side_effects": ("dynamo", ()),
    "trace_source": ("dynamo", ()),
    "trace_call": ("dynamo", ()),
    "trace_bytecode": ("dynamo", ()),
    "trace_shape_events": ("dynamic", ()),
    "sym_node": ("dynamic", ()),
    "not_implemented": ("dynamo", ()),
    "hierarchical_compile": ("dynamo", ()),
    "graph_region_expansion": ("dynamo", ()),
    "annotation": ("dynamo", ()),
    "aot_graphs": ("aot", ("ember.aot.aot_graphs",)),
    "aot_joint_graph": ("aot", ("ember.aot.aot_joint_graph",)),
    "aot_graphs_effects": ("aot", ()),
    "compiled_autograd": ("autograd", ()),
    "compiled_autograd_verbose": ("autograd", ()),
    "ddp_graphs": ("ddp", ()),
    "output_code": ("inductor", ("ember.inductor.output_code",)),
    "kernel_code": ("inductor", ("ember.inductor.output_code",)),
    "schedule": ("inductor", ("ember.inductor.schedule",)),
    "fusion": ("inductor", ("ember.inductor.fusion",)),
    "caching": ("inductor", ("ember.inductor.fx_graph_cache", "ember.aot.cache")),
    "perf_hints": ("inductor", ()),
    "pre_grad_graphs": ("inductor", ()),
    "post_grad_graphs": ("inductor", ()),
    "ir_pre_fusion": ("inductor", ()),
    "ir_post_fusion": ("inductor", ()),
    "overlap": ("inductor", ()),
    "overlap_scheduling": ("inductor", ()),
    "cudagraphs": ("inductor", ()),
    "cudagraph_static_inputs": ("inductor", ()),
    "benchmarking": ("inductor", ()),
    "autotuning": ("inductor", ()),
    "incremental": ("inductor", ()),
    "inductor_metrics": ("inductor", ()),
    "compute_dependencies": ("inductor", ()),
    "loop_ordering": ("inductor", ()),
    "loop_tiling": ("inductor", ()),
    "auto_chunker": ("inductor", ()),
    "node_runtime_estimation": ("inductor", ()),
    "onnx_diagnostics": ("onnx", ()),
    "custom_format_test_artifact": ("torch", ()),
}

# set_logs's keyword arguments (torch's): components take levels, the rest are artifacts
SET_LOGS_COMPONENTS = ("all", "dynamo", "aot", "autograd", "dynamic", "inductor", "distributed", "c10d", "ddp",
                       "fsdp", "dtensor", "onnx", "export")
SET_LOGS_ARTIFACTS = ("bytecode", "aot_graphs", "aot_joint_graph", "ddp_graphs", "graph", "graph_code",
                      "graph_code_verbose", "graph_breaks", "side_effects", "graph_sizes", "guards", "recompiles",
                      "recompiles_verbose", "trace_source", "trace_call", "trace_bytecode", "output_code",
                      "kernel_code", "schedule", "perf_hints", "pre_grad_graphs", "post_grad_graphs",
                      "ir_pre_fusion", "ir_post_fusion", "onnx_diagnostics", "fusion", "overlap", "cudagraphs",
                      "sym_node", "compiled_autograd", "compiled_autograd_verbose", "cudagraph_static_inputs",
                      "benchmarking", "autotuning", "incremental", "graph_region_expansion", "inductor_metrics",
                      "hierarchical_compile", "compute_dependencies", "caching")

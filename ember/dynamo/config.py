"""Knobs of ember.dynamo (module attributes, read at compile time)."""

# Cache entries (guarded compilations) per code object before it runs eagerly.
recompile_limit = 8
# entries of one code and one ember.compile across all the objects its arguments are guarded to
# be (recompile_limit counts per such object set: a block's forward over 12 layers compiles 12)
accumulated_recompile_limit = 256
# Maximum depth of inlined user function calls.
inline_depth_limit = 32
# Maximum number of instructions symbolically executed per frame (loops unroll).
instruction_limit = 200_000
# Compute example values with ember fake tensors instead of real tensors.
use_fake_tensors = True
# Compile frames called inside an ember.autocast region (the trace records the region's casts,
# and a guard ties the entry to the region's state); False runs such frames eagerly.
compile_under_autocast = True
# Raise instead of falling back to eager when a frame cannot be captured (debugging).
raise_on_unsupported = False
# print(), warnings.warn() and logging calls whose arguments are constants at trace time are made
# after the graph runs instead of breaking it (variables/logging_calls.py); False: graph breaks.
replay_logging_calls = True
# With ember.compile(dynamic=None) (the default), a recompile caused by changed sizes or
# numbers makes those symbolic (automatic dynamic shapes); False recompiles for each new value.
automatic_dynamic_shapes = True
# An int argument (or outside int) that changed between calls and is >= 2 is traced as a symbolic
# size, like torch's SymInt inputs: ``cache[start:start + n]`` with a new ``start`` reuses the
# graph. False: it is an unspecialized number that any size use guards on (a recompile each value).
dynamic_int_arguments = True
# ``t.item()`` of a one-element floating/integral/bool tensor becomes a symbolic Python scalar in
# the graph (a 0-d float64/int64/bool node, variables/sym_scalar.py) instead of a graph break;
# where Python needs its value (a branch, a size, an f-string) the graph breaks there and the
# code after it sees the real number. False (the default): ``.item()`` breaks the graph.
capture_scalar_outputs = False
# Graph breaks raise (as with fullgraph=True) instead of splitting the graph: what
# ``ember._dynamo.error_on_graph_break(True)`` switches on around a call or a function.
error_on_graph_break = False
# Capture frames of the standard library and site-packages too (ember's own files stay skipped):
# ``ember._dynamo.dont_skip_tracing``. Frames already looked at and skipped stay skipped.
dont_skip_tracing = False
# A recompile raises ``RecompileError`` instead of compiling (torch._dynamo.config.error_on_recompile).
error_on_recompile = False
# Hitting the recompile limit raises ``FailOnRecompileLimitHit`` instead of running eagerly.
fail_on_recompile_limit_hit = False

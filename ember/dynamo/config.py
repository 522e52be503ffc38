"""Knobs of ember.dynamo (module attributes, read at compile time)."""

# Cache entries (guarded compilations) per code object before it runs eagerly.
recompile_limit = 8
# Maximum depth of inlined user function calls.
inline_depth_limit = 32
# Maximum number of instructions symbolically executed per frame (loops unroll).
instruction_limit = 200_000
# Compute example values with ember fake tensors instead of real tensors.
use_fake_tensors = True
# Raise instead of falling back to eager when a frame cannot be captured (debugging).
raise_on_unsupported = False

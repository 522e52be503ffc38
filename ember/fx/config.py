"""``ember.fx.config``: module-level switches read by fx passes (torch.fx.config's names).

Why a bare module of globals: passes read these at call time, so flipping one
(``ember.fx.config.verbose_progress = True``) takes effect immediately without
threading options through every pass.
"""

#: hide progress reporting of compilation passes
disable_progress = True

#: with progress shown, also show the node names handled by each pass
verbose_progress = False

#: skip collecting stack traces while tracing (``node.meta['stack_trace']``
#: stays unset; tracing gets cheaper, error messages less precise)
do_not_emit_stack_traces = False

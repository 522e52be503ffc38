"""Helpers shared by graph passes (mirrors ``torch.fx.passes.utils``).

:mod:`.matcher_utils` holds :class:`SubgraphMatcher`, the use-def pattern
matcher behind :func:`ember.fx.subgraph_rewriter.replace_pattern`.
"""

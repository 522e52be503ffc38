"""Helpers shared by graph passes (mirrors ``torch.fx.passes.utils``).

:mod:`.matcher_utils` holds :class:`SubgraphMatcher`, the use-def pattern
matcher behind :func:`ember.fx.subgraph_rewriter.replace_pattern`;
:mod:`.common` (``HolderModule``, ``lift_subgraph_as_module``,
``compare_graphs``, also importable from here), :mod:`.fuser_utils` and
:mod:`.source_matcher_utils` serve the partitioners.
"""

__all__ = ["HolderModule", "lift_subgraph_as_module", "compare_graphs"]


def __getattr__(name):
    # common imports ember.nn, which must not load while ember.fx itself is
    # still importing (the subgraph rewriter imports matcher_utils from here).
    if name in __all__:
        from . import common

        return getattr(common, name)
    if name in ("common", "fuser_utils", "matcher_utils", "source_matcher_utils"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""A GraphModule that is built only when something reads it.

Why. A warm compile that hits the aot cache used to rebuild the stored forward and
backward graphs node by node (thousands of nodes for an unrolled LSTM: ~40 ms, plus
importing the prims their targets name: ~50 ms) only for inductor to hash them again and
find its own cache entry. The aot cache now also stores each graph's inductor digest
(``fx_graph_cache.graph_digest``); it hands the graph compilers a :class:`LazyGraphModule`
carrying that digest as ``graph_digest_hint``, and inductor looks its entry up by the hint.
The graph is built (``materialize``) only when a compiler or a fallback actually reads it:
an inductor miss, an eager fallback, a recompile for other input shapes, or any attribute
of a GraphModule (``graph``, ``code``, ``meta``, calling it ...), so code that does not know
about laziness still sees a real GraphModule's behaviour.

Like torch.fx's ``_LazyGraphModule`` in spirit; ours defers the whole graph, not only its
Python code.
"""
from __future__ import annotations

from typing import Any, Callable, Optional


class LazyGraphModule:
    """Stands for the GraphModule ``build()`` returns until something reads it."""

    def __init__(self, build: Callable[[], Any], graph_digest_hint: Optional[str] = None,
                 constants: Optional[Callable[[], dict]] = None):
        self._build = build
        self._gm = None
        self.graph_digest_hint = graph_digest_hint   # inductor's digest of the built graph, if known
        # get_attr target -> tensor constant, readable without building the graph (an inductor
        # cache hit binds the compiled code to the graph's constants: nanoGPT's causal mask)
        self._constants_fn = constants
        self._constants = None

    @property
    def materialized(self) -> bool:
        return self._gm is not None

    def materialize(self):
        """The GraphModule (built on the first call)."""
        if self._gm is None:
            try:
                gm = self._build()
            except Exception as e:  # noqa: BLE001 - named, with what to do about it
                raise RuntimeError(f"a cached graph could not be rebuilt ({type(e).__name__}: {e}); the "
                                   "compile cache may be from an incompatible ember: delete "
                                   "$EMBER_CACHE_DIR/aot (or set EMBER_AOT_CACHE=0) and run again") from e
            self._gm, self._build = gm, None
        return self._gm

    def __getattr__(self, name: str) -> Any:
        # (only for attributes this object lacks: everything a GraphModule has)
        if name.startswith("__") or name in ("_build", "_gm", "_constants_fn", "_constants"):
            raise AttributeError(name)
        if self._gm is None and self._constants_fn is not None:
            if self._constants is None:
                self._constants = self._constants_fn()
            if name in self._constants:
                return self._constants[name]
        return getattr(self.materialize(), name)

    def __call__(self, *args, **kwargs):
        return self.materialize()(*args, **kwargs)

    def __repr__(self) -> str:
        return repr(self._gm) if self._gm is not None else "LazyGraphModule(<not built>)"


def materialize(gm):
    """``gm`` itself, or the GraphModule a :class:`LazyGraphModule` stands for."""
    return gm.materialize() if isinstance(gm, LazyGraphModule) else gm


__all__ = ["LazyGraphModule", "materialize"]

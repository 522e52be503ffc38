"""The hypothesis settings of the program fuzzers (``tests/inductor/test_fuzz_compiled.py``,
``tests/dynamo/test_fuzz_bytecode_s50.py``): no shrinking -- one compile per example makes it
take minutes; a failure prints its program, minimised by hand into a regression test --
derandomized unless a seed is given (``EMBER_FUZZ_SEED``), so CI draws the same programs."""
from __future__ import annotations

from hypothesis import HealthCheck, Phase, seed, settings


def fuzz_settings(n: int, seed_value=None):
    """A decorator running ``n`` examples (``seed_value``: None for the derandomized stream)."""
    kw = dict(max_examples=n, deadline=None, derandomize=seed_value is None,
              suppress_health_check=list(HealthCheck), database=None, print_blob=True,
              phases=[Phase.explicit, Phase.generate])

    def deco(f):
        f = settings(**kw)(f)
        return seed(int(seed_value))(f) if seed_value is not None else f
    return deco

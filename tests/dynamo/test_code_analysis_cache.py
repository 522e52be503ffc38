"""Decoded bytecode shared by every translator of a code object (symbolic_convert._code_analysis):
an inlined function called in a loop is decoded once, and the entry goes with its code object."""
import gc

import numpy as np

import ember
from ember.dynamo import symbolic_convert as sc


def test_inlined_function_decoded_once_and_results_match():
    def cell(x, h):
        return ember.tanh(x * 0.5 + h)

    def f(x):
        h = x * 0
        for _ in range(6):
            h = cell(x, h)
        return h

    calls = []
    real = sc.dis.get_instructions

    def counting(code, *a, **k):
        calls.append(code.co_name)
        return real(code, *a, **k)
    sc.dis.get_instructions = counting
    try:
        x = ember.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
        got = ember.compile(f, backend="eager")(x)
    finally:
        sc.dis.get_instructions = real
    assert calls.count("cell") == 1 and calls.count("f") == 1, calls
    np.testing.assert_allclose(got.numpy(), f(x).numpy(), rtol=1e-6)


def test_entry_is_dropped_with_its_code():
    ns = {}
    exec("def g(a):\n    return a + 1\n", ns)
    code = ns["g"].__code__
    info = sc._code_analysis(code)
    assert sc._code_analysis(code) is info
    assert info[0][-1].opname.startswith("RETURN")
    n = len(sc._CODE_ANALYSIS)
    del ns, code, info
    gc.collect()
    assert len(sc._CODE_ANALYSIS) < n

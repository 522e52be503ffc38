"""Build the same module in torch and ember (same weights) for fx pass tests
that compare ember.fx.passes with torch.fx.passes."""

import importlib

import numpy as np


def to_ember(t):
    import ember

    return ember.tensor(t.detach().numpy().copy())


def pair(make, seed=0):
    """``make(T)`` with T = torch and T = ember, ember's state copied from torch's."""
    import ember
    import torch

    torch.manual_seed(seed)
    tm = make(torch)
    em = make(ember)
    em.load_state_dict({k: to_ember(v) for k, v in tm.state_dict().items()})
    return tm, em


def passes_mod(T, name):
    return importlib.import_module(f"{T.__name__}.fx.passes.{name}")


def code(gm):
    """Generated code with torch's module prefix spelled as ember's."""
    return gm.code.replace("torch.", "ember.")


def graph_str(gm):
    return str(gm.graph).replace("torch.", "ember.")


def close(a, b, rtol=1e-5, atol=1e-6):
    """Compare torch result ``a`` with ember result ``b`` (nested tuples)."""
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, rtol, atol)
        return
    np.testing.assert_allclose(np.asarray(b.detach().numpy() if hasattr(b, "detach") else b),
                               a.detach().numpy(), rtol=rtol, atol=atol)

"""Seed 000 - "Deep Dive into PyTorch Internals: Autograd and torch.fx".

Examples:
1. simple chain rule (autograd)           -> tested here
2. torch.fx symbolic_trace of MyModel     -> owned by the fx tests (skipped here)
"""

import pytest

from seedlib import norm


def test_example1_simple_chain_rule(lib, capsys):
    torch = lib.torch
    x = torch.tensor(2.0, requires_grad=True)
    y = x * x + 3 * x
    z = y.mean()
    z.backward()
    print(x.grad)  # 7.0 = d(x^2 + 3x)/dx at x=2
    assert norm(capsys.readouterr().out) == "tensor(7.)\n"


def test_example1_graph_nodes(lib):
    """The article's 'Key Internals': grad_fn points at the creating Function."""
    torch = lib.torch
    x = torch.tensor(2.0, requires_grad=True)
    y = x * x + 3 * x
    z = y.mean()
    assert x.grad_fn is None and x.is_leaf
    assert type(z.grad_fn).__name__ == "MeanBackward0"
    assert type(y.grad_fn).__name__ == "AddBackward0"
    assert x.grad is None
    z.backward()
    assert x.grad.item() == 7.0


@pytest.mark.skip(reason="torch.fx example (symbolic_trace + printed graph) is covered by the "
                         "fx test suite (tests/fx), not by the seed tests")
def test_example2_fx_symbolic_trace():  # pragma: no cover
    pass

"""Seed 000: the torch.fx example from the seed article, run under ember."""

import pytest

pytest.importorskip("ember.nn.modules.module")

EXPECTED = """graph():
    %x : [num_users=1] = placeholder[target=x]
    %mul : [num_users=1] = call_function[target=operator.mul](args = (%x, 2), kwargs = {})
    %add : [num_users=1] = call_function[target=operator.add](args = (%mul, 3), kwargs = {})
    return add"""


def test_seed000_print_graph(capsys):
    import ember as torch
    import ember.fx as fx
    import ember.nn as nn

    class MyModel(nn.Module):
        def forward(self, x):
            return x * 2 + 3

    model = MyModel()
    traced = fx.symbolic_trace(model)
    print(traced.graph)
    assert capsys.readouterr().out == EXPECTED + "\n"
    x = torch.randn(4)
    assert traced(x).tolist() == model(x).tolist()
    assert traced(x).tolist() == pytest.approx([v * 2 + 3 for v in x.tolist()], rel=1e-6)

"""nn.RNN/LSTM/GRU compile as one graph (the recurrence shared with ember.lstm/gru/... is traced
like user code) with eager's values and gradients; a lazy import of one of ember's own modules
inside traced code is performed, not a graph break."""
import subprocess
import sys

import numpy as np
import pytest

import ember


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_recurrent_modules_compile_fullgraph(cls):
    ember.dynamo.reset()
    m = getattr(ember.nn, cls)(4, 6, num_layers=2, batch_first=True, bidirectional=True)
    x = ember.randn(2, 3, 4, requires_grad=True)
    want = m(x)[0]
    want.sum().backward()
    gx, gw = x.grad.clone(), m.weight_ih_l0.grad.clone()
    x.grad = None
    m.zero_grad()
    got = ember.compile(m, fullgraph=True)(x)[0]
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    got.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), gx.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(m.weight_ih_l0.grad.numpy(), gw.numpy(), rtol=1e-4, atol=1e-6)


def test_lazy_ember_import_inside_traced_code():
    code = ("import sys, ember\n"
            "assert 'ember.nn.utils.rnn' not in sys.modules\n"
            "m = ember.nn.LSTM(4, 8, batch_first=True)\n"
            "x = ember.randn(2, 5, 4)\n"
            "out = ember.compile(m, fullgraph=True)(x)[0]\n"
            "assert 'ember.nn.utils.rnn' in sys.modules\n"
            "assert ember.allclose(out, m(x)[0], atol=1e-5)\n"
            "ep = ember.export.export(ember.nn.GRU(3, 5), (ember.randn(7, 2, 3),))\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]

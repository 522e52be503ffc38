"""ember.lstm/gru/rnn_tanh/rnn_relu (padded and packed overloads) and the *_cell functions,
against torch 2.13: outputs, final states and gradients of input, states and every parameter."""
import numpy as np
import pytest

import ember
from oracle import assert_same_error

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _torch():
    return pytest.importorskip("torch")


def _params(rng, name, in_size, hidden, num_layers, bidir, bias, proj):
    D = 2 if bidir else 1
    g = GATES[name] * hidden
    out_h = proj or hidden
    ps = []
    for layer in range(num_layers):
        for _ in range(D):
            isz = in_size if layer == 0 else out_h * D
            ps += [rng.uniform(-0.6, 0.6, (g, isz)), rng.uniform(-0.6, 0.6, (g, out_h))]
            if bias:
                ps += [rng.uniform(-0.6, 0.6, g), rng.uniform(-0.6, 0.6, g)]
            if proj:
                ps += [rng.uniform(-0.6, 0.6, (proj, hidden))]
    return ps


def _both(arrays):
    torch = _torch()
    e = [ember.tensor(a, requires_grad=True) for a in arrays]
    t = [torch.tensor(a, requires_grad=True) for a in arrays]
    return e, t


def _compare(e_outs, t_outs, e_leaves, t_leaves, rng):
    torch = _torch()
    assert len(e_outs) == len(t_outs)
    weights = [rng.standard_normal(tuple(o.shape)) for o in t_outs]
    for eo, to in zip(e_outs, t_outs):
        assert tuple(eo.shape) == tuple(to.shape)
        np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-9, atol=1e-9)
    sum(((o * ember.tensor(w)).sum() for o, w in zip(e_outs, weights)), ember.tensor(0.0)).backward()
    sum((o * torch.tensor(w)).sum() for o, w in zip(t_outs, weights)).backward()
    for el, tl in zip(e_leaves, t_leaves):
        np.testing.assert_allclose(el.grad.numpy(), tl.grad.numpy(), rtol=1e-8, atol=1e-9)


CASES = [("lstm", 1, False, True, 0, False), ("lstm", 2, True, True, 0, True), ("lstm", 2, False, False, 2, False),
         ("lstm", 1, True, True, 3, True), ("gru", 2, True, True, 0, False), ("gru", 1, False, False, 0, True),
         ("rnn_tanh", 2, True, False, 0, True), ("rnn_relu", 2, False, True, 0, False),
         ("rnn_relu", 1, True, True, 0, True)]


@pytest.mark.parametrize("name,num_layers,bidir,bias,proj,batch_first", CASES)
def test_padded_overload_matches_torch(name, num_layers, bidir, bias, proj, batch_first):
    torch = _torch()
    rng = np.random.default_rng(abs(hash((name, num_layers, bidir, bias, proj, batch_first))) % 2 ** 32)
    L, N, I, H = 4, 3, 5, 4
    D = 2 if bidir else 1
    x = rng.standard_normal((N, L, I) if batch_first else (L, N, I))
    h0 = rng.standard_normal((num_layers * D, N, proj or H))
    states = [h0, rng.standard_normal((num_layers * D, N, H))] if name == "lstm" else [h0]
    ps = _params(rng, name, I, H, num_layers, bidir, bias, proj)
    (ex, *e_rest), (tx, *t_rest) = _both([x] + states + ps)
    ns = len(states)
    e_hx = tuple(e_rest[:ns]) if name == "lstm" else e_rest[0]
    t_hx = tuple(t_rest[:ns]) if name == "lstm" else t_rest[0]
    args = (bias, num_layers, 0.0, True, bidir, batch_first)
    e_out = getattr(ember, name)(ex, e_hx, e_rest[ns:], *args)
    t_out = getattr(torch, name)(tx, t_hx, t_rest[ns:], *args)
    assert isinstance(e_out, tuple) and len(e_out) == (3 if name == "lstm" else 2)
    _compare(e_out, t_out, [ex] + e_rest, [tx] + t_rest, rng)


@pytest.mark.parametrize("name,num_layers,bidir,bias,proj", [c[:5] for c in CASES[::2]])
def test_packed_overload_matches_torch(name, num_layers, bidir, bias, proj):
    torch = _torch()
    rng = np.random.default_rng(abs(hash(("packed", name, num_layers, bidir, bias, proj))) % 2 ** 32)
    batch_sizes = [3, 3, 2, 1]
    I, H, D = 3, 4, 2 if bidir else 1
    data = rng.standard_normal((sum(batch_sizes), I))
    h0 = rng.standard_normal((num_layers * D, 3, proj or H))
    states = [h0, rng.standard_normal((num_layers * D, 3, H))] if name == "lstm" else [h0]
    ps = _params(rng, name, I, H, num_layers, bidir, bias, proj)
    (ed, *e_rest), (td, *t_rest) = _both([data] + states + ps)
    ns = len(states)
    e_hx = tuple(e_rest[:ns]) if name == "lstm" else e_rest[0]
    t_hx = tuple(t_rest[:ns]) if name == "lstm" else t_rest[0]
    args = (bias, num_layers, 0.0, False, bidir)
    e_out = getattr(ember, name)(ed, ember.tensor(batch_sizes), e_hx, e_rest[ns:], *args)
    t_out = getattr(torch, name)(td, torch.tensor(batch_sizes), t_hx, t_rest[ns:], *args)
    _compare(e_out, t_out, [ed] + e_rest, [td] + t_rest, rng)


def test_keywords_and_dropout_eval_is_identity():
    torch = _torch()
    rng = np.random.default_rng(3)
    x, h = rng.standard_normal((3, 2, 4)), rng.standard_normal((2, 2, 5))
    ps = _params(rng, "gru", 4, 5, 2, False, True, 0)
    kw = dict(has_biases=True, num_layers=2, dropout=0.7, train=False, bidirectional=False, batch_first=False)
    e = ember.gru(ember.tensor(x), hx=ember.tensor(h), params=[ember.tensor(p) for p in ps], **kw)
    t = torch.gru(torch.tensor(x), hx=torch.tensor(h), params=[torch.tensor(p) for p in ps], **kw)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
    # dropout in training mode changes the second layer's input (and so the output)
    kw["train"] = True
    ember.manual_seed(0)
    d = ember.gru(ember.tensor(x), ember.tensor(h), [ember.tensor(p) for p in ps], *kw.values())
    assert not np.allclose(d[0].numpy(), e[0].numpy())


def test_module_weights_give_module_output():
    """ember.lstm over an nn.LSTM's flat weights reproduces the module (same shared recurrence)."""
    m = ember.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    x = ember.randn(2, 5, 3)
    out, (h, c) = m(x)
    z = ember.zeros(4, 2, 4)
    o2, h2, c2 = ember.lstm(x, (z, z), m._flat_weights, True, 2, 0.0, False, True, True)
    for a, b in [(out, o2), (h, h2), (c, c2)]:
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.parametrize("name", ["lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"])
@pytest.mark.parametrize("bias", ["both", "none", "ih_only"])
def test_cells_match_torch(name, bias):
    torch = _torch()
    rng = np.random.default_rng(abs(hash((name, bias))) % 2 ** 32)
    N, I, H = 3, 5, 4
    g = GATES[name[:-5]] * H
    arrays = [rng.standard_normal((N, I)), rng.standard_normal((N, H))]
    if name == "lstm_cell":
        arrays.append(rng.standard_normal((N, H)))
    arrays += [rng.uniform(-0.6, 0.6, (g, I)), rng.uniform(-0.6, 0.6, (g, H))]
    if bias != "none":
        arrays.append(rng.uniform(-0.6, 0.6, g))
    if bias == "both":
        arrays.append(rng.uniform(-0.6, 0.6, g))
    e, t = _both(arrays)

    def call(m, ts):
        hx = (ts[1], ts[2]) if name == "lstm_cell" else ts[1]
        rest = ts[3:] if name == "lstm_cell" else ts[2:]
        out = getattr(m, name)(ts[0], hx, *rest)
        return tuple(out) if isinstance(out, tuple) else (out,)
    _compare(call(ember, e), call(torch, t), e, t, rng)


W = lambda m, *s: m.ones(*s)  # noqa: E731


@pytest.mark.parametrize("call", [
    lambda m: m.lstm_cell(W(m, 2, 3), (W(m, 2, 4), W(m, 2, 4)), W(m, 12, 3), W(m, 16, 4)),
    lambda m: m.lstm_cell(W(m, 2, 3), (W(m, 2, 4), W(m, 2, 4)), W(m, 16, 5), W(m, 16, 4)),
    lambda m: m.lstm_cell(W(m, 2, 3), (W(m, 2, 4),), W(m, 16, 3), W(m, 16, 4)),
    lambda m: m.lstm_cell(W(m, 2, 3), (W(m, 2, 4), W(m, 2, 5)), W(m, 16, 3), W(m, 16, 4)),
    lambda m: m.gru_cell(W(m, 2, 3), W(m, 2, 4), W(m, 12, 3), W(m, 12, 5)),
    lambda m: m.gru_cell(W(m, 2, 3), W(m, 3, 4), W(m, 12, 3), W(m, 12, 4)),
    lambda m: m.rnn_relu_cell(W(m, 2, 3), W(m, 2, 4), W(m, 4, 5), W(m, 4, 4)),
    lambda m: m.lstm(W(m, 5, 2, 3), (W(m, 1, 2, 4),), [], True, 1, 0.0, False, False, False),
])
def test_errors_match_torch(call):
    torch = _torch()
    assert_same_error(lambda: call(ember), lambda: call(torch))


def test_bad_params_count_and_hidden_shape_are_explained():
    x, h = ember.randn(5, 2, 3), ember.randn(1, 2, 4)
    ps = [ember.randn(4, 3), ember.randn(4, 4), ember.randn(4)]
    with pytest.raises(RuntimeError, match="params has 3 tensors, expected 4"):
        ember.rnn_tanh(x, h, ps, True, 1, 0.0, False, False, False)
    with pytest.raises(RuntimeError, match=r"expected hx of size \[1, 2, 4\], got \[1, 3, 4\]"):
        ember.rnn_tanh(x, ember.randn(1, 3, 4), ps + [ember.randn(4)], True, 1, 0.0, False, False, False)
    with pytest.raises(RuntimeError, match="expected input to be 3-D"):
        ember.gru(x[0], h, ps, True, 1, 0.0, False, False, False)

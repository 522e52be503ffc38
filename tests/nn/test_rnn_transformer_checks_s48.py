"""Session 48: recurrent and transformer modules' argument checks against PyTorch.

Each test was a mismatch: RNN hidden-size messages printed the expected size as a list (torch: a
tuple) and LSTM's h0 check said "hidden" (torch: "hidden[0]"); RNNCell/GRUCell/LSTMCell ran no
checks of their own (a wrong input size surfaced as a matmul error, a batch mismatch as a
broadcast error); nn.Transformer let a src/tgt batch or d_model mismatch reach the attention
(a reshape error); MultiheadAttention's key-padding-mask message differed."""
from __future__ import annotations

import numpy as np
import pytest
from _util_s48 import close, same_error, torch_or_skip

import ember


def _rand(*shape):
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape).astype(np.float32)


def _mod(lib, ctor):
    lib.manual_seed(0)
    return ctor(lib.nn)


@pytest.mark.parametrize("case", ["gru_h", "lstm_h0", "lstm_c0", "rnn_unbatched_h"])
def test_rnn_hidden_size_messages(case):
    def fn(lib):
        x = lib.tensor(_rand(6, 3, 5))
        if case == "gru_h":
            return _mod(lib, lambda nn: nn.GRU(5, 4))(x, lib.tensor(_rand(2, 3, 4)))
        if case == "lstm_h0":
            return _mod(lib, lambda nn: nn.LSTM(5, 4))(x, (lib.tensor(_rand(1, 2, 4)), lib.tensor(_rand(1, 3, 4))))
        if case == "lstm_c0":
            return _mod(lib, lambda nn: nn.LSTM(5, 4, proj_size=2))(
                x, (lib.tensor(_rand(1, 3, 2)), lib.tensor(_rand(1, 3, 2))))
        return _mod(lib, lambda nn: nn.RNN(5, 4, num_layers=2))(lib.tensor(_rand(6, 5)), lib.tensor(_rand(1, 4)))
    same_error(fn)


@pytest.mark.parametrize("case", ["rnn_input", "gru_input", "lstm_input", "rnn_batch", "gru_hidden",
                                  "lstm_batch_h", "lstm_batch_c", "lstm_hx_dim", "gru_unbatched_batch"])
def test_cell_argument_checks(case):
    def fn(lib):
        if case == "rnn_input":
            return _mod(lib, lambda nn: nn.RNNCell(5, 4))(lib.tensor(_rand(3, 4)))
        if case == "gru_input":
            return _mod(lib, lambda nn: nn.GRUCell(5, 4))(lib.tensor(_rand(3, 6)), lib.tensor(_rand(3, 4)))
        if case == "lstm_input":
            return _mod(lib, lambda nn: nn.LSTMCell(5, 4))(lib.tensor(_rand(3, 2)))
        if case == "rnn_batch":
            return _mod(lib, lambda nn: nn.RNNCell(5, 4, nonlinearity="relu"))(lib.tensor(_rand(3, 5)),
                                                                               lib.tensor(_rand(2, 4)))
        if case == "gru_hidden":
            return _mod(lib, lambda nn: nn.GRUCell(5, 4))(lib.tensor(_rand(3, 5)), lib.tensor(_rand(3, 3)))
        if case == "lstm_batch_h":
            return _mod(lib, lambda nn: nn.LSTMCell(5, 4))(lib.tensor(_rand(3, 5)),
                                                           (lib.tensor(_rand(2, 4)), lib.tensor(_rand(3, 4))))
        if case == "lstm_batch_c":
            return _mod(lib, lambda nn: nn.LSTMCell(5, 4))(lib.tensor(_rand(3, 5)),
                                                           (lib.tensor(_rand(3, 4)), lib.tensor(_rand(3, 5))))
        if case == "lstm_hx_dim":
            return _mod(lib, lambda nn: nn.LSTMCell(5, 4))(lib.tensor(_rand(3, 5)),
                                                           (lib.tensor(_rand(1, 3, 4)), lib.tensor(_rand(3, 4))))
        return _mod(lib, lambda nn: nn.GRUCell(5, 4))(lib.tensor(_rand(5)), lib.tensor(_rand(2, 4)))
    same_error(fn)


@pytest.mark.parametrize("kind", ["RNNCell", "GRUCell", "LSTMCell"])
@pytest.mark.parametrize("batched", [True, False])
def test_cells_still_match_torch(kind, batched):
    """The checks leave the cells' values and gradients as torch's."""
    torch = torch_or_skip()
    shape = (3, 5) if batched else (5,)
    hshape = (3, 4) if batched else (4,)
    outs = {}
    for lib in (torch, ember):
        m = _mod(lib, lambda nn: getattr(nn, kind)(5, 4))
        x = lib.tensor(_rand(*shape), requires_grad=True)
        hx = (lib.tensor(_rand(*hshape)), lib.tensor(_rand(*hshape) * 2)) if kind == "LSTMCell" else \
            lib.tensor(_rand(*hshape))
        out = m(x, hx)
        h = out[0] * 2 + out[1] if kind == "LSTMCell" else out
        h.pow(2).sum().backward()
        outs[lib.__name__] = (h, x.grad, m.weight_hh.grad)
    for a, b in zip(outs["torch"], outs["ember"]):
        close(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["batch", "batch_first", "d_model_src", "d_model_tgt"])
def test_transformer_src_tgt_checks(case):
    def fn(lib):
        bf = case == "batch_first"
        m = _mod(lib, lambda nn: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=bf))
        if case in ("batch", "batch_first"):
            src, tgt = (_rand(2, 5, 8), _rand(3, 5, 8)) if bf else (_rand(5, 2, 8), _rand(5, 3, 8))
        elif case == "d_model_src":
            src, tgt = _rand(5, 3, 6), _rand(5, 3, 8)
        else:
            src, tgt = _rand(5, 3, 8), _rand(4, 3, 6)
        return m(lib.tensor(src), lib.tensor(tgt))
    same_error(fn)


def test_transformer_unbatched_not_refused():
    """An unbatched src/tgt pair skips the batch check (as torch) and still matches."""
    torch = torch_or_skip()
    outs = []
    for lib in (torch, ember):
        m = _mod(lib, lambda nn: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0))
        if lib is ember:
            m.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
        else:
            tm = m
        outs.append(m(lib.tensor(_rand(5, 8)), lib.tensor(_rand(4, 8))))
    close(outs[1], outs[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 4), (3, 5)])
def test_mha_key_padding_mask_shape_message(shape):
    def fn(lib):
        m = _mod(lib, lambda nn: nn.MultiheadAttention(8, 2))
        x = lib.tensor(_rand(4, 3, 8))
        return m(x, x, x, key_padding_mask=lib.zeros(*shape, dtype=lib.bool))
    same_error(fn)


@pytest.mark.parametrize("packed", [False, True])
def test_rnn_input_dtype_must_match_weights(packed):
    def fn(lib):
        m = _mod(lib, lambda nn: nn.GRU(5, 4)).double()
        x = lib.tensor(_rand(6, 3, 5))
        if packed:
            x = lib.nn.utils.rnn.pack_padded_sequence(x, [6, 4, 2])
        return m(x)
    same_error(fn)


@pytest.mark.parametrize("separate", [False, True])
def test_mha_key_value_shape_checks(separate):
    def fn(lib):
        kw = dict(kdim=4, vdim=4) if separate else {}
        m = _mod(lib, lambda nn: nn.MultiheadAttention(8, 2, **kw))
        d = 4 if separate else 8
        return m(lib.tensor(_rand(5, 3, 8)), lib.tensor(_rand(4, 3, d)), lib.tensor(_rand(3, 3, d)))
    same_error(fn)


@pytest.mark.parametrize("extra", [{}, {"add_bias_kv": True, "add_zero_attn": True}])
def test_mha_is_causal_hint_without_weights(extra):
    """torch drops the mask for is_causal=True when no key padding mask and no weights are asked
    for, and attends causally (the hint is trusted); a mask that isn't causal shows it."""
    torch = torch_or_skip()
    outs = []
    for lib in (torch, ember):
        m = _mod(lib, lambda nn: nn.MultiheadAttention(8, 2, **extra))
        if lib is ember:
            m.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
        else:
            tm = m
        q = lib.tensor(_rand(5, 3, 8), requires_grad=True)
        kv = lib.tensor(_rand(7, 3, 8))
        out, w = m(q, kv, kv, attn_mask=lib.tensor(_rand(5, 7)), is_causal=True, need_weights=False)
        out.pow(2).sum().backward()
        assert w is None
        outs.append((out, q.grad))
    for t, e in zip(*outs):
        close(e, t, rtol=1e-4, atol=3e-5)

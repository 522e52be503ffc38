"""Packed variable-length sequences (ember.nn.utils.rnn): PackedSequence, pack/pad/unpad helpers and
RNN/LSTM/GRU on packed input, against torch.nn.utils.rnn and torch.nn (values and gradients), plus
torch-free round trips, per-sequence consistency, errors and ember.compile."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.nn.utils import rnn as er
from oracle import assert_close, needs_torch, to_numpy, torch

if torch is not None:
    from torch.nn.utils import rnn as tr


def _lengths(rng, B, T, sorted_, ties=True):
    """B lengths in [1, T] with max T, the others shorter (two equal ones when ``ties``), decreasing if
    ``sorted_`` else shuffled so that they are not sorted."""
    lens = [T] + list(rng.integers(1, T, size=B - 1))
    if ties and B > 2:
        lens[-1] = lens[-2]
    lens = sorted(lens, reverse=True)
    if not sorted_:
        while all(lens[i] >= lens[i + 1] for i in range(B - 1)):
            lens = list(rng.permutation(lens))
    return [int(n) for n in lens]


def _copy_weights(tm, em):
    with ember.no_grad():
        for name, p in tm.named_parameters():
            getattr(em, name).copy_(ember.tensor(p.detach().numpy()))


def _same_index(a, b):
    if a is None or b is None:
        assert a is None and b is None, (a, b)
        return
    assert a.dtype is ember.int64
    assert a.tolist() == b.tolist()


def _assert_packed_equal(pe, pt, rtol=None, atol=None):
    assert isinstance(pe, er.PackedSequence)
    assert_close(pe.data, pt.data, rtol, atol)
    assert pe.batch_sizes.dtype is ember.int64 and pe.batch_sizes.device.type == "cpu"
    assert pe.batch_sizes.tolist() == pt.batch_sizes.tolist()
    _same_index(pe.sorted_indices, pt.sorted_indices)
    _same_index(pe.unsorted_indices, pt.unsorted_indices)


# ------------------------------------------------------------------ pack / pad against torch
@needs_torch
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("trailing", [(), (3,), (2, 3)])
def test_pack_pad_match_torch(batch_first, enforce_sorted, trailing):
    rng = np.random.default_rng()
    T, B = 5, 6
    lens = _lengths(rng, B, T, enforce_sorted)
    shape = ((B, T) if batch_first else (T, B)) + trailing
    x = rng.standard_normal(shape)
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lens_t = torch.tensor(lens) if enforce_sorted else lens   # list and tensor lengths both accepted
    lens_e = ember.tensor(lens) if enforce_sorted else lens
    pe = er.pack_padded_sequence(xe, lens_e, batch_first=batch_first, enforce_sorted=enforce_sorted)
    pt = tr.pack_padded_sequence(xt, lens_t, batch_first=batch_first, enforce_sorted=enforce_sorted)
    _assert_packed_equal(pe, pt)
    pad_value = float(rng.uniform(-3, 3))
    ye, le = er.pad_packed_sequence(pe, batch_first=batch_first, padding_value=pad_value, total_length=T + 2)
    yt, lt = tr.pad_packed_sequence(pt, batch_first=batch_first, padding_value=pad_value, total_length=T + 2)
    assert_close(ye, yt)
    assert le.dtype is ember.int64 and le.tolist() == lt.tolist() == lens
    cot = rng.standard_normal(tuple(yt.shape))
    (ye * ember.tensor(cot)).sum().backward()
    (yt * torch.tensor(cot)).sum().backward()
    assert_close(xe.grad, xt.grad)


@needs_torch
def test_pad_packed_grad_wrt_data_and_float32():
    rng = np.random.default_rng()
    seqs = [rng.standard_normal((n, 4)).astype(np.float32) for n in (2, 5, 3, 5)]
    se = [ember.tensor(s, requires_grad=True) for s in seqs]
    st = [torch.tensor(s, requires_grad=True) for s in seqs]
    pe, pt = er.pack_sequence(se, enforce_sorted=False), tr.pack_sequence(st, enforce_sorted=False)
    _assert_packed_equal(pe, pt)
    de = pe.data.detach().requires_grad_()
    dt = pt.data.detach().requires_grad_()
    ye, _ = er.pad_packed_sequence(er.PackedSequence(de, pe.batch_sizes, pe.sorted_indices), batch_first=True)
    yt, _ = tr.pad_packed_sequence(tr.PackedSequence(dt, pt.batch_sizes, pt.sorted_indices), batch_first=True)
    assert_close(ye, yt)
    cot = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    (ye * ember.tensor(cot)).sum().backward()
    (yt * torch.tensor(cot)).sum().backward()
    assert_close(de.grad, dt.grad)
    # through pack_sequence: gradients reach every original sequence
    (pe.data * 2).sum().backward()
    (pt.data * 2).sum().backward()
    for a, b in zip(se, st):
        assert_close(a.grad, b.grad)


@needs_torch
def test_unpack_and_unpad_match_torch():
    rng = np.random.default_rng()
    seqs = [rng.standard_normal((n, 2)) for n in (3, 1, 4)]
    pe = er.pack_sequence([ember.tensor(s) for s in seqs], enforce_sorted=False)
    pt = tr.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    for a, b in zip(er.unpack_sequence(pe), tr.unpack_sequence(pt)):
        assert_close(a, b)
    padded = rng.standard_normal((4, 3, 2))
    lens = [2, 4, 1]
    ue = er.unpad_sequence(ember.tensor(padded), ember.tensor(lens))
    ut = tr.unpad_sequence(torch.tensor(padded), torch.tensor(lens))
    for a, b in zip(ue, ut):
        assert_close(a, b)


# ------------------------------------------------------------------ RNN modules on packed input
MODES = [("RNN", {"nonlinearity": "tanh"}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}),
         ("LSTM", {"proj_size": 3}), ("GRU", {})]
LAYOUTS = [  # (batch_first, enforce_sorted, pass hx)
    (False, True, False), (True, False, True), (False, False, True), (True, True, True)]


@needs_torch
@pytest.mark.parametrize("cls,kw", MODES, ids=["rnn_tanh", "rnn_relu", "lstm", "lstm_proj", "gru"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("batch_first,enforce_sorted,with_hx", LAYOUTS,
                         ids=["tm-sorted", "bf-unsorted-hx", "tm-unsorted-hx", "bf-sorted-hx"])
def test_rnn_packed_matches_torch(cls, kw, bidirectional, num_layers, batch_first, enforce_sorted, with_hx):
    rng = np.random.default_rng()
    I, H, T, B = 3, 5, 5, 4
    args = dict(num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first, **kw)
    tm = getattr(torch.nn, cls)(I, H, **args).double()
    em = getattr(ember.nn, cls)(I, H, **args).double()
    _copy_weights(tm, em)
    lstm = cls == "LSTM"
    D = 2 if bidirectional else 1
    lens = _lengths(rng, B, T, enforce_sorted)
    x = rng.standard_normal((B, T, I) if batch_first else (T, B, I))
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    pe = er.pack_padded_sequence(xe, lens, batch_first=batch_first, enforce_sorted=enforce_sorted)
    pt = tr.pack_padded_sequence(xt, lens, batch_first=batch_first, enforce_sorted=enforce_sorted)
    hx_e = hx_t = None
    leaves_e, leaves_t = [xe], [xt]
    if with_hx:
        h_size = kw.get("proj_size") or H
        h0 = rng.standard_normal((num_layers * D, B, h_size))
        h0e, h0t = ember.tensor(h0, requires_grad=True), torch.tensor(h0, requires_grad=True)
        leaves_e.append(h0e)
        leaves_t.append(h0t)
        hx_e, hx_t = h0e, h0t
        if lstm:
            c0 = rng.standard_normal((num_layers * D, B, H))
            c0e, c0t = ember.tensor(c0, requires_grad=True), torch.tensor(c0, requires_grad=True)
            leaves_e.append(c0e)
            leaves_t.append(c0t)
            hx_e, hx_t = (h0e, c0e), (h0t, c0t)
    oe, he = em(pe, hx_e)
    ot, ht = tm(pt, hx_t)
    tol = dict(rtol=1e-9, atol=1e-10)
    _assert_packed_equal(oe, ot, **tol)
    he, ht = (he if lstm else (he,)), (ht if lstm else (ht,))
    for a, b in zip(he, ht):          # h_n (and c_n) in the original batch order
        assert_close(a, b, **tol)
    ye, le = er.pad_packed_sequence(oe, batch_first=batch_first)
    yt, lt = tr.pad_packed_sequence(ot, batch_first=batch_first)
    assert_close(ye, yt, **tol)
    assert le.tolist() == lt.tolist() == lens
    # gradients of a random projection of the padded output and the final states
    cots = [rng.standard_normal(tuple(t.shape)) for t in (yt, *ht)]
    loss_e = sum((a * ember.tensor(c)).sum() for a, c in zip((ye, *he), cots))
    loss_t = sum((a * torch.tensor(c)).sum() for a, c in zip((yt, *ht), cots))
    names = [n for n, _ in tm.named_parameters()]
    ge = ember.autograd.grad(loss_e, leaves_e + [getattr(em, n) for n in names])
    gt = torch.autograd.grad(loss_t, leaves_t + [getattr(tm, n) for n in names])
    for name, a, b in zip(["input", "h0", "c0"][:len(leaves_e)] + names, ge, gt):
        assert_close(a, b, rtol=1e-8, atol=1e-10, msg=name)


@needs_torch
def test_lstm_packed_float32_dropout_free_training_step():
    """float32 at default tolerances, a 2-layer bidirectional LSTM, batch_first, unsorted."""
    rng = np.random.default_rng()
    tm = torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True)
    em = ember.nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True)
    _copy_weights(tm, em)
    x = rng.standard_normal((5, 7, 4)).astype(np.float32)
    lens = [3, 7, 1, 7, 5]
    oe, (he, ce) = em(er.pack_padded_sequence(ember.tensor(x), lens, batch_first=True, enforce_sorted=False))
    ot, (ht, ct) = tm(tr.pack_padded_sequence(torch.tensor(x), lens, batch_first=True, enforce_sorted=False))
    _assert_packed_equal(oe, ot, rtol=2e-5, atol=2e-5)
    assert_close(he, ht, rtol=2e-5, atol=2e-5)
    assert_close(ce, ct, rtol=2e-5, atol=2e-5)
    (oe.data.sum() + he.sum()).backward()
    (ot.data.sum() + ht.sum()).backward()
    for n, p in tm.named_parameters():
        assert_close(getattr(em, n).grad, p.grad, rtol=1e-4, atol=1e-5, msg=n)


# ------------------------------------------------------------------ torch-free checks
@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_packed_equals_each_sequence_alone(cls):
    """Packing must not change any sequence's result: compare with each sequence run unbatched."""
    rng = np.random.default_rng()
    m = getattr(ember.nn, cls)(3, 4, num_layers=2, bidirectional=True).double()
    seqs = [rng.standard_normal((n, 3)) for n in (4, 2, 6, 2, 1)]
    out, hid = m(er.pack_sequence([ember.tensor(s) for s in seqs], enforce_sorted=False))
    padded, lens = er.pad_packed_sequence(out, batch_first=True)
    assert lens.tolist() == [4, 2, 6, 2, 1]
    h_n = hid[0] if cls == "LSTM" else hid
    for b, s in enumerate(seqs):
        o1, hid1 = m(ember.tensor(s))
        h1 = hid1[0] if cls == "LSTM" else hid1
        np.testing.assert_allclose(to_numpy(padded[b, :len(s)]), to_numpy(o1), rtol=1e-10, atol=1e-12)
        assert not np.any(to_numpy(padded[b, len(s):]))
        np.testing.assert_allclose(to_numpy(h_n[:, b]), to_numpy(h1), rtol=1e-10, atol=1e-12)
        if cls == "LSTM":
            np.testing.assert_allclose(to_numpy(hid[1][:, b]), to_numpy(hid1[1]), rtol=1e-10, atol=1e-12)


def test_gradcheck_packed_lstm_and_pack_pad():
    rng = np.random.default_rng()
    m = ember.nn.LSTM(2, 3, bidirectional=True).double()
    lens = [2, 3, 1]
    x = ember.tensor(rng.standard_normal((3, 3, 2)), requires_grad=True)
    h0 = ember.tensor(rng.standard_normal((2, 3, 3)), requires_grad=True)
    c0 = ember.tensor(rng.standard_normal((2, 3, 3)), requires_grad=True)

    def f(x, h0, c0):
        out, (h, c) = m(er.pack_padded_sequence(x, lens, enforce_sorted=False), (h0, c0))
        y, _ = er.pad_packed_sequence(out, padding_value=0.5)
        return (y * y).sum() + (h * c).sum()
    assert ember.autograd.gradcheck(f, (x, h0, c0))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_round_trip(batch_first, enforce_sorted):
    rng = np.random.default_rng()
    T, B = 6, 5
    lens = _lengths(rng, B, T, enforce_sorted)
    x = rng.standard_normal((B, T, 2) if batch_first else (T, B, 2))
    p = er.pack_padded_sequence(ember.tensor(x), lens, batch_first=batch_first, enforce_sorted=enforce_sorted)
    assert tuple(p.data.shape) == (sum(lens), 2)
    assert p.batch_sizes.tolist() == [sum(n > t for n in lens) for t in range(T)]
    if enforce_sorted:
        assert p.sorted_indices is None and p.unsorted_indices is None
    else:
        order = p.sorted_indices.tolist()
        assert [lens[i] for i in order] == sorted(lens, reverse=True)
        assert [order[i] for i in p.unsorted_indices.tolist()] == list(range(B))
    y, got_lens = er.pad_packed_sequence(p, batch_first=batch_first, padding_value=-7.5, total_length=T + 1)
    assert got_lens.tolist() == lens
    expect = np.full(((B, T + 1, 2) if batch_first else (T + 1, B, 2)), -7.5)
    for b, n in enumerate(lens):
        if batch_first:
            expect[b, :n] = x[b, :n]
        else:
            expect[:n, b] = x[:n, b]
    np.testing.assert_array_equal(to_numpy(y), expect)
    # unpad_sequence / unpack_sequence recover the sequences (in the original order)
    seqs = er.unpad_sequence(y, got_lens, batch_first=batch_first)
    seqs2 = er.unpack_sequence(p)
    for b, n in enumerate(lens):
        ref = x[b, :n] if batch_first else x[:n, b]
        np.testing.assert_array_equal(to_numpy(seqs[b]), ref)
        np.testing.assert_array_equal(to_numpy(seqs2[b]), ref)
    assert tuple(y.shape) == expect.shape  # unpad_sequence left its input as it was


def test_pack_sequence_integer_data_and_padding_value():
    seqs = [ember.tensor([1, 2, 3]), ember.tensor([4, 5]), ember.tensor([6])]
    p = er.pack_sequence(seqs)
    assert p.data.tolist() == [1, 4, 6, 2, 5, 3] and p.batch_sizes.tolist() == [3, 2, 1]
    assert p.data.dtype is ember.int64
    y, lens = er.pad_packed_sequence(p, batch_first=True, padding_value=-1)
    assert y.tolist() == [[1, 2, 3], [4, 5, -1], [6, -1, -1]] and lens.tolist() == [3, 2, 1]
    # torch's docstring example: unsorted, batch_first
    seq = ember.tensor([[1, 2, 0], [3, 0, 0], [4, 5, 6]])
    p = er.pack_padded_sequence(seq, [2, 1, 3], batch_first=True, enforce_sorted=False)
    assert p.data.tolist() == [4, 1, 3, 5, 2, 6] and p.batch_sizes.tolist() == [3, 2, 1]
    assert p.sorted_indices.tolist() == [2, 0, 1] and p.unsorted_indices.tolist() == [1, 2, 0]
    y, lens = er.pad_packed_sequence(p, batch_first=True)
    assert y.tolist() == [[1, 2, 0], [3, 0, 0], [4, 5, 6]] and lens.tolist() == [2, 1, 3]


def test_packed_sequence_api():
    rng = np.random.default_rng()
    x = ember.tensor(rng.standard_normal((4, 3, 2)).astype(np.float32))
    p = er.pack_padded_sequence(x, [4, 1, 3], enforce_sorted=False)
    data, batch_sizes, sorted_indices, unsorted_indices = p      # a namedtuple
    assert p.data is data and p.batch_sizes is batch_sizes
    assert not p.is_cuda and not p.is_pinned()
    assert p.to(ember.float32) is p and p.to("cpu") is p and p.float() is p
    q = p.to(ember.float64)
    assert q.data.dtype is ember.float64 and q.batch_sizes is p.batch_sizes
    assert q.sorted_indices.tolist() == p.sorted_indices.tolist()
    assert p.double().data.dtype is ember.float64 and p.half().data.dtype is ember.float16
    np.testing.assert_allclose(to_numpy(q.data), to_numpy(p.data).astype(np.float64))
    # the constructor forms PyTorch accepts; unsorted_indices is derived from sorted_indices
    r = er.PackedSequence(p.data, p.batch_sizes, p.sorted_indices)
    assert r.unsorted_indices.tolist() == p.unsorted_indices.tolist() == [0, 2, 1]
    r = er.PackedSequence((p.data, p.batch_sizes))
    assert r.sorted_indices is None and r.unsorted_indices is None
    assert er.invert_permutation(ember.tensor([2, 0, 3, 1])).tolist() == [1, 3, 0, 2]
    assert er.invert_permutation(None) is None
    assert repr(r).startswith("PackedSequence(data=tensor(")


def test_rnn_packed_hidden_in_original_order():
    """hx is given in the original batch order and h_n comes back in it: permuting the batch
    permutes h_n (and the padded output) the same way."""
    rng = np.random.default_rng()
    m = ember.nn.GRU(2, 3, bidirectional=True).double()
    x = rng.standard_normal((5, 4, 2))
    h0 = rng.standard_normal((2, 4, 3))
    lens = [3, 5, 1, 4]
    perm = [2, 0, 3, 1]
    o1, h1 = m(er.pack_padded_sequence(ember.tensor(x), lens, enforce_sorted=False), ember.tensor(h0))
    o2, h2 = m(er.pack_padded_sequence(ember.tensor(x[:, perm]), [lens[i] for i in perm], enforce_sorted=False),
               ember.tensor(h0[:, perm]))
    np.testing.assert_allclose(to_numpy(h2), to_numpy(h1)[:, perm], rtol=1e-12)
    y1, _ = er.pad_packed_sequence(o1)
    y2, _ = er.pad_packed_sequence(o2)
    np.testing.assert_allclose(to_numpy(y2), to_numpy(y1)[:, perm], rtol=1e-12)


# ------------------------------------------------------------------ errors
def test_pack_errors():
    x = ember.randn(4, 3, 2)
    with pytest.raises(RuntimeError, match="enforce_sorted"):
        er.pack_padded_sequence(x, [2, 4, 1])
    with pytest.raises(RuntimeError, match="enforce_sorted"):
        er.pack_sequence([ember.randn(2), ember.randn(3)])
    with pytest.raises(RuntimeError, match="greater than 0"):
        er.pack_padded_sequence(x, [4, 1, 0])
    with pytest.raises(RuntimeError, match="greater than 0"):
        er.pack_padded_sequence(x, [0, 4, 1], enforce_sorted=False)
    with pytest.raises(RuntimeError, match="greater than 0"):
        er.pack_padded_sequence(x, [4, 2, -1])
    with pytest.raises(RuntimeError, match="longer than the padded sequence length 4"):
        er.pack_padded_sequence(x, [5, 3, 1])
    with pytest.raises(RuntimeError, match="longer than the padded sequence length 3"):
        er.pack_padded_sequence(x, [4, 3, 2, 1], batch_first=True)  # batch_first: T is dim 1
    with pytest.raises(RuntimeError, match=r"len\(lengths\)` to be equal to batch_size, but got 2 \(batch_size=3\)"):
        er.pack_padded_sequence(x, [2, 1])
    with pytest.raises(RuntimeError, match="1D CPU int64"):
        er.pack_padded_sequence(x, ember.tensor([[4, 3, 1]]))
    with pytest.raises(RuntimeError, match="empty"):
        er.pack_padded_sequence(ember.randn(0, 3, 2), [1, 1, 1])
    with pytest.raises(IndexError, match="at least 2 dimensions"):
        er.pack_padded_sequence(ember.randn(4), [4])
    p = er.pack_padded_sequence(x, [4, 3, 1])
    with pytest.raises(ValueError, match="total_length=2 and max sequence length being 4"):
        er.pad_packed_sequence(p, total_length=2)


def test_rnn_packed_errors():
    p = er.pack_padded_sequence(ember.randn(4, 3, 2), [4, 3, 1])
    with pytest.raises(RuntimeError, match="input_size"):
        ember.nn.GRU(5, 3)(p)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 3, 4\), got \[1, 2, 4\]"):
        ember.nn.RNN(2, 4)(p, ember.randn(1, 2, 4))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(2, 3, 4\), got \[2, 3, 5\]"):
        ember.nn.LSTM(2, 4, bidirectional=True)(p, (ember.randn(2, 3, 4), ember.randn(2, 3, 5)))
    p3 = er.PackedSequence(ember.randn(8, 1, 2), p.batch_sizes)
    with pytest.raises(RuntimeError, match="input must have 2 dimensions, got 3"):
        ember.nn.RNN(2, 4)(p3)


# ------------------------------------------------------------------ ember.compile
def test_compiled_module_on_packed_input_matches_eager():
    """Under ember.compile the RNN graph-breaks on the packed batch sizes (read as Python ints) and runs
    eagerly; results and gradients must equal eager ones."""
    rng = np.random.default_rng()

    class Model(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = ember.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
            self.head = ember.nn.Linear(8, 2)

        def forward(self, x, lengths):
            p = er.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, (h, c) = self.rnn(p)
            y, _ = er.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
            return self.head(y).sum() + (h * c).sum()

    m = Model()
    cm = ember.compile(m)
    x = rng.standard_normal((4, 6, 3)).astype(np.float32)
    for lens in ([3, 6, 1, 4], [6, 6, 2, 5], ember.tensor([2, 1, 6, 6])):
        grads = []
        for f in (m, cm):
            m.zero_grad()
            xe = ember.tensor(x, requires_grad=True)
            loss = f(xe, lens)
            loss.backward()
            grads.append([loss, xe.grad] + [p.grad for p in m.parameters()])
        for a, b in zip(*grads):
            np.testing.assert_allclose(to_numpy(b), to_numpy(a), rtol=1e-5, atol=1e-5)
    p = er.pack_padded_sequence(ember.tensor(x), [6, 5, 3, 1], batch_first=True)
    crnn = ember.compile(m.rnn)
    for _ in range(2):
        o1, (h1, c1) = m.rnn(p)
        o2, (h2, c2) = crnn(p)
        assert isinstance(o2, er.PackedSequence) and o2.batch_sizes.tolist() == [4, 3, 3, 2, 2, 1]
        for a, b in ((o1.data, o2.data), (h1, h2), (c1, c2)):
            np.testing.assert_allclose(to_numpy(b), to_numpy(a), rtol=1e-6, atol=1e-6)


def test_pin_memory_needs_an_accelerator_as_tensors_do():
    """``PackedSequence.pin_memory`` defers to ``Tensor.pin_memory``: torch's RuntimeError on a
    machine without an accelerator (the old message said ember has no pinned memory at all)."""
    if ember.accelerator.is_available():
        pytest.skip("an accelerator is present")
    p = er.pack_sequence([ember.randn(3, 2), ember.randn(2, 2)])
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
        p.pin_memory()
    assert not p.is_pinned()

"""ember.mode / Tensor.mode and F.ctc_loss / nn.CTCLoss vs PyTorch.

mode: PyTorch's CPU kernel reports the smallest of equally frequent values at its last
occurrence for slices of up to 16 elements (it insertion-sorts those); for longer slices its
index is some occurrence, so there only ``values`` and ``gather(indices) == values`` are pinned
to torch (ember's own last-occurrence rule is checked against a numpy reference). With NaN in a
slice torch's answer depends on where its comparison sort leaves the NaNs; torch is the oracle
only when the NaNs trail the slice (then its sort keeps them last, as ember's).

ctc_loss: PyTorch's ``log_probs.grad`` is ``exp(log_probs) - posterior`` on the frames used,
not the derivative of the loss; ember follows it, so the finite-difference checks go through
``log_softmax`` (where both conventions give the same gradient) or subtract ``exp(log_probs)``.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.nn as enn
import ember.nn.functional as EF
from oracle import assert_close, gradcheck_fn, needs_torch, torch

if torch is not None:
    import torch.nn.functional as TF

SET = settings(max_examples=15, deadline=None)
SLOW = settings(max_examples=8, deadline=None)
# a shape, a dim of it (drawn in the test) and keepdim
SHAPE_DIM_KEEP = dict(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), data=st.data(),
                      keepdim=st.booleans())
NAN = float("nan")


def rng():
    return np.random.default_rng()


def same(e, t):
    """Exact comparison (values, dtype, shape), NaN equal to NaN."""
    assert_close(e, t, rtol=0, atol=0)


# ====================================================================== mode
def _mode_data(shape, kind):
    g = rng()
    if kind == "bool":
        return g.random(size=shape) < 0.5
    if kind in ("float32", "float64", "float16"):
        if g.random() < 0.3:   # distinct values: every frequency 1, the smallest wins
            return g.uniform(-3, 3, size=shape).astype(kind)
        return g.integers(-2, 3, size=shape).astype(kind) + np.asarray(0.5, kind)
    return g.integers(0 if kind == "uint8" else -2, 3, size=shape).astype(kind)


def _mode_ref(a, dim, keepdim):
    """ember's rule in numpy: the smallest of the most frequent values along ``dim`` (each NaN a
    value of its own, sorted after every number) at its last occurrence."""
    x = np.moveaxis(a, dim, -1)
    vals = np.empty(x.shape[:-1], a.dtype)
    idx = np.empty(x.shape[:-1], np.int64)
    for i in np.ndindex(*x.shape[:-1]):
        row = x[i]
        best = None
        for j, v in enumerate(row):
            if isinstance(v, np.floating) and np.isnan(v):
                key = (-1, 1, j)          # frequency 1, after every number, first NaN first
            else:
                hits = np.nonzero(row == v)[0]
                key = (-len(hits), 0, v)
                j = hits[-1]
            if best is None or key < best[0]:
                best = (key, j)
        idx[i] = best[1]
        vals[i] = row[best[1]]
    if keepdim:
        vals, idx = np.expand_dims(vals, dim), np.expand_dims(idx, dim)
    return vals, idx


@needs_torch
@SET
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple), data=st.data(), keepdim=st.booleans(),
       kind=st.sampled_from(["float32", "float64", "float16", "int64", "int32", "int8", "uint8", "bool"]))
def test_mode_matches_torch(shape, data, keepdim, kind):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = _mode_data(shape, kind)
    e, t = ember.tensor(a), torch.tensor(a)
    re_, rt = ember.mode(e, dim, keepdim), torch.mode(t, dim, keepdim)
    assert type(re_).__name__ == "mode" and re_._fields == ("values", "indices")
    same(re_.values, rt.values)
    same(re_.indices, rt.indices)         # slices of <= 5 elements: torch's last occurrence
    m = e.mode(dim, keepdim=keepdim)
    same(m.values, rt.values)
    same(m[1], rt.indices)
    if dim == -1 and not keepdim:
        same(ember.mode(e).indices, torch.mode(t).indices)


def _dim_and_rng(data, shape):
    return data.draw(st.integers(-len(shape), len(shape) - 1)), rng()


@needs_torch
@SET
@given(**SHAPE_DIM_KEEP)
def test_mode_nan(shape, data, keepdim):
    dim, g = _dim_and_rng(data, shape)
    a = g.integers(-2, 2, size=shape).astype(np.float32)
    # NaNs at the end of each slice (a random count, the whole slice sometimes): torch's sort
    # leaves them there, so its answer is well defined
    x = np.moveaxis(a, dim, -1)
    n = x.shape[-1]
    for i in np.ndindex(*x.shape[:-1]):
        k = int(g.integers(0, n + 1))
        if k:
            x[i][n - k:] = np.nan
    e, t = ember.tensor(a), torch.tensor(a)
    re_, rt = ember.mode(e, dim, keepdim), torch.mode(t, dim, keepdim)
    same(re_.values, rt.values)
    same(re_.indices, rt.indices)
    # NaN anywhere: ember's rule (each NaN a value of its own, after the numbers)
    a = g.integers(-2, 2, size=shape).astype(np.float64)
    a[g.random(size=shape) < 0.3] = np.nan
    re_ = ember.mode(ember.tensor(a), dim, keepdim)
    v, i = _mode_ref(a, dim, keepdim)
    np.testing.assert_array_equal(re_.values.numpy(), v)
    np.testing.assert_array_equal(re_.indices.numpy(), i)


def test_mode_nan_examples():
    a = ember.tensor([[NAN, NAN, 1.0, 1.0, 1.0], [NAN, 1.0, NAN, 2.0, 2.0], [NAN, NAN, NAN, NAN, NAN],
                      [NAN, 3.0, 2.0, NAN, 5.0], [1.0, NAN, 1.0, 2.0, 2.0]])
    r = ember.mode(a, 1)
    np.testing.assert_array_equal(r.values.numpy(), [1.0, 2.0, NAN, 2.0, 1.0])
    np.testing.assert_array_equal(r.indices.numpy(), [4, 4, 0, 2, 2])


@needs_torch
@SET
@given(n=st.integers(17, 60), lead=st.integers(1, 3), kind=st.sampled_from(["float32", "int64"]))
def test_mode_long_slices(n, lead, kind):
    """Above 16 elements torch's index is any occurrence: values and consistency are pinned to
    torch, ember's last occurrence to the reference."""
    a = rng().integers(-3, 4, size=(lead, n)).astype(kind)
    e, t = ember.tensor(a), torch.tensor(a)
    re_, rt = ember.mode(e, 1), torch.mode(t, 1)
    same(re_.values, rt.values)
    same(e.gather(1, re_.indices.unsqueeze(1)).squeeze(1), rt.values)
    assert bool((t.gather(1, rt.indices.unsqueeze(1)).squeeze(1) == rt.values).all())
    v, i = _mode_ref(a, 1, False)
    np.testing.assert_array_equal(re_.indices.numpy(), i)
    re_, rt = ember.mode(e.t(), 0, True), torch.mode(t.t(), 0, True)
    same(re_.values, rt.values)


@needs_torch
def test_mode_edges_and_errors():
    x = np.float32(rng().uniform(-1, 1))
    for args in ((), (0,), (-1, True)):
        re_, rt = ember.mode(ember.tensor(x), *args), torch.mode(torch.tensor(x), *args)
        same(re_.values, rt.values)
        same(re_.indices, rt.indices)
    for shape, dim, keepdim in (((0, 3), 1, False), ((3, 0), 0, True), ((0, 2, 3), 1, True), ((2, 0, 3), 2, False)):
        z = np.zeros(shape, np.float32)
        re_, rt = ember.mode(ember.tensor(z), dim, keepdim), torch.mode(torch.tensor(z), dim, keepdim)
        same(re_.values, rt.values)
        same(re_.indices, rt.indices)
    for shape, dim in (((0, 3), 0), ((3, 0), 1), ((0,), 0), ((0, 0), -1)):
        with pytest.raises(IndexError) as te:
            torch.mode(torch.zeros(shape), dim)
        with pytest.raises(IndexError, match=str(te.value).replace("(", r"\(").replace(")", r"\)")):
            ember.mode(ember.zeros(shape), dim)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 2\)"):
        ember.mode(ember.randn(3), 2)
    with pytest.raises(TypeError, match="argument 'out' must be tuple of Tensors"):   # torch: a TypeError too
        ember.mode(ember.randn(3), out=ember.randn(1))
    # signed zeros are one value; the value reported is the element at the index
    same(ember.mode(ember.tensor([-0.0, 0.0, 1.0])).values, torch.mode(torch.tensor([-0.0, 0.0, 1.0])).values)
    same(ember.mode(ember.tensor([0.0, -0.0, 1.0])).values, torch.mode(torch.tensor([0.0, -0.0, 1.0])).values)


def _mode_grads(arr, dim, keepdim):
    cot = rng().standard_normal(_mode_ref(arr, dim, keepdim)[0].shape)
    out = []
    for m in (ember, torch):
        x = m.tensor(arr, requires_grad=True)
        loss = (m.mode(x, dim, keepdim).values * m.tensor(cot)).sum()
        out.append(m.autograd.grad(loss, [x])[0])
    return out


@needs_torch
@SET
@given(**SHAPE_DIM_KEEP)
def test_mode_gradient(shape, data, keepdim):
    dim, g = _dim_and_rng(data, shape)
    ties = g.integers(-2, 2, size=shape).astype(np.float64) + 0.25
    ge, gt = _mode_grads(ties, dim, keepdim)          # all of it to the element at the index
    assert_close(ge, gt)
    distinct = g.uniform(-3, 3, size=shape)
    ge, gt = _mode_grads(distinct, dim, keepdim)
    assert_close(ge, gt)
    assert gradcheck_fn(lambda m, x: m.mode(x, dim, keepdim).values, [distinct])


def test_mode_compiled_and_fake():
    ember.dynamo.reset()

    def f(x):
        a, b = ember.mode(x, 1), x.mode(0, keepdim=True)
        return a.values * 2, a.indices, b.values, b.indices

    cf = ember.compile(f)
    for _ in range(2):
        arr = rng().integers(-2, 3, size=(4, 6)).astype(np.float32)
        x1, x2 = ember.tensor(arr, requires_grad=True), ember.tensor(arr, requires_grad=True)
        got, want = cf(x1), f(x2)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        cot = [ember.tensor(rng().standard_normal(tuple(got[i].shape)).astype(np.float32)) for i in (0, 2)]
        ga, = ember.autograd.grad((got[0] * cot[0]).sum() + (got[2] * cot[1]).sum(), [x1])
        gb, = ember.autograd.grad((want[0] * cot[0]).sum() + (want[2] * cot[1]).sum(), [x2])
        np.testing.assert_allclose(ga.numpy(), gb.numpy(), rtol=1e-6, atol=1e-6)
    from ember.fx.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        x = mode.from_tensor(ember.randn(3, 4))
        v, i = ember.mode(x, 1, keepdim=True)
        assert tuple(v.shape) == (3, 1) and i.dtype is ember.int64
        assert tuple(x.mode(0).indices.shape) == (4,)


# ====================================================================== ctc_loss
def _ctc_case(g, T, N, C, S, normalized=True, dtype="float64", allow_blank=False, blank=None):
    """Random (log_probs, padded targets, input_lengths, target_lengths, blank); the targets
    avoid the blank unless ``allow_blank`` (or C == 1 leaves nothing else)."""
    x = g.standard_normal((T, N, C))
    lp = x - np.log(np.exp(x).sum(2, keepdims=True)) if normalized else x
    tl = g.integers(0, S + 1, size=N)
    il = g.integers(0, T + 1, size=N)
    il[g.random(N) < 0.6] = T
    blank = int(g.integers(0, C)) if blank is None else blank
    labels = [c for c in range(C) if c != blank] if not allow_blank else list(range(C))
    tg = g.choice(labels, size=(N, S)) if labels else np.full((N, S), blank)
    return lp.astype(dtype), tg.astype(np.int64), il.astype(np.int64), tl.astype(np.int64), blank


def _run_ctc(mod, F, lp, targets, il, tl, blank, reduction, zero_infinity, as_tensor, cot):
    x = mod.tensor(lp, requires_grad=True)
    lens = (mod.tensor(il), mod.tensor(tl)) if as_tensor else (il.tolist(), tl.tolist())
    out = F.ctc_loss(x, mod.tensor(targets), *lens, blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    g, = mod.autograd.grad((out * mod.tensor(cot).to(out.dtype)).sum(), [x])
    return out, g


@needs_torch
@SET
@given(T=st.integers(1, 7), N=st.integers(1, 3), C=st.integers(1, 5), S=st.integers(0, 4),
       reduction=st.sampled_from(["none", "sum", "mean"]), zero_infinity=st.booleans(), as_tensor=st.booleans(),
       concat=st.booleans(), normalized=st.booleans(), allow_blank=st.sampled_from([False, False, True]))
def test_ctc_loss_matches_torch(T, N, C, S, reduction, zero_infinity, as_tensor, concat, normalized, allow_blank):
    g = rng()
    lp, tg, il, tl, blank = _ctc_case(g, T, N, C, S, normalized, allow_blank=allow_blank)
    blank_in_target = any((tg[i, :tl[i]] == blank).any() for i in range(N))
    if concat:
        tg = np.concatenate([tg[i, :tl[i]] for i in range(N)])
    cot = g.standard_normal(N if reduction == "none" else ())
    oe, ge = _run_ctc(ember, EF, lp, tg, il, tl, blank, reduction, zero_infinity, as_tensor, cot)
    ot, gt = _run_ctc(torch, TF, lp, tg, il, tl, blank, reduction, zero_infinity, as_tensor, cot)
    assert_close(oe, ot)
    if blank_in_target:
        # a label equal to blank is outside CTC's definition (torch's docs forbid it): the loss
        # follows the same recursion as torch's, but torch's hand-written backward then stops
        # being the loss's derivative, while ember's (autograd) stays it
        return
    # infeasible samples (inf loss) have NaN gradients in both when zero_infinity is off; ember's
    # NaNs sit in the entries its end states read, torch's fill the sample: compare the rest
    per = TF.ctc_loss(torch.tensor(lp), torch.tensor(tg), il.tolist(), tl.tolist(), blank=blank, reduction="none")
    bad = torch.isinf(per).numpy() & (il > 0) & (not zero_infinity)
    ok = ~bad
    np.testing.assert_allclose(ge.numpy()[:, ok], gt.numpy()[:, ok], rtol=1e-9, atol=1e-10)
    for n in np.nonzero(bad)[0]:
        assert np.isnan(ge.numpy()[:il[n], n]).any() and np.isnan(gt.numpy()[:il[n], n]).all()


@needs_torch
@SLOW
@given(T=st.integers(1, 6), N=st.integers(1, 3), C=st.integers(2, 5), S=st.integers(0, 3),
       reduction=st.sampled_from(["none", "sum", "mean"]))
def test_ctc_loss_float32(T, N, C, S, reduction):
    g = rng()
    lp, tg, il, tl, blank = _ctc_case(g, T, N, C, S, dtype="float32")
    cot = g.standard_normal(N if reduction == "none" else ()).astype(np.float32)
    oe, ge = _run_ctc(ember, EF, lp, tg, il, tl, blank, reduction, True, True, cot)
    ot, gt = _run_ctc(torch, TF, lp, tg, il, tl, blank, reduction, True, True, cot)
    assert oe.dtype is ember.float32
    assert_close(oe, ot, rtol=1e-5, atol=1e-5)
    assert_close(ge, gt, rtol=1e-4, atol=1e-5)


@needs_torch
@SLOW
@given(T=st.integers(1, 5), N=st.integers(1, 2), C=st.integers(2, 4), S=st.integers(0, 3),
       reduction=st.sampled_from(["none", "sum", "mean"]))
def test_ctc_loss_finite_differences(T, N, C, S, reduction):
    g = rng()
    _, tg, il, tl, blank = _ctc_case(g, T, N, C, S)
    il = np.maximum(il, 2 * tl + 1).clip(max=T)       # mostly feasible; zero_infinity for the rest
    tge, ile, tle = ember.tensor(tg), ember.tensor(il), ember.tensor(tl)
    x = g.standard_normal((T, N, C))

    def through_softmax(m, v):
        return EF.ctc_loss(v.log_softmax(2), tge, ile, tle, blank, reduction, True)
    assert gradcheck_fn(through_softmax, [x])
    # on raw log_probs the gradient is PyTorch's exp(log_probs) - posterior: minus exp on the
    # frames used it is the loss's derivative
    xe = ember.tensor(x, requires_grad=True)
    loss = EF.ctc_loss(xe, tge, ile, tle, blank, "sum", True)
    ge, = ember.autograd.grad(loss, [xe])
    used = (np.arange(T)[:, None] < il[None, :])[:, :, None]
    per = EF.ctc_loss(ember.tensor(x), tge, ile, tle, blank, "none").numpy()
    ge = ge.numpy() - np.where(used & np.isfinite(per)[None, :, None], np.exp(x), 0.0)
    eps = 1e-6
    for idx in np.ndindex(*x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        f = [float(EF.ctc_loss(ember.tensor(v), tge, ile, tle, blank, "sum", True)) for v in (hi, lo)]
        assert abs((f[0] - f[1]) / (2 * eps) - ge[idx]) < 1e-5, idx


@needs_torch
def test_ctc_loss_unbatched_and_special_cases():
    g = rng()
    T, C = 6, 4
    x = g.standard_normal((T, C))
    lp = x - np.log(np.exp(x).sum(1, keepdims=True))
    tg = g.integers(1, C, size=3)
    for red in ("none", "sum", "mean"):
        for lens in ((ember.tensor(T), ember.tensor(3)), ([T], [3]), (ember.tensor([5]), ember.tensor([2]))):
            tlens = tuple(torch.tensor(v.numpy()) if isinstance(v, ember.Tensor) else v for v in lens)
            k = int(np.asarray(lens[1]).reshape(-1)[0]) if not isinstance(lens[1], ember.Tensor) else int(lens[1].sum())
            # 1-D targets of an unbatched input are its whole (concatenated) target; (1, S) is padded
            for tge, tgt in ((ember.tensor(tg[:k]), torch.tensor(tg[:k])),
                             (ember.tensor(tg[None]), torch.tensor(tg[None]))):
                oe = EF.ctc_loss(ember.tensor(lp), tge, *lens, reduction=red)
                ot = TF.ctc_loss(torch.tensor(lp), tgt, *tlens, reduction=red)
                assert_close(oe, ot)
    for m, F in ((ember, EF), (torch, TF)):
        with pytest.raises(RuntimeError, match="Expected tensor to have size 2 at dimension 0, but got size 3"):
            F.ctc_loss(m.tensor(lp), m.tensor(tg), m.tensor(T), m.tensor(2))
    # empty input and empty target: -log 1 (torch: -0.0)
    lp3 = lp[:, None]
    same(EF.ctc_loss(ember.tensor(lp3), ember.tensor(tg[None]), [0], [0], reduction="none"),
         TF.ctc_loss(torch.tensor(lp3), torch.tensor(tg[None]), [0], [0], reduction="none"))
    assert np.signbit(EF.ctc_loss(ember.tensor(lp3), ember.tensor(tg[None]), [0], [0], reduction="none").numpy()[0])
    # repeated labels need a blank between them: T=2 cannot fit [1, 1], T=3 can
    rep = np.array([[1, 1]])
    for t_len in (2, 3):
        same(EF.ctc_loss(ember.tensor(lp3), ember.tensor(rep), [t_len], [2], reduction="none"),
             TF.ctc_loss(torch.tensor(lp3), torch.tensor(rep), [t_len], [2], reduction="none"))
    # labels equal to blank, padding values outside the class range, float and int32 targets
    for tgv, tlv in (([[0, 1, 0], [1, 2, 3]], [3, 3]), ([[1, 9, -4], [1, 2, 3]], [1, 3])):
        tgv = np.array(tgv)
        lpb = np.repeat(lp3, 2, 1)
        for cast in (np.int64, np.int32, np.float32):
            assert_close(EF.ctc_loss(ember.tensor(lpb), ember.tensor(tgv.astype(cast)), [6, 5], tlv, reduction="none"),
                         TF.ctc_loss(torch.tensor(lpb), torch.tensor(tgv.astype(cast)), [6, 5], tlv, reduction="none"))
    # infeasible: inf, or 0 with zero_infinity (and a zero gradient)
    xi = ember.tensor(lp3, requires_grad=True)
    out = EF.ctc_loss(xi, ember.tensor([[1, 2, 3]]), [2], [3], reduction="none")
    assert out.detach().numpy()[0] == np.inf
    out = EF.ctc_loss(xi, ember.tensor([[1, 2, 3]]), [2], [3], reduction="sum", zero_infinity=True)
    assert float(out) == 0.0
    assert not np.any(ember.autograd.grad(out, [xi])[0].numpy())


@needs_torch
def test_ctc_loss_errors():
    lp = ember.randn(5, 2, 4).log_softmax(2)
    tlp = torch.tensor(lp.numpy())
    tg = ember.tensor([[1, 2, 3], [1, 2, 1]])
    ttg = torch.tensor(tg.numpy())
    cases = [  # (ember args, torch args, exception, pattern shared with torch's message)
        ((lp, tg, [6, 5], [3, 3]), (tlp, ttg, [6, 5], [3, 3]), RuntimeError,
         r"Expected input_lengths to have value at most 5, but got value 6"),
        ((lp, tg, ember.tensor([-1, 5]), [3, 3]), (tlp, ttg, torch.tensor([-1, 5]), torch.tensor([3, 3])), RuntimeError,
         r"Expected input_lengths to have value at least 0, but got value -1"),
        ((lp, tg, [5, 5], [-1, 3]), (tlp, ttg, [5, 5], [-1, 3]), RuntimeError,
         r"Expected target_lengths to have value at least 0, but got value -1"),
        ((lp, tg, [5, 5], ember.tensor([4, 3])), (tlp, ttg, torch.tensor([5, 5]), torch.tensor([4, 3])), RuntimeError,
         r"Expected tensor to have size at least 4 at dimension 1, but got size 3 for argument #2 'targets'"),
        ((lp, tg[:1], [5, 5], [3, 3]), (tlp, ttg[:1], [5, 5], [3, 3]), RuntimeError,
         r"Expected tensor to have size 2 at dimension 0, but got size 1 for argument #2 'targets'"),
        ((lp, tg.reshape(-1)[:4], [5, 5], [3, 2]), (tlp, ttg.reshape(-1)[:4], [5, 5], [3, 2]), RuntimeError,
         r"Expected tensor to have size 5 at dimension 0, but got size 4 for argument #2 'targets'"),
        ((lp, tg.unsqueeze(0), [5, 5], [3, 3]), (tlp, ttg.unsqueeze(0), [5, 5], [3, 3]), RuntimeError,
         r"Expected 1 to 2 dimensions, but got 3-dimensional tensor for argument #2 'targets'"),
        ((lp, tg, [5, 5, 5], [3, 3]), (tlp, ttg, [5, 5, 5], [3, 3]), RuntimeError,
         r"input_lengths must be of size batch_size"),
        ((lp, tg, [5, 5], ember.tensor([3])), (tlp, ttg, torch.tensor([5, 5]), torch.tensor([3])), RuntimeError,
         r"target_lengths must be of size batch_size"),
        ((lp, tg, ember.tensor([5.0, 5.0]), [3, 3]), (tlp, ttg, torch.tensor([5.0, 5.0]), torch.tensor([3, 3])),
         RuntimeError, r"input_lengths must be integral"),
        ((lp.long(), tg, [5, 5], [3, 3]), (tlp.long(), ttg, [5, 5], [3, 3]), NotImplementedError,
         r"\"ctc_loss_cpu\" not implemented for 'Long'"),
        ((lp.half(), tg, [5, 5], [3, 3]), (tlp.half(), ttg, [5, 5], [3, 3]), NotImplementedError,
         r"\"ctc_loss_cpu\" not implemented for 'Half'"),
        ((lp[:, :0], tg[:0], [], []), (tlp[:, :0], ttg[:0], [], []), RuntimeError,
         r"log_probs tensor must not be empty"),
    ]
    for eargs, targs, exc, pat in cases:
        with pytest.raises(exc, match=pat):
            TF.ctc_loss(*targs)
        with pytest.raises(exc, match=pat):
            EF.ctc_loss(*eargs)
    for blank in (4, -1):
        with pytest.raises(RuntimeError, match="blank must be in label range"):
            TF.ctc_loss(tlp, ttg, [5, 5], [3, 3], blank=blank)
        with pytest.raises(RuntimeError, match=r"blank must be in label range \[0, 4\), but got " + str(blank)):
            EF.ctc_loss(lp, tg, [5, 5], [3, 3], blank=blank)
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        EF.ctc_loss(lp, tg, [5, 5], [3, 3], reduction="avg")
    # torch reports the dims of its internal unsqueezed view; ember names the expected shapes
    for bad in (lp.unsqueeze(0), lp[:, 0, 0]):
        with pytest.raises(RuntimeError, match=r"expected log_probs of shape \(T, N, C\), or \(T, C\)"):
            EF.ctc_loss(bad, tg, [5, 5], [3, 3])
    # labels out of the class range inside a target: torch reads out of bounds, ember refuses
    with pytest.raises(RuntimeError, match=r"targets must be class indices in \[0, 4\), but got 5"):
        EF.ctc_loss(lp, ember.tensor([[1, 5, 1], [1, 2, 3]]), [5, 5], [3, 3])
    with pytest.raises(RuntimeError, match=r"targets must be class indices in \[0, 4\), but got -1"):
        EF.ctc_loss(lp, ember.tensor([1, -1, 2]), [5, 5], [1, 2])


@needs_torch
def test_ctc_loss_module():
    m = enn.CTCLoss()
    assert (m.blank, m.reduction, m.zero_infinity) == (0, "mean", False)
    assert repr(m) == repr(torch.nn.CTCLoss())
    g = rng()
    for kw in ({}, dict(blank=2, reduction="sum", zero_infinity=True), dict(reduction="none")):
        lp, tg, il, tl, _ = _ctc_case(g, 6, 3, 5, 3, blank=kw.get("blank", 0))
        em, tm = enn.CTCLoss(**kw), torch.nn.CTCLoss(**kw)
        xe, xt = ember.tensor(lp, requires_grad=True), torch.tensor(lp, requires_grad=True)
        oe = em(xe, ember.tensor(tg), ember.tensor(il), ember.tensor(tl))
        ot = tm(xt, torch.tensor(tg), torch.tensor(il), torch.tensor(tl))
        assert_close(oe, ot)
        oe.sum().backward()
        ot.sum().backward()
        if np.isfinite(ot.detach().numpy()).all():
            assert_close(xe.grad, xt.grad)
    assert "CTCLoss" in enn.modules.__all__
    assert "ctc_loss" in EF.__all__


def test_ctc_loss_compiled():
    ember.dynamo.reset()
    g = rng()
    lp, tg, il, tl, blank = _ctc_case(g, 5, 2, 4, 3, dtype="float32")
    il[:] = 5
    tl = np.minimum(tl, 2)
    flat = np.concatenate([tg[i, :tl[i]] for i in range(2)])

    def f(x, targets, il_, tl_):
        return EF.ctc_loss(x.log_softmax(2), targets, il_, tl_, blank=blank, reduction="mean")

    cf = ember.compile(f)
    for targets in (tg, flat):
        args = (ember.tensor(targets), ember.tensor(il), ember.tensor(tl))
        x1, x2 = ember.tensor(lp, requires_grad=True), ember.tensor(lp, requires_grad=True)
        a, b = cf(x1, *args), f(x2, *args)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
        ga, = ember.autograd.grad(a, [x1])
        gb, = ember.autograd.grad(b, [x2])
        np.testing.assert_allclose(ga.numpy(), gb.numpy(), rtol=1e-5, atol=1e-6)
    from ember.fx.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        out = EF.ctc_loss(mode.from_tensor(ember.tensor(lp)), mode.from_tensor(ember.tensor(tg)),
                          mode.from_tensor(ember.tensor(il)), mode.from_tensor(ember.tensor(tl)), reduction="none")
        assert tuple(out.shape) == (2,) and out.dtype is ember.float32


def test_fx_symbolic_trace_records_mode_and_ctc_loss():
    class M(enn.Module):
        def forward(self, x, lp, tg, il, tl):
            r = ember.mode(x, 1, keepdim=True)
            return r.values * 2, x.mode().indices, EF.ctc_loss(lp, tg, il, tl, reduction="sum")

    gm = ember.fx.symbolic_trace(M())
    assert "ctc_loss" in gm.code and "mode" in gm.code
    g = rng()
    x = ember.tensor(g.integers(-2, 3, size=(3, 5)).astype(np.float32))
    lp, tg, il, tl, blank = _ctc_case(g, 5, 2, 4, 3, dtype="float32", blank=0)
    args = (x, ember.tensor(lp), ember.tensor(tg), ember.tensor(il), ember.tensor(tl))
    for a, b in zip(gm(*args), M()(*args)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())

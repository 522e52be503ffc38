"""Dynamo capture of model patterns (session 47): a mixture-of-experts expert loop (graph break
at ``where(mask)`` in a loop), inputs that are views of one tensor given symbolic sizes."""
import numpy as np
import pytest

import ember
from ember import dynamo
from ember.dynamo import convert_frame

from ._util import CountingBackend, assert_same


def _rand(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


# ----------------------------------------------------------------------- mixture of experts
class _MoE(ember.nn.Module):
    def __init__(self, d=8, n=8, k=2):
        super().__init__()
        nn = ember.nn
        self.router = nn.Linear(d, n)
        self.experts = nn.ModuleList([nn.Sequential(nn.Linear(d, 12), nn.GELU(), nn.Linear(12, d))
                                      for _ in range(n)])
        self.k = k

    def forward(self, x):
        weights, indices = ember.topk(ember.softmax(self.router(x), dim=-1), self.k, dim=-1)
        out = ember.zeros_like(x)
        for i, expert in enumerate(self.experts):
            idx, top = ember.where(indices == i)
            out[idx] += expert(x[idx]) * weights[idx, top, None]
        return out


def _grads(m):
    return [p.grad.clone() for p in m.parameters()]


def _check_step(m, cm, x, g):
    m.zero_grad()
    want = m(x)
    (want * g).sum().backward()
    want_g = _grads(m)
    m.zero_grad()
    got = cm(x)
    (got * g).sum().backward()
    assert_same(want.detach(), got.detach())
    for a, b in zip(want_g, _grads(m)):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)


def test_moe_expert_loop_compiles_a_bounded_number_of_graphs():
    """The loop breaks at ``where(indices == i)`` (data-dependent sizes); its resume function is
    compiled per expert. The two index tensors ``where`` returns are views of one tensor: they
    used to keep static sizes (a compilation per token count and expert, until the recompile
    limit sent the loop to eager). Now they get symbolic sizes together (the
    graph only reads them): per expert a first static entry, one for 2+ tokens, and the 0/1-token ones (sizes 0
    and 1 are specialised). Outputs and gradients match eager."""
    import warnings
    ember.manual_seed(0)
    m = _MoE(n=6)
    cnt = CountingBackend()
    cm = ember.compile(m, backend=cnt)
    xs = [(_rand(9 + s, 8, seed=s), _rand(9 + s, 8, seed=50 + s)) for s in range(8)]   # token counts vary
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for x, g in xs:
            _check_step(m, cm, x, g)
        n = cnt.frame_count
        for x, g in xs[:2]:
            _check_step(m, cm, x, g)
    assert cnt.frame_count == n
    assert n <= 2 + 4 * len(m.experts), n       # (before: 41, the recompile limit hit)
    assert not [w for w in caught if issubclass(w.category, dynamo.RecompileLimitExceeded)]


# ----------------------------------------------------------------------- views sharing memory
def _read_both(a, b, w):
    return (a * w[: a.shape[0]]).sum() + b.float().sum() * 2


def test_views_of_one_tensor_read_only_get_symbolic_sizes():
    """Two inputs that are views of one tensor (``where``'s index tensors) are both given
    symbolic sizes when the graph only reads them: one compilation for every size."""
    cnt = CountingBackend()
    cf = ember.compile(_read_both, backend=cnt)
    w = _rand(40, seed=1)
    for n in (5, 7, 9, 12):
        mask = _rand(n, 3, seed=n) > 0.3
        a, b = ember.where(mask)
        assert a._base is not None and a._base is b._base
        af = a.float()
        assert_same(_read_both(af, b, w), cf(af, b, w))
        assert_same(_read_both(a.float(), b, w), cf(a.float(), b, w))
        a2, b2 = ember.where(mask)
        assert_same(_read_both(a2, b2, w.long()), cf(a2, b2, w.long()))
    assert cnt.frame_count <= 4, cnt.frame_count


def _write_one_read_other(a, b):
    a.mul_(2)
    return b + 1


def _write_other_input(a, b, out):
    out.add_(a.sum())
    return out * b[0]


def test_views_of_one_tensor_written_keep_their_aliasing():
    """If the graph writes to one of two inputs sharing memory, traced with memories of their
    own the other would miss the write: the frame is traced with views static instead, and the
    write is seen through the other view as in eager."""
    cf = ember.compile(_write_one_read_other, backend="aot_eager")
    for n in (4, 6, 9):
        want_base, got_base = _rand(2, n, seed=n), _rand(2, n, seed=n)
        want = _write_one_read_other(want_base[0].view(2, n // 2) if n % 2 == 0 else want_base[0],
                                     want_base.view(-1)[: n + 2])
        got = cf(got_base[0].view(2, n // 2) if n % 2 == 0 else got_base[0], got_base.view(-1)[: n + 2])
        assert_same(want, got)
        assert_same(want_base, got_base)


def _relu_flag_by_position(a, b):
    ember.nn.functional.relu(a, True)      # the in-place flag passed by position
    return b * 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_write_by_an_inplace_flag_by_position_keeps_the_aliasing(backend):
    """The write check sees every write into a view group (its members' version counters), not
    only calls whose names or keywords say they write."""
    ember.compiler.reset()
    cf = ember.compile(_relu_flag_by_position, backend=backend, dynamic=True)
    for n in (5, 7):
        got_base = _rand(n, 6, seed=n)
        want_base = got_base.clone()
        want = _relu_flag_by_position(want_base[1:], want_base[1:])
        got = cf(got_base[1:], got_base[1:])
        assert_same(want, got)
        assert_same(want_base, got_base)


def test_read_only_view_group_guarded_against_a_written_input():
    """Views of one tensor traced with symbolic sizes and memories of their own are guarded to
    share no memory with the other inputs: a later call where the written ``out`` is their base
    recompiles (the write is seen by the reads, as eagerly)."""
    cf = ember.compile(_write_other_input, backend="aot_eager")
    for n in (5, 8):
        base = _rand(2, n, seed=n)
        out_w, out_g = _rand(2, n, seed=50 + n), _rand(2, n, seed=50 + n)
        assert_same(_write_other_input(base[0], base[1], out_w), cf(base[0], base[1], out_g))
        assert_same(out_w, out_g)
    base_w, base_g = _rand(2, 8, seed=3), _rand(2, 8, seed=3)
    want = _write_other_input(base_w[0], base_w[1], base_w)
    got = cf(base_g[0], base_g[1], base_g)
    assert_same(want, got)
    assert_same(base_w, base_g)


# ----------------------------------------------------------------------- other model patterns
class _Bert(ember.nn.Module):
    """Attention mask from padding, masked_fill with -inf, embedding padding_idx."""

    def __init__(self, vocab=20, d=8):
        super().__init__()
        nn = ember.nn
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, ids):
        mask = ids != 0
        h = self.emb(ids)
        scores = self.q(h) @ self.k(h).transpose(-1, -2) / h.shape[-1] ** 0.5
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        o = scores.softmax(-1) @ self.v(h)
        return (o * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)


class _Inner(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(8, 8)
        self.lin.register_forward_pre_hook(lambda m, inp: (inp[0] * 2,))

    def forward(self, x, scale=1.0, **kw):
        y = self.lin(x) * scale
        if kw.get("shift") is not None:
            y = y + kw["shift"]
        return _Pair(y, y.relu())


import dataclasses
import typing


class _Pair(typing.NamedTuple):
    a: typing.Any
    b: typing.Any


@dataclasses.dataclass
class _Out:
    logits: typing.Any
    hidden: typing.Any = None


class _Outer(ember.nn.Module):
    """**kwargs forwarding, NamedTuple and dataclass outputs, a forward pre-hook, no_grad and
    enable_grad regions."""

    def __init__(self):
        super().__init__()
        self.inner = _Inner()
        self.ema = ember.nn.Linear(8, 8)

    def forward(self, x, **kwargs):
        with ember.no_grad():
            target = self.ema(x)
            with ember.enable_grad():
                z = self.inner.lin(x).sum()
        pair = self.inner(x, **kwargs)
        return _Out(logits=pair.a + pair.b + z, hidden=((pair.b - target) ** 2).mean())


def _outputs(o):
    return [o.logits, o.hidden] if isinstance(o, _Out) else [o]


@pytest.mark.parametrize("case", ["bert", "outer"])
def test_model_patterns_one_graph_matching_eager(case):
    ember.manual_seed(0)
    if case == "bert":
        m, m2 = _Bert(), _Bert()
        inputs = [(ember.tensor([[1, 2, 3, 0, 0], [4, 5, 0, 0, 0]]),),
                  (ember.tensor([[1, 2, 3, 4, 0, 0], [4, 5, 6, 0, 0, 0], [7, 0, 0, 0, 0, 0]]),)]
        kw = {}
    else:
        m, m2 = _Outer(), _Outer()
        inputs = [(_rand(3, 8, seed=1),), (_rand(5, 8, seed=2),)]
        kw = {"scale": 0.5, "shift": _rand(8, seed=3)}
    m2.load_state_dict(m.state_dict())
    ex = dynamo.explain(m)(*inputs[0], **kw)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), [b.reason for b in ex.break_reasons]
    dynamo.reset()
    cm = ember.compile(m2, backend="aot_eager")
    for args in inputs:
        want, got = _outputs(m(*args, **kw)), _outputs(cm(*args, **kw))
        for a, b in zip(want, got):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
        sum(w.sum() for w in want).backward()
        sum(g.sum() for g in got).backward()
        for p, q in zip(m.parameters(), m2.parameters()):
            assert (p.grad is None) == (q.grad is None)
            if p.grad is not None:
                np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)
        m.zero_grad()
        m2.zero_grad()


# ----------------------------------------------------------------------- inference_mode blocks
_LIN = ember.nn.Linear(4, 4)


def _inference_block(x):
    with ember.inference_mode():
        z = _LIN(x) * 2
        flag = ember.is_inference_mode_enabled()
    return _LIN(x) + z, flag, z.requires_grad, ember.is_inference_mode_enabled()


def _break_in_inference_block(x):
    with ember.inference_mode():
        z = _LIN(x) * 2
        ember._dynamo.graph_break()
        flag = ember.is_inference_mode_enabled()
    return z + 1, flag


def test_inference_mode_block_is_captured_like_no_grad():
    """``with inference_mode():`` inside the frame: one graph (was two breaks, "constructing a
    inference_mode object"), its values without grad, the flag read inside True, and the
    parameters' gradients through the code after the block as eagerly."""
    x = _rand(3, 4, seed=30)
    ex = dynamo.explain(_inference_block)(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), [b.reason for b in ex.break_reasons]
    dynamo.reset()
    _LIN.zero_grad()
    want = _inference_block(x)
    want[0].sum().backward()
    want_g = _LIN.weight.grad.clone()
    _LIN.zero_grad()
    got = ember.compile(_inference_block, backend="aot_eager")(x)
    got[0].sum().backward()
    assert_same(want[0].detach(), got[0].detach())
    assert list(want[1:]) == list(got[1:]) == [True, False, False]
    np.testing.assert_allclose(_LIN.weight.grad.numpy(), want_g.numpy(), rtol=1e-6)
    assert not ember.is_inference_mode_enabled() and ember.is_grad_enabled()


def test_graph_break_inside_inference_mode_runs_the_frame_eagerly():
    """The code after a break inside the block would run without the flag: the frame runs
    eagerly (reason logged), so the flag reads True as eagerly."""
    x = _rand(3, 4, seed=31)
    got = ember.compile(_break_in_inference_block, backend="aot_eager")(x)
    assert got[1] is True
    assert_same(_break_in_inference_block(x)[0], got[0])
    assert any("inference_mode" in r for _, r in dynamo.fallback_reasons)
    assert not ember.is_inference_mode_enabled() and ember.is_grad_enabled()

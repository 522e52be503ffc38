"""Decoding loops that break in every step (session 48): a list from outside the frame that is
only appended to (the resume function's ``outs``) is not guarded on its length or items, so a
greedy-decoding loop no longer recompiles per step until the recompile limit; outside lists
mutated and read keep their guards; a replayed append lands in the list the frame saw even when
the attribute holding it is rebound."""
import numpy as np

import ember
from ember import dynamo

from ._util import CountingBackend, assert_same


def _rand(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


class _Decoder(ember.nn.Module):
    def __init__(self, v=7, d=8):
        super().__init__()
        self.emb = ember.nn.Embedding(v, d)
        self.lin = ember.nn.Linear(d, v)

    def forward(self, x):
        return self.lin(self.emb(x).cumsum(1))


def _greedy(model, x, eos, max_len=12):
    outs, scores = [], []
    for step in range(max_len):
        logits = model(x)[:, -1]
        nxt = logits.argmax(-1)
        outs.append(nxt)
        scores.append((logits.max(-1).values, step))
        if (nxt == eos).all():
            break
        x = ember.cat([x, nxt[:, None]], 1)
    return ember.stack(outs, 1), sum(s for s, _ in scores), len(scores)


def test_greedy_decoding_does_not_recompile_per_step():
    """12 steps, each a graph break at the EOS test: the resume function compiles a bounded
    number of times (static, dynamic sequence length, loop exhausted), not once per step (it
    used to guard ``len(outs)`` and hit the recompile limit). Results equal eager, EOS or not."""
    ember.manual_seed(0)
    model = _Decoder()
    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(_greedy, backend=cnt)
    rng = np.random.default_rng(1)
    stops = set()
    for i in range(6):
        x = ember.tensor(rng.integers(0, 7, (1, 2 + i % 3)))
        eos = 3
        want, got = _greedy(model, x, eos), cf(model, x, eos)
        assert_same(want[0], got[0])
        np.testing.assert_allclose(got[1].detach().numpy(), want[1].detach().numpy(), rtol=1e-6)
        assert want[2] == got[2]
        stops.add(want[2])
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons
    assert not any("recompile limit" in str(r) for r in dynamo.fallback_reasons), dynamo.fallback_reasons
    assert dynamo.counters["recompiles"] <= 6, dynamo.counters["recompiles"]


def _append_across_break(lst, x):
    lst.append(x * 2)
    lst.extend([x + 1, x - 1])
    dynamo.graph_break()
    lst.append(x * 3)
    return x + 1


def test_list_only_appended_to_is_not_guarded_on_its_length():
    """Lists of 0, 2 and 5 tensors: one entry each for the frame and its resume function; the
    appended items land in the caller's list in order."""
    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(_append_across_break, backend=cnt)
    for n in (0, 2, 5):
        x = _rand(3, seed=n)
        l1 = [_rand(1, seed=10 + k) for k in range(n)]
        l2 = list(l1)
        assert_same(_append_across_break(l1, x), cf(l2, x))
        assert len(l2) == n + 4
        assert_same(l1, l2)
    assert dynamo.counters["recompiles"] == 0
    assert cnt.frame_count == 2


def _append_then_read(lst, x):
    lst.append(x)
    return ember.stack(lst).sum(0) * len(lst)


def test_list_read_after_append_is_guarded():
    """``len``/``stack`` after an append read the list: guarded, so each length gets its own
    entry and the right answer."""
    dynamo.reset()
    cf = ember.compile(_append_then_read, backend=CountingBackend())
    for n in (0, 2, 3, 2):
        x = _rand(3, seed=n)
        l1 = [_rand(3, seed=20 + k) for k in range(n)]
        l2 = list(l1)
        assert_same(_append_then_read(l1, x), cf(l2, x))
        assert_same(l1, l2)


class _Box:
    pass


def _rebind(b, x):
    old = b.cache
    old.append(x * 2)
    b.cache = [x]
    return x + 1


def test_replayed_append_goes_to_the_list_seen_at_entry():
    """The attribute holding the list is rebound after the append: the append replayed after
    the graph must go to the old list (it used to go to the new one, silently)."""
    dynamo.reset()
    cf = ember.compile(_rebind, backend=CountingBackend())
    for n in (0, 3):
        x = _rand(4, seed=n)
        b1, b2 = _Box(), _Box()
        b1.cache = [_rand(1, seed=k) for k in range(n)]
        b2.cache = list(b1.cache)
        old1, old2 = b1.cache, b2.cache
        assert_same(_rebind(b1, x), cf(b2, x))
        assert_same(old1, old2)
        assert_same(b1.cache, b2.cache)

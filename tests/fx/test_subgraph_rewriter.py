"""ember.fx.subgraph_rewriter against torch.fx.subgraph_rewriter.

Each case builds the same module, pattern and replacement twice -- once on
ember, once on torch -- rewrites both, and compares what came out: the
matches (anchor and mapped node names), the rewritten graphs (node names,
ops, short targets and argument wiring, which is what ``gm.code`` prints) and
the values both modules compute on the same random inputs.
"""

import operator

import numpy as np
import pytest

import ember
import ember.fx as efx
from ember.fx import subgraph_rewriter as esr
from ember.fx.passes.utils.matcher_utils import InternalMatch, SubgraphMatcher


# -- helpers -------------------------------------------------------------------
def _torch():
    return pytest.importorskip("torch")


def _short(target):
    if isinstance(target, str):
        return target
    return getattr(target, "__name__", repr(target))


def _arg_sig(a):
    if isinstance(a, (list, tuple)):
        return tuple(_arg_sig(x) for x in a)
    if isinstance(a, dict):
        return tuple((k, _arg_sig(v)) for k, v in a.items())
    name = getattr(a, "name", None)
    if name is not None and hasattr(a, "op"):
        return "%" + name
    return a


def graph_sig(gm):
    """One entry per node: name, op (calls folded together: torch records
    ``torch.max(t)`` as a function where ember records ``t.max()``), short
    target, argument wiring."""
    out = []
    for n in gm.graph.nodes:
        op = "call" if n.op in ("call_function", "call_method") else n.op
        out.append((n.name, op, _short(n.target), _arg_sig(n.args), _arg_sig(n.kwargs)))
    return out


def match_sig(matches):
    return [
        (m.anchor.name, sorted((p.name, getattr(g, "name", g)) for p, g in m.nodes_map.items()))
        for m in matches
    ]


def inputs(n, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) + 0.5 for _ in range(n)]


def run_both(egm, tgm, arrays):
    torch = _torch()
    e = egm(*[ember.tensor(a) for a in arrays])
    t = tgm(*[torch.tensor(a) for a in arrays])
    if isinstance(e, (tuple, list)):
        for x, y in zip(e, t):
            np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


def rewrite_both(build, nin, rewrite=None, **kw):
    """``build(lib, nn)`` -> (module_or_fn, pattern, replacement)."""
    torch = _torch()
    import torch.fx as tfx

    em, ep, er = build(ember, ember.nn)
    tm, tp, tr = build(torch, torch.nn)
    egm, tgm = efx.symbolic_trace(em), tfx.symbolic_trace(tm)
    arrays = inputs(nin)
    run_both(egm, tgm, arrays)  # before
    if rewrite is None:
        em_res = esr.replace_pattern(egm, ep, er)
        tm_res = tfx.subgraph_rewriter.replace_pattern(tgm, tp, tr)
    else:
        em_res = rewrite(esr, egm, ep, er, ember)
        tm_res = rewrite(tfx.subgraph_rewriter, tgm, tp, tr, torch)
    assert match_sig(em_res) == match_sig(tm_res)
    assert graph_sig(egm) == graph_sig(tgm)
    egm.graph.lint()
    run_both(egm, tgm, arrays)  # after
    return egm, tgm, em_res, tm_res


# -- torch's docstring examples ------------------------------------------------------
def test_docstring_cat_to_stack():
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x, w1, w2):
                m1 = lib.cat([w1, w2]).sum()
                m2 = lib.cat([w1, w2]).sum()
                return x + lib.max(m1) + lib.max(m2)

        def pattern(w1, w2):
            return lib.cat([w1, w2])

        def replacement(w1, w2):
            return lib.stack([w1, w2])

        return M(), pattern, replacement

    egm, tgm, res, _ = rewrite_both(build, 3)
    assert len(res) == 2 and all(isinstance(m, esr.Match) for m in res)
    assert "stack = ember.stack([w1, w2])" in egm.code
    assert "stack_1 = ember.stack([w1, w2]);  w1 = w2 = None" in egm.code
    assert "cat" not in egm.code
    # where the text can be compared (everything but the spelling of the
    # two functions), it is torch's
    norm = tgm.code.replace("torch.stack", "ember.stack").replace("torch.max(sum_1)", "sum_1.max()")
    norm = norm.replace("torch.max(sum_2)", "sum_2.max()")
    assert egm.code == norm


def test_docstring_replacement_with_unused_parameter():
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, a, b):
                c = lib.neg(a) + lib.relu(b)
                return c * 2

        def pattern(x, y):
            return lib.neg(x) + lib.relu(y)

        def replacement(x, y):
            return lib.relu(x)

        return M(), pattern, replacement

    egm, _, _, _ = rewrite_both(build, 2)
    assert "neg" not in egm.code


# -- our own cases -------------------------------------------------------------------------
def test_pattern_in_loop_body_matches_every_iteration():
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x, y):
                for _ in range(3):
                    x = lib.sigmoid(x) * y
                    x = x + 1
                return x

        def pattern(a, b):
            return lib.sigmoid(a) * b

        def replacement(a, b):
            return lib.tanh(a) - b

        return M(), pattern, replacement

    egm, _, res, _ = rewrite_both(build, 2)
    assert len(res) == 3
    assert egm.code.count("ember.tanh") + egm.code.count("ember_tanh") == 3


def test_overlapping_candidates_first_wins():
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x):
                return lib.relu(lib.relu(lib.relu(lib.relu(lib.relu(x)))))

        def pattern(a):
            return lib.relu(lib.relu(a))

        def replacement(a):
            return lib.sigmoid(a)

        return M(), pattern, replacement

    _, _, res, _ = rewrite_both(build, 1)
    assert len(res) == 2  # (relu, relu_1), (relu_2, relu_3); relu_4 is left


def test_no_match_leaves_graph_alone():
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x, y):
                return lib.relu(x) * y

        def pattern(a):
            return lib.sigmoid(a)

        def replacement(a):
            return lib.tanh(a)

        return M(), pattern, replacement

    em, ep, er = build(ember, ember.nn)
    egm = efx.symbolic_trace(em)
    before = egm.code
    assert esr.replace_pattern(egm, ep, er) == []
    assert egm.code == before
    rewrite_both(build, 2)


def test_match_must_be_self_contained():
    # the inner relu is also read outside the pattern: removing it would break
    # the graph, so the match is rejected
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x):
                r = lib.relu(x)
                return lib.sigmoid(r) + r

        def pattern(a):
            return lib.sigmoid(lib.relu(a))

        def replacement(a):
            return lib.tanh(a)

        return M(), pattern, replacement

    _, _, res, _ = rewrite_both(build, 1)
    assert res == []


def test_pattern_with_several_outputs():
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x, y):
                s = x + y
                p = x * y
                return lib.relu(s) - lib.sigmoid(p)

        def pattern(a, b):
            return a + b, a * b

        def replacement(a, b):
            return a - b, a / b

        return M(), pattern, replacement

    egm, _, res, _ = rewrite_both(build, 2)
    assert len(res) == 1
    assert len(res[0].anchor.graph.nodes) > 0


def test_literals_must_be_equal_unless_ignored():
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x):
                return (x + 1) * (x + 2)

        def pattern(a):
            return a + 1

        def replacement(a):
            return a - 1

        return M(), pattern, replacement

    _, _, res, _ = rewrite_both(build, 1)
    assert len(res) == 1

    def with_filters(mod, gm, p, r, lib):
        return mod.replace_pattern_with_filters(gm, p, r, ignore_literals=True)

    _, _, res, _ = rewrite_both(build, 1, rewrite=with_filters)
    assert len(res) == 2 and all(isinstance(m, esr.ReplacedPatterns) for m in res)


def test_placeholder_binds_a_literal():
    # a pattern parameter used as an operand matches a literal in the graph
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x):
                return lib.mul(x, 3.0) + x

        def pattern(a, b):
            return lib.mul(a, b)

        def replacement(a, b):
            return lib.div(a, b)

        return M(), pattern, replacement

    egm, _, res, _ = rewrite_both(build, 1)
    assert len(res) == 1


def test_match_filters():
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x, y):
                a = lib.relu(x + y)
                b = lib.relu(x + a)
                return a, b

        def pattern(p, q):
            return lib.relu(p + q)

        def replacement(p, q):
            return lib.sigmoid(p - q)

        return M(), pattern, replacement

    def second_input_not_placeholder(match, original_graph, pattern_graph):
        return match.placeholder_nodes[1].op != "placeholder"

    def with_filters(mod, gm, p, r, lib):
        return mod.replace_pattern_with_filters(gm, p, r, match_filters=[second_input_not_placeholder])

    egm, _, res, _ = rewrite_both(build, 2, rewrite=with_filters)
    assert len(res) == 1
    assert [n.name for n in res[0].replacements] == ["sub", "sigmoid"]


def test_chained_matches_read_previous_replacement():
    # the second match's input is the first match's output: after the first
    # rewrite it must read the replacement node
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x):
                y = lib.neg(lib.relu(x))
                return lib.neg(lib.relu(y))

        def pattern(a):
            return lib.neg(lib.relu(a))

        def replacement(a):
            return lib.sigmoid(a) * 2

        return M(), pattern, replacement

    _, _, res, _ = rewrite_both(build, 1)
    assert len(res) == 2


def test_call_module_and_attributes_copied_from_replacement_module():
    def build(lib, nn):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(4, 4)

            def forward(self, x):
                return lib.relu(self.linear(x)) + 1

        class Pattern(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(4, 4)

            def forward(self, x):
                return lib.relu(self.linear(x))

        class Replacement(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(4, 4)
                self.act = nn.Sigmoid()

            def forward(self, x):
                return self.act(self.linear(x))

        return M(), Pattern(), Replacement()

    torch = _torch()
    import torch.fx as tfx

    em, ep, er = build(ember, ember.nn)
    tm, tp, tr = build(torch, torch.nn)
    egm, tgm = efx.symbolic_trace(em), tfx.symbolic_trace(tm)
    res_e = esr.replace_pattern(egm, ep, er)
    res_t = tfx.subgraph_rewriter.replace_pattern(tgm, tp, tr)
    assert len(res_e) == 1 and match_sig(res_e) == match_sig(res_t)
    assert graph_sig(egm) == graph_sig(tgm)
    assert isinstance(egm.act, ember.nn.Sigmoid) and egm.act is not er.act  # deep-copied
    assert egm.linear is em.linear  # gm's own submodule wins over the replacement's
    x = inputs(1, (2, 4))[0]
    want = 1 / (1 + np.exp(-(x @ em.linear.weight.detach().numpy().T + em.linear.bias.detach().numpy()))) + 1
    np.testing.assert_allclose(egm(ember.tensor(x)).detach().numpy(), want, rtol=1e-5)


def test_get_attr_pattern_matches_any_tensor():
    def build(lib, nn):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(lib.ones(3, 4))

            def forward(self, x):
                return lib.relu(x + self.w)

        class Pattern(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(lib.zeros(3, 4))

            def forward(self, x):
                return x + self.w

        def replacement(x):
            return x * 2

        return M(), Pattern(), replacement

    egm, _, res, _ = rewrite_both(build, 1)
    assert len(res) == 1


def test_pattern_and_replacement_as_graph_modules_and_callback():
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x, y):
                return lib.relu(x) + lib.relu(y)

        return M(), None, None

    em, _, _ = build(ember, ember.nn)
    egm = efx.symbolic_trace(em)

    def pattern(a):
        return ember.relu(a)

    def repl(a):
        return ember.sigmoid(a)

    pgm, rgm = efx.symbolic_trace(pattern), efx.symbolic_trace(repl)
    seen = []

    def callback(match, original_graph, pattern_graph):
        assert isinstance(match, InternalMatch)
        assert original_graph is egm.graph and pattern_graph is pgm.graph
        seen.append(match.placeholder_nodes[0].name)
        return rgm.graph

    res = esr.replace_pattern_with_filters(egm, pgm, None, replacement_callback=callback)
    assert seen == ["x", "y"]
    assert [[n.name for n in r.replacements] for r in res] == [["sigmoid"], ["sigmoid_1"]]
    x, y = inputs(2)
    sig = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
    np.testing.assert_allclose(egm(ember.tensor(x), ember.tensor(y)).numpy(), sig(x) + sig(y), rtol=1e-5)

    egm2 = efx.symbolic_trace(em)
    assert len(esr.replace_pattern(egm2, pgm, rgm)) == 2
    assert efx.replace_pattern is esr.replace_pattern


def test_missing_replacement_and_mismatched_placeholders_raise():
    def f(x, y):
        return ember.relu(x) + y

    with pytest.raises(AssertionError, match="replacement GraphModule or a replacement callback"):
        esr.replace_pattern_with_filters(efx.symbolic_trace(f), lambda a: ember.relu(a), None)

    def pattern(a):
        return ember.relu(a)

    def two(a, b):
        return ember.sigmoid(a) + b

    with pytest.raises(AssertionError, match="Placeholder count mismatch"):
        esr.replace_pattern(efx.symbolic_trace(f), pattern, two)


def test_matcher_rejects_dead_code_and_empty_pattern():
    def dead(a):
        ember.relu(a)
        return ember.sigmoid(a)

    with pytest.raises(AssertionError, match="dead code"):
        SubgraphMatcher(efx.symbolic_trace(dead).graph)
    with pytest.raises(ValueError, match="empty pattern"):
        SubgraphMatcher(efx.Graph())


def test_matcher_direct_use_and_match_output():
    def f(x, y):
        a = ember.relu(x)
        return ember.relu(a + y)

    def pattern(p):
        return ember.relu(p)

    g = efx.symbolic_trace(f).graph
    pg = efx.symbolic_trace(pattern).graph
    ms = SubgraphMatcher(pg).match(g)
    assert [[n.name for n in m.returning_nodes] for m in ms] == [["relu"], ["relu_1"]]
    assert [[n.name for n in m.placeholder_nodes] for m in ms] == [["x"], ["add"]]
    # with match_output the pattern's return must be the graph's return
    ms = SubgraphMatcher(pg, match_output=True).match(g)
    assert [[n.name for n in m.returning_nodes] for m in ms] == [["relu_1"]]
    # match_placeholder: pattern placeholders only match graph placeholders
    ms = SubgraphMatcher(pg, match_placeholder=True).match(g)
    assert [[n.name for n in m.placeholder_nodes] for m in ms] == [["x"]]


def test_matcher_agrees_with_torch_on_random_chains():
    """Random chains of unary/binary ops, a fixed two-op pattern: the same
    matches (by node name) as torch's matcher."""
    torch = _torch()
    import torch.fx as tfx
    from torch.fx.passes.utils.matcher_utils import SubgraphMatcher as TMatcher

    rng = np.random.default_rng(1)
    for _ in range(25):
        ops = rng.integers(0, 3, size=8).tolist()
        reuse = rng.integers(0, 2, size=8).tolist()

        def make(lib):
            def f(x, y):
                vals = [x, y]
                for op, r in zip(ops, reuse):
                    a = vals[-1]
                    b = vals[-2] if r else vals[0]
                    if op == 0:
                        vals.append(lib.relu(a))
                    elif op == 1:
                        vals.append(a + b)
                    else:
                        vals.append(lib.neg(a))
                return vals[-1]

            def pattern(p, q):
                return lib.relu(p + q)

            return f, pattern

        ef, ep = make(ember)
        tf, tp = make(torch)
        eg, tg = efx.symbolic_trace(ef).graph, tfx.symbolic_trace(tf).graph
        em = SubgraphMatcher(efx.symbolic_trace(ep).graph).match(eg)
        tm = TMatcher(tfx.symbolic_trace(tp).graph).match(tg)
        esig = [sorted((p.name, g.name) for p, g in m.nodes_map.items()) for m in em]
        tsig = [sorted((p.name, g.name) for p, g in m.nodes_map.items()) for m in tm]
        assert esig == tsig


def test_identity_replacement_and_pattern_feeding_the_output():
    # the replacement returns its input; one match feeds the graph's output
    def build(lib, nn):
        class M(nn.Module):
            def forward(self, x, y):
                a = lib.neg(lib.neg(x))
                return a + y, lib.neg(lib.neg(y))

        def pattern(v):
            return lib.neg(lib.neg(v))

        def replacement(v):
            return v

        return M(), pattern, replacement

    egm, tgm, res, _ = rewrite_both(build, 2)
    assert len(res) == 2
    assert egm.code == tgm.code

    em, ep, er = build(ember, ember.nn)
    res = esr.replace_pattern_with_filters(efx.symbolic_trace(em), ep, er)
    assert [r.replacements for r in res] == [[], []]  # nothing inserted

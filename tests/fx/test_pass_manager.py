"""ember.fx.passes.infra (PassBase, PassResult, PassManager, constraints) and
ember.fx.experimental.optimization against torch's."""

import importlib
import operator

import pytest

import ember
from ember.fx.passes.infra.pass_base import PassBase, PassResult
from ember.fx.passes.infra.pass_manager import PassManager, pass_result_wrapper, this_before_that_pass_constraint

from ._torch_pairs import close, code, pair, to_ember

torch = pytest.importorskip("torch")


def _pm(T):
    return importlib.import_module(f"{T.__name__}.fx.passes.infra.pass_manager")


def _pb(T):
    return importlib.import_module(f"{T.__name__}.fx.passes.infra.pass_base")


def _chain(T):
    class M(T.nn.Module):
        def forward(self, x):
            return ((x + 1) + 2) * 3 - 4

    return M()


def _passes(T, log):
    PassResult_ = _pb(T).PassResult

    def add_to_mul(gm):
        log.append("add_to_mul")
        changed = False
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target is operator.add:
                n.target = operator.mul
                changed = True
        return PassResult_(gm, changed)

    def sub_to_add(gm):
        log.append("sub_to_add")
        changed = False
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target is operator.sub:
                n.target = operator.add
                changed = True
        return PassResult_(gm, changed)

    return add_to_mul, sub_to_add


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_pass_manager_runs_like_torch(steps):
    outs = []
    for T in (torch, ember):
        log = []
        a, b = _passes(T, log)
        pm = _pm(T).PassManager(passes=[a, b], steps=steps)
        gm = T.fx.symbolic_trace(_chain(T))
        res = pm(gm)
        outs.append((log, res.modified, code(res.graph_module), res.graph_module(T.tensor([1.0, 2.0])).tolist()))
    assert outs[1] == outs[0]


def test_constraints_solved_like_torch():
    outs = []
    for T in (torch, ember):
        pmod = _pm(T)
        log = []
        a, b = _passes(T, log)

        def c(gm):
            log.append("c")
            return _pb(T).PassResult(gm, False)

        pm = pmod.PassManager(passes=[a, b, c])
        pm.add_constraint(pmod.this_before_that_pass_constraint(c, a))
        pm.add_constraint(pmod.this_before_that_pass_constraint(b, a))
        with pytest.raises(RuntimeError, match="pass schedule constraint violated"):
            pm.validate_constraints()
        pm.solve_constraints()
        order = [p.__name__ for p in pm.passes]
        pm.validate_constraints()
        bad = pmod.PassManager(passes=[a, b], constraints=[pmod.this_before_that_pass_constraint(a, b),
                                                           pmod.this_before_that_pass_constraint(b, a)])
        with pytest.raises(RuntimeError, match="Circular dependency detected") as ei:
            bad.solve_constraints()
        outs.append((order, str(ei.value).count("<function")))
    assert outs[1] == outs[0]


def test_pass_errors_and_wrapper():
    gm = ember.fx.symbolic_trace(_chain(ember))

    def returns_none(m):
        return None

    def returns_int(m):
        return 3

    pm = PassManager([pass_result_wrapper(returns_none)])
    assert pm(gm).modified is True
    pm = PassManager([returns_int])
    with pytest.raises(Exception, match=r"An error occurred when running the 'returns_int' pass after the following passes: \[\]") as ei:
        pm(gm)
    assert isinstance(ei.value.__cause__, TypeError)
    assert "pass_result_wrapper" in str(ei.value.__cause__)
    assert pass_result_wrapper(None) is None
    checks = []
    pm = PassManager([pass_result_wrapper(returns_none)], run_checks_after_each_pass=True)
    pm.add_checks(lambda m: checks.append(type(m).__name__))
    pm(gm)
    assert checks == ["M", "M"]  # before the passes, and after the one pass
    with pytest.raises(TypeError, match="only take in one variable"):
        pm.add_checks(lambda a, b: None)


def test_pass_base_hooks_in_order():
    calls = []

    class P(PassBase):
        def requires(self, gm):
            calls.append("requires")

        def call(self, gm):
            calls.append("call")
            return PassResult(gm, False)

        def ensures(self, gm):
            calls.append("ensures")

    gm = ember.fx.symbolic_trace(_chain(ember))
    res = PassManager([P()])(gm)
    assert calls == ["requires", "call", "ensures"]
    assert res == (gm, False) and res.graph_module is gm and not res.modified
    with pytest.raises(TypeError):
        PassBase()
    c = this_before_that_pass_constraint(1, 2)
    assert c(1, 2) and not c(2, 1)


def _bn_model(T):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = T.nn.Conv2d(3, 4, 3)
            self.bn = T.nn.BatchNorm2d(4)
            self.d = T.nn.Dropout(0.5)
            self.l = T.nn.Linear(5, 6)
            self.bn1 = T.nn.BatchNorm1d(6)
            self.l2 = T.nn.Linear(5, 6)
            self.bn2 = T.nn.BatchNorm1d(6)

        def forward(self, x, y):
            z = self.l2(y)
            return self.d(self.bn(self.c(x))), self.bn1(self.l(y)), self.bn2(z) + z

    return M()


def test_fuse_and_remove_dropout_match_torch():
    tm, em = pair(_bn_model)
    for m in (tm, em):
        m.bn.running_mean.copy_(m.bn.running_mean + 0.3)
        m.bn.running_var.copy_(m.bn.running_var * 1.7)
        m.eval()
    x, y = torch.randn(2, 3, 6, 6), torch.randn(2, 5)
    ex, ey = to_ember(x), to_ember(y)
    results = []
    for T, m, args in ((torch, tm, (x, y)), (ember, em, (ex, ey))):
        opt = importlib.import_module(f"{T.__name__}.fx.experimental.optimization")
        fused = opt.fuse(m)
        nodrop = opt.remove_dropout(m)
        results.append((code(fused), code(nodrop), fused(*args), nodrop(*args), m(*args)))
    (tf, tn, tfv, tnv, tref), (ef, en, efv, env, eref) = results
    assert ef == tf and en == tn
    close(tfv, efv, rtol=1e-4, atol=1e-5)
    close(eref, efv, rtol=1e-4, atol=1e-5)
    close(tnv, env, rtol=1e-4, atol=1e-5)
    assert isinstance(em.bn, ember.nn.BatchNorm2d)  # not inplace: the original is kept


def _fetch_model(T):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = T.nn.Conv2d(3, 4, 3, stride=2, padding=1)
            self.r = T.nn.ReLU()
            self.p = T.nn.MaxPool2d(2)
            self.l = T.nn.Linear(4, 2)

        def forward(self, x):
            return self.l(self.p(self.r(self.c(x))).mean((2, 3)))

    return M()


def test_param_fetch_like_torch():
    outs = []
    for T, m in zip((torch, ember), pair(_fetch_model)):
        pf = importlib.import_module(f"{T.__name__}.fx.passes.param_fetch")
        gm = T.fx.symbolic_trace(m)
        pf.lift_lowering_attrs_to_nodes(gm)
        rows = []
        for n in gm.graph.nodes:
            if n.op == "call_module":
                attrs = n.attrs_for_lowering
                rows.append({k: (v.shape if hasattr(v, "shape") else v) for k, v in attrs.items()})
                rows[-1]["name"] = rows[-1]["name"].replace("torch.", "ember.")
                rows[-1] = {k: tuple(v) if k in ("weight", "bias") else v for k, v in rows[-1].items()}
        outs.append(rows)
        with pytest.raises(RuntimeError, match="is not in the module_fetch_book"):
            pf.extract_attrs_for_lowering(T.nn.Tanh())
    assert outs[1] == outs[0]

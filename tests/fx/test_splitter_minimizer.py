"""fx.passes.splitter_base (acc/cpu splitting) and fx.passes.net_min_base
(the accuracy minimizer), checked against torch where it is installed."""

import contextlib
import copy
import io
import operator

import pytest

import ember
from ember.fx.passes import net_min_base as e_nmb
from ember.fx.passes import operator_support as e_os
from ember.fx.passes import splitter_base as e_sb
from ember.fx.passes.split_utils import move_non_tensor_nodes_on_boundary
from ember.fx.passes.tools_common import FxNetAccFusionsFinder


def _torch():
    return pytest.importorskip("torch")


def _libs(lib):
    """(module, splitter_base, operator_support, net_min_base) of ``lib``."""
    if lib is ember:
        return lib, e_sb, e_os, e_nmb
    from torch.fx.passes import net_min_base, operator_support, splitter_base
    return lib, splitter_base, operator_support, net_min_base


def _model(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = lib.nn.Linear(4, 4)

        def forward(self, a):
            b = lib.sin(a)
            c = lib.cos(a)
            d = b + c
            e = self.l(d)
            f = lib.relu(e)
            g = lib.tanh(f) * 2
            return g, lib.exp(g)

    return M()


def _acc_support(lib, osup):
    acc = (lib.sin, lib.cos, lib.relu, lib.tanh)
    return osup.create_op_support(lambda sm, n: n.op == "call_function" and n.target in acc)


def _quiet(fn, *a, **k):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        r = fn(*a, **k)
    return r, out.getvalue()


def _summary(split_module):
    """{child name: [node target names]} of a split module, plus the top-level call order."""
    out = {}
    for name, child in split_module.named_children():
        out[name] = [n.target if isinstance(n.target, str) else n.target.__name__
                     for n in child.graph.nodes if n.op not in ("placeholder", "output")]
    order = [n.target for n in split_module.graph.nodes if n.op == "call_module"]
    return out, order


def _split(lib, settings_kw=None, x=None):
    lib, sb, osup, _ = _libs(lib)
    gm = lib.fx.symbolic_trace(_model(lib))
    splitter = sb._SplitterBase(gm, (x,), _acc_support(lib, osup), sb._SplitterSettingBase(**(settings_kw or {})))
    res, _ = _quiet(splitter.generate_split_results)
    return gm, splitter, res


def test_split_into_acc_and_cpu_submodules_as_torch():
    torch = _torch()
    xe = ember.randn(3, 4)
    gm, splitter, res = _split(ember, x=xe)
    _, _, tres = _split(torch, x=torch.tensor(xe.numpy()))
    assert _summary(res.split_module) == _summary(tres.split_module)
    assert _summary(res.split_module)[1] == ["_run_on_acc_0", "_run_on_cpu_1", "_run_on_acc_2", "_run_on_cpu_3"]
    assert res.non_acc_submodule_prefix == "_run_on_cpu_"
    # the split module computes what the traced one does
    out, ref = res.split_module(xe), gm(xe)
    for a, b in zip(out, ref):
        assert float((a - b).abs().max()) == 0.0
    # each submodule's recorded inputs are what it gets in a run
    assert sorted(res.submodule_inputs) == sorted(_summary(res.split_module)[0])
    sin_cos = res.split_module._run_on_acc_0(*res.submodule_inputs["_run_on_acc_0"])
    assert float((sin_cos[0] - xe.sin()).abs().max()) == 0.0
    assert splitter.get_node_submodule_map()["relu"] == "_run_on_acc_2"


def test_min_acc_module_size_merges_small_acc_pieces_as_torch():
    torch = _torch()
    xe = ember.randn(2, 4)
    _, _, res = _split(ember, {"min_acc_module_size": 3}, x=xe)
    _, _, tres = _split(torch, {"min_acc_module_size": 3}, x=torch.tensor(xe.numpy()))
    assert _summary(res.split_module) == _summary(tres.split_module)
    # sin/cos (2 nodes) and relu/tanh (2 nodes) are too small: everything runs on the cpu
    assert _summary(res.split_module)[1] == ["_run_on_cpu_0"]


def test_max_acc_splits_is_enforced():
    lib, sb, osup, _ = _libs(ember)
    gm = ember.fx.symbolic_trace(_model(ember))
    splitter = sb._SplitterBase(gm, (ember.randn(2, 4),), _acc_support(ember, osup),
                                sb._SplitterSettingBase(max_acc_splits=2))
    with pytest.raises(ValueError, match="max_acc_splits"):
        _quiet(splitter.generate_split_results)


def _sizes_model(lib):
    class S(lib.nn.Module):
        def forward(self, x):
            n = x.size(0)          # a non-tensor value
            y = lib.relu(x)
            z = y.reshape(n, -1)   # reads it
            return lib.sigmoid(z) + n

    return S()


def _acc_names(lib, allow_non_tensor, supported):
    lib, sb, osup, _ = _libs(lib)
    gm = lib.fx.symbolic_trace(_sizes_model(lib))
    x = lib.ones(3, 4)
    lib.fx.passes.shape_prop.ShapeProp(gm).propagate(x)
    sup = osup.create_op_support(lambda sm, n: n.name in supported)
    finder = sb.FxNetAccNodesFinder(gm, sup, allow_non_tensor)
    return sorted(n.name for n in finder()), gm


@pytest.mark.parametrize("allow_non_tensor", [False, True])
@pytest.mark.parametrize("supported", [("size", "relu", "reshape"), ("relu", "reshape", "sigmoid"),
                                       ("size", "relu", "reshape", "sigmoid", "add")])
def test_acc_nodes_finder_non_tensor_rules_as_torch(allow_non_tensor, supported):
    torch = _torch()
    import torch.fx.passes.shape_prop  # noqa: F401  (torch.fx.passes.shape_prop as an attribute)
    ours, _ = _acc_names(ember, allow_non_tensor, supported)
    theirs, _ = _acc_names(torch, allow_non_tensor, supported)
    assert ours == theirs


def test_acc_nodes_finder_drops_non_tensor_producer_read_by_cpu():
    names, _ = _acc_names(ember, False, ("size", "relu", "reshape"))
    # `size` makes an int read by the cpu node `add`: it and its acc readers go to the cpu
    assert "size" not in names and "reshape" not in names and "relu" in names
    names, _ = _acc_names(ember, True, ("size", "relu", "reshape"))
    assert names == ["relu", "reshape", "size"]


def _fusion_groups(lib):
    gm = lib.fx.symbolic_trace(_sizes_model(lib))
    lib.fx.passes.shape_prop.ShapeProp(gm).propagate(lib.ones(3, 4))
    if lib is ember:
        finder_cls = FxNetAccFusionsFinder
    else:
        from torch.fx.passes.tools_common import FxNetAccFusionsFinder as finder_cls
    acc = {n for n in gm.graph.nodes if n.op in ("call_function", "call_method")}
    groups = finder_cls(gm, acc)()
    return sorted({tuple(sorted(n.name for n in g)) for g in groups.values()}), sorted(n.name for n in acc)


def test_fusion_groups_keep_non_tensor_producers_with_readers_as_torch():
    torch = _torch()
    import torch.fx.passes.shape_prop  # noqa: F401
    ours = _fusion_groups(ember)
    assert ours == _fusion_groups(torch)
    assert ours[0] == [("add", "reshape", "sigmoid", "size")]


def test_move_non_tensor_nodes_on_boundary():
    gm = ember.fx.symbolic_trace(_sizes_model(ember))
    ember.fx.passes.shape_prop.ShapeProp(gm).propagate(ember.ones(3, 4))
    nodes = {n.name: n for n in gm.graph.nodes}
    subgraphs = [e_sb.Subgraph(True, [nodes["size"], nodes["relu"]]),
                 e_sb.Subgraph(False, [nodes["reshape"], nodes["sigmoid"], nodes["add"]])]
    _quiet(move_non_tensor_nodes_on_boundary, subgraphs)
    # the int `size` left the acc subgraph for the one reading it
    assert [n.name for n in subgraphs[0].nodes] == ["relu"]
    assert [n.name for n in subgraphs[1].nodes][-1] == "size"


def test_previews_report_support_and_split():
    lib, sb, osup, _ = _libs(ember)
    gm = ember.fx.symbolic_trace(_model(ember))
    splitter = sb._SplitterBase(gm, (ember.randn(3, 4),), _acc_support(ember, osup), sb._SplitterSettingBase())
    report, printed = _quiet(splitter.node_support_preview)
    assert report in printed
    supported, unsupported = report.split("Unsupported node types in the model:")
    assert "ember.sin: ((ember.float32,), {})" in supported
    assert "_operator.add: ((ember.float32, ember.float32), {})" in unsupported
    assert "ember.nn.modules.linear.Linear: ((ember.float32,), {})" in unsupported
    report, _ = _quiet(splitter.split_preview)
    assert "total 4 subgraphs are created: 2 acc subgraphs and 2 cpu subgraphs" in report
    # sin/cos of a (3, 4) float32 input: 48 bytes in, 2 x 48 out
    assert "Total input size in bytes is 48, total output size in bytes is 96" in report
    assert report.count("Lowering and running succeed!") == 2
    assert not any(hasattr(n, "tag") for n in gm.graph.nodes)


def test_generate_inputs_for_submodules_deepcopy():
    m = ember.nn.Sequential(ember.nn.Linear(3, 3), ember.nn.ReLU())
    x = ember.randn(2, 3)
    got = e_sb.generate_inputs_for_submodules(m, [x], ["1"], deepcopy=True)
    assert list(got) == ["1"]
    assert float((got["1"][0] - m[0](x)).abs().max()) < 1e-6
    assert got["1"][0] is not m[0](x)


# -- the minimizer ------------------------------------------------------------------------


def _minimizer_cls(lib, broken, raise_on=()):
    _, _, _, nmb = _libs(lib)

    class Min(nmb._MinimizerBase):
        def run_a(self, mod, inputs, report_idx=-1):
            return mod(*inputs)

        def run_b(self, mod, inputs, report_idx=-1):
            # a "lowering" that computes `broken` ops wrongly and cannot run `raise_on` ones
            m2 = copy.deepcopy(mod)
            for n in m2.graph.nodes:
                if n.op == "call_function" and n.target in raise_on:
                    raise RuntimeError(f"cannot lower {n.name}")
                if n.op == "call_function" and n.target in broken:
                    n.target = broken[n.target]
            m2.recompile()
            return m2(*inputs)

    return Min


def _compare(a, b, names):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    err = max(float((x - y).detach().abs().max()) for x, y in zip(a, b))
    return err, err < 1e-5


def _minimize(lib, method, x, broken, raise_on=(), find_all=False, **kw):
    _, _, _, nmb = _libs(lib)
    gm = lib.fx.symbolic_trace(_model(lib))
    settings = nmb._MinimizerSettingBase(traverse_method=method, find_all=find_all)
    m = _minimizer_cls(lib, broken, raise_on)(gm, (x,), _compare, settings, **kw.pop("ctor", {}))
    culprits, printed = _quiet(m.minimize, **kw)
    return sorted(n.name for n in culprits), m


@pytest.mark.parametrize("method", ["sequential", "binary", "accumulate", "block"])
def test_minimizer_finds_the_broken_node_as_torch(method):
    torch = _torch()
    xe = ember.randn(3, 4)
    ours, m = _minimize(ember, method, xe, {ember.relu: ember.sigmoid})
    theirs, _ = _minimize(torch, method, torch.tensor(xe.numpy()), {torch.relu: torch.sigmoid})
    assert ours == theirs == ["relu"]
    assert m.reports and m.results


def test_minimizer_find_all_and_run_errors():
    xe = ember.randn(3, 4)
    broken = {ember.relu: ember.sigmoid, ember.exp: ember.sin}
    assert _minimize(ember, "sequential", xe, broken)[0] == ["relu"]
    assert _minimize(ember, "sequential", xe, broken, find_all=True)[0] == ["exp", "relu"]
    # a piece that cannot run is a culprit too
    assert _minimize(ember, "sequential", xe, {}, raise_on=(ember.tanh,))[0] == ["tanh"]
    assert _minimize(ember, "sequential", xe, {})[0] == []


def test_minimizer_skip_defined_start_end_and_exporter():
    xe = ember.randn(3, 4)
    broken = {ember.tanh: ember.sigmoid}
    # skip: the run after the skipped node holds the culprit
    names, _ = _minimize(ember, "skip", xe, broken, skip_nodes=["l"])
    assert names == ["exp", "mul", "relu", "tanh"]
    names, _ = _minimize(ember, "skip", xe, broken, skip_nodes=["relu"])
    assert names == ["exp", "mul", "tanh"]
    with pytest.raises(RuntimeError, match="skip_nodes"):
        _minimize(ember, "skip", xe, broken)
    # start/end bound the search
    assert _minimize(ember, "sequential", xe, broken, start="relu", end="tanh")[0] == ["tanh"]
    assert _minimize(ember, "sequential", xe, broken, start="add", end="relu")[0] == []
    # the exporter gets both inputs of the mismatching piece
    exported = []
    _minimize(ember, "sequential", xe, broken, ctor={"module_exporter": lambda inp, mod, name: exported.append(name)})
    assert exported == ["tanh_cpu", "tanh_acc"]
    with pytest.raises(RuntimeError, match="Unknown traverse method nope"):
        _minimize(ember, "nope", xe, broken)


def test_minimizer_accumulate_error_feeds_b_outputs_forward():
    xe = ember.randn(3, 4)
    _, m = _minimize(ember, "sequential", xe, {ember.sin: ember.cos}, find_all=True)
    # with accumulate_error False both runs read run_a's values: only `sin` itself mismatches
    assert sorted(k[0] for k, v in m.results.items() if v > 1e-5) == ["sin"]
    gm = ember.fx.symbolic_trace(_model(ember))
    settings = e_nmb._MinimizerSettingBase(traverse_method="sequential", find_all=True, accumulate_error=True)
    m = _minimizer_cls(ember, {ember.sin: ember.cos})(gm, (xe,), _compare, settings)
    culprits, _ = _quiet(m.minimize)
    # run_b's wrong sin flows into add, l, ... : every later node mismatches too
    assert {n.name for n in culprits} >= {"sin", "add", "l"}


def test_minimizer_input_count_checked():
    gm = ember.fx.symbolic_trace(_model(ember))
    with pytest.raises(AssertionError, match="Placeholder count"):
        _minimizer_cls(ember, {})(gm, (ember.randn(3, 4), ember.randn(1)), _compare, e_nmb._MinimizerSettingBase())
    with pytest.raises(AssertionError, match="Expected GraphModule"):
        _minimizer_cls(ember, {})(_model(ember), (ember.randn(3, 4),), _compare, e_nmb._MinimizerSettingBase())


def test_minimizer_setting_str_and_run_nodes():
    s = e_nmb._MinimizerSettingBase(traverse_method="binary")
    assert str(s).startswith("FX Minimizer Settings:\n") and "\ttraverse_method: binary\n" in str(s)
    xe = ember.randn(3, 4)
    gm = ember.fx.symbolic_trace(_model(ember))
    m = _minimizer_cls(ember, {ember.relu: ember.sigmoid})(gm, (xe,), _compare, e_nmb._MinimizerSettingBase())
    _, printed = _quiet(m.run_nodes, start="relu", end="mul")
    assert "Result mismatch" in printed
    _, printed = _quiet(m.run_nodes, start="sin", end="add")
    assert "mismatch" not in printed
    assert operator.add  # (operator imported for the graphs' targets)

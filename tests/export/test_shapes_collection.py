"""AdditionalInputs / ShapesCollection as dynamic_shapes=: the inferred specs and the exported
programs' per-dimension ranges as torch's on the same inputs; errors as torch's."""
import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import AdditionalInputs, Dim, ShapesCollection, UserError, export


class SumAdd(nn.Module):
    def forward(self, x, y, n=3):
        return x.sum(1) * n + y[:, 0]


def _torch_model():
    import torch

    class TSumAdd(torch.nn.Module):
        def forward(self, x, y, n=3):
            return x.sum(1) * n + y[:, 0]
    return TSumAdd()


def _spec_str(spec):
    """Specs of both libraries in one form: DYNAMIC/STATIC/None/Dim name."""
    if isinstance(spec, dict):
        return {k: _spec_str(v) for k, v in spec.items()}
    if isinstance(spec, (tuple, list)):
        return [_spec_str(v) for v in spec]
    if spec is None:
        return None
    return getattr(spec, "__name__", None) or str(spec).split(".")[-1].split("(")[-1].rstrip(")")


def _dim_ranges(ep, env_ranges):
    """Per user placeholder: per dim an int, or the (lower, upper) range of its symbol."""
    out = {}
    for n in ep.graph.nodes:
        if n.op == "placeholder" and n.name in ep.graph_signature.user_inputs:
            dims = []
            for d in n.meta["val"].shape:
                if hasattr(d, "node") or hasattr(d, "expr"):
                    sym = getattr(d, "expr", None)
                    if sym is None:
                        sym = d.node.expr
                    r = env_ranges[sym]
                    up = str(r.upper)
                    dims.append((int(r.lower), "oo" if up == "int_oo" or int(up) >= 2 ** 62 else int(up)))
                else:
                    dims.append(int(d))
            out[n.name] = dims
    return out


def _draw(rng, n_extra=2):
    """The example and extra inputs: batch and y's width vary, x's width is fixed."""
    sizes = rng.choice(np.arange(2, 12), size=n_extra + 1, replace=False)
    widths = rng.choice(np.arange(2, 12), size=n_extra + 1, replace=False)
    return [(int(b), 5, int(w)) for b, w in zip(sizes, widths)]


@pytest.mark.parametrize("seed", [0, 1])
def test_additional_inputs_like_torch(seed):
    torch = pytest.importorskip("torch")
    shapes = _draw(np.random.default_rng(seed))
    ex = (ember.randn(shapes[0][0], 5), ember.randn(shapes[0][0], shapes[0][2]))
    ai, tai = AdditionalInputs(), torch.export.AdditionalInputs()
    for b, c, w in shapes[1:]:
        ai.add((ember.randn(b, c), ember.randn(b, w)))
        tai.add((torch.randn(b, c), torch.randn(b, w)))
    tex = (torch.randn(shapes[0][0], 5), torch.randn(shapes[0][0], shapes[0][2]))
    spec = ai.dynamic_shapes(SumAdd(), ex)
    tspec = tai.dynamic_shapes(_torch_model(), tex)
    assert _spec_str(spec) == _spec_str({k: v for k, v in tspec.items() if k != "n"})
    ep = export(SumAdd(), ex, dynamic_shapes=ai)
    tep = torch.export.export(_torch_model(), tex, dynamic_shapes=tai)
    assert _dim_ranges(ep, ep.range_constraints) == _dim_ranges(tep, tep.range_constraints)
    ai.verify(ep)
    m = SumAdd()
    for b, c, w in shapes + [(13, 5, 2)]:
        x, y = ember.randn(b, c), ember.randn(b, w)
        np.testing.assert_allclose(ep.module()(x, y).numpy(), m(x, y).numpy(), rtol=1e-5, atol=1e-5)
    # a program exported without the extra inputs is static: verify names the failing guard
    static = export(SumAdd(), ex)
    with pytest.raises(AssertionError, match="Guard failed"):
        ai.verify(static)


def test_shapes_collection_like_torch():
    torch = pytest.importorskip("torch")
    x, y = ember.randn(4, 5), ember.randn(4, 3)
    tx, ty = torch.randn(4, 5), torch.randn(4, 3)
    sc, tsc = ShapesCollection(), torch.export.ShapesCollection()
    b, tb = Dim("b", min=2, max=32), torch.export.Dim("b", min=2, max=32)
    sc[x] = {0: b}
    sc[y] = (b, Dim.STATIC)
    tsc[tx] = {0: tb}
    tsc[ty] = (tb, torch.export.Dim.STATIC)
    assert x in sc and ember.randn(1) not in sc and len(sc) == 2
    assert _spec_str(sc.dynamic_shapes(SumAdd(), (x, y))) == _spec_str(tsc.dynamic_shapes(_torch_model(), (tx, ty)))
    ep = export(SumAdd(), (x, y), dynamic_shapes=sc)
    tep = torch.export.export(_torch_model(), (tx, ty), dynamic_shapes=tsc)
    assert _dim_ranges(ep, ep.range_constraints) == _dim_ranges(tep, tep.range_constraints)
    x2, y2 = ember.randn(9, 5), ember.randn(9, 3)
    np.testing.assert_allclose(ep.module()(x2, y2).numpy(), SumAdd()(x2, y2).numpy(), rtol=1e-5, atol=1e-5)
    # sc[t][d] = ... fills a fresh dict
    sc2 = ShapesCollection()
    sc2[x][0] = b
    assert sc2.dynamic_shapes(SumAdd(), (x, y)) == {"x": {0: b}, "y": None}


def test_errors_as_torch():
    torch = pytest.importorskip("torch")
    msgs = []
    for lib, ai in ((ember, AdditionalInputs()), (torch, torch.export.AdditionalInputs())):
        with pytest.raises(AssertionError) as e:
            ai.add([lib.randn(2)])
        msgs.append(str(e.value).split(" must")[1])
    assert msgs[0] == msgs[1]
    for lib, sc in ((ember, ShapesCollection()), (torch, torch.export.ShapesCollection())):
        with pytest.raises(AssertionError, match="Cannot assign shape to non-tensor"):
            sc[3] = {0: None}
        sc[lib.randn(2)] = {0: None}
        with pytest.raises(ValueError, match="Some tensors that were assigned shapes were not found in args"):
            sc.dynamic_shapes(SumAdd() if lib is ember else _torch_model(), (lib.randn(2, 5), lib.randn(2, 3)))
    ai = AdditionalInputs()
    ai.add((ember.randn(3, 5), ember.randn(3, 3), 4))
    with pytest.raises(NotImplementedError, match="dynamic ints are not supported"):
        ai.dynamic_shapes(SumAdd(), (ember.randn(2, 5), ember.randn(2, 3), 3))
    ai = AdditionalInputs()
    ai.add((ember.randn(3, 5, 1), ember.randn(3, 3)))
    with pytest.raises(UserError, match="2-d tensor in the example but a 3-d tensor"):
        export(SumAdd(), (ember.randn(2, 5), ember.randn(2, 3)), dynamic_shapes=ai)
    ai = AdditionalInputs()
    ai.add((ember.randn(3, 5),))
    with pytest.raises(UserError, match="missing a required argument: 'y'"):
        export(SumAdd(), (ember.randn(2, 5), ember.randn(2, 3)), dynamic_shapes=ai)

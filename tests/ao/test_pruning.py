"""ember.ao.pruning against torch.ao.pruning (torch 2.13): the same model and config give the
same groups, masks (values and dtypes) after each step, squashed weights, state dicts and
scheduled sparsity levels; the errors are torch's."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
from torch.ao import pruning as tp  # noqa: E402

from ember.ao import pruning as ep  # noqa: E402

warnings.filterwarnings("ignore")


def _pair(seed, sizes=(12, 8, 12)):
    torch.manual_seed(seed)
    tm = torch.nn.Sequential(torch.nn.Linear(sizes[0], sizes[1]), torch.nn.ReLU(), torch.nn.Linear(sizes[1], sizes[2]))
    em = ember.nn.Sequential(ember.nn.Linear(sizes[0], sizes[1]), ember.nn.ReLU(), ember.nn.Linear(sizes[1], sizes[2]))
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    return tm, em


def _mask(model, name):
    return model.get_submodule(name).parametrizations.weight[0].mask


def _same_masks(tm, em, names=("0", "2")):
    for n in names:
        t, e = _mask(tm, n).numpy(), _mask(em, n).numpy()
        assert str(e.dtype) == str(t.dtype)
        np.testing.assert_array_equal(e, t)


_CONFIGS = [
    dict(sparsity_level=0.5, sparse_block_shape=(1, 4)),
    dict(sparsity_level=0.3, sparse_block_shape=(2, 2), zeros_per_block=2),      # bool mask (block-level OR)
    dict(sparsity_level=0.7, sparse_block_shape=(1, 1)),
    dict(sparsity_level=0.5, sparse_block_shape=(1, 4), zeros_per_block=3, norm=1),
    dict(sparsity_level=0.45, sparse_block_shape=(3, 5)),                          # partial edge blocks
    dict(sparsity_level=1.0, sparse_block_shape=(2, 2), zeros_per_block=1),
    dict(sparsity_level=0.0),
]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kw", _CONFIGS, ids=lambda kw: "-".join(f"{k}{v}" for k, v in kw.items()))
def test_weight_norm_masks_match_torch(seed, kw):
    tm, em = _pair(seed)
    ts, es = tp.WeightNormSparsifier(**kw), ep.WeightNormSparsifier(**kw)
    cfg = [{"tensor_fqn": "0.weight"}, {"tensor_fqn": "2.weight", "sparsity_level": 0.25}]
    ts.prepare(tm, cfg)
    es.prepare(em, cfg)
    assert type(em[0]).__name__ == type(tm[0]).__name__ == "ParametrizedLinear"
    rng = np.random.default_rng(seed)
    for _ in range(2):
        ts.step()
        es.step()
        _same_masks(tm, em)
        x = rng.standard_normal((3, 12)).astype(np.float32)
        np.testing.assert_allclose(em(ember.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        with torch.no_grad():                     # move the weights: the next masks follow them
            tm[0].parametrizations.weight.original.mul_(torch.tensor(rng.uniform(0.5, 1.5, (8, 12)),
                                                                     dtype=torch.float32))
        em[0].parametrizations.weight.original.data = ember.tensor(
            tm[0].parametrizations.weight.original.detach().numpy().copy())
    tsd, esd = ts.state_dict(), es.state_dict()
    assert esd["groups"] == tsd["groups"]
    assert sorted(esd["state"]) == sorted(tsd["state"])
    for k in tsd["state"]:
        np.testing.assert_array_equal(esd["state"][k]["mask"].numpy(), tsd["state"][k]["mask"].numpy())
    ts.squash_mask(params_to_keep=("sparsity_level",), params_to_keep_per_layer={"2": ("sparse_block_shape",)})
    es.squash_mask(params_to_keep=("sparsity_level",), params_to_keep_per_layer={"2": ("sparse_block_shape",)})
    assert type(em[0]) is ember.nn.Linear and not hasattr(em[0], "parametrizations")
    for n in (0, 2):
        np.testing.assert_array_equal(em[n].weight.detach().numpy(), tm[n].weight.detach().numpy())
        assert em[n].sparse_params == tm[n].sparse_params
    assert sorted(em.state_dict()) == sorted(tm.state_dict())


def test_default_config_repr_and_errors():
    tm, em = _pair(3)
    ts, es = tp.WeightNormSparsifier(0.5), ep.WeightNormSparsifier(0.5)
    ts.prepare(tm, None)
    es.prepare(em, None)
    assert [g["tensor_fqn"] for g in es.groups] == [g["tensor_fqn"] for g in ts.groups]
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    assert repr(es).replace("ember.", "torch.").count("Group") == repr(ts).count("Group") == 2
    assert repr(es).splitlines()[0] == repr(ts).splitlines()[0]
    for lib_p, model in ((tp, _pair(4)[0]), (ep, _pair(4)[1])):
        with pytest.raises(AssertionError, match="config elements should be dicts"):
            lib_p.WeightNormSparsifier().prepare(model, [model[0]])
        with pytest.raises(AssertionError, match="tensor_fqn is a required argument"):
            lib_p.WeightNormSparsifier().prepare(model, [{"sparsity_level": 0.1}])
        with pytest.raises(AssertionError, match="expected them to agree"):
            lib_p.WeightNormSparsifier().prepare(model, [{"tensor_fqn": "0.weight", "module_fqn": "2"}])
        with pytest.raises(NotImplementedError, match="L-3 is not yet implemented"):
            lib_p.WeightNormSparsifier(norm=3)
        s = lib_p.WeightNormSparsifier(sparse_block_shape=(1, 2), zeros_per_block=3)
        s.prepare(model, [{"tensor_fqn": "2.weight"}])
        with pytest.raises(ValueError, match="Number of zeros per block cannot be more"):
            s.step()
        with pytest.raises(NotImplementedError, match="Need to auto generate mapping"):
            s.convert(model)
        with pytest.raises(TypeError, match="is not an instance of torch.ao.pruning.BaseSparsifier"):
            lib_p.BaseScheduler(object())
        with pytest.raises(TypeError):
            lib_p.BaseSparsifier()                 # abstract: update_mask
    with pytest.raises(NotImplementedError, match="sparse quantized Linear"):
        ep.get_static_sparse_quantized_mapping()


@pytest.mark.parametrize("nearliness", [1, 3, 5])
def test_nearly_diagonal_matches_torch(nearliness):
    tm, em = _pair(5, sizes=(6, 6, 9))
    ts, es = tp.NearlyDiagonalSparsifier(nearliness), ep.NearlyDiagonalSparsifier(nearliness)
    cfg = [{"tensor_fqn": "0.weight"}, {"tensor_fqn": "2.weight"}]
    ts.prepare(tm, cfg)
    es.prepare(em, cfg)
    ts.step()
    es.step()
    _same_masks(tm, em)
    ts.squash_mask()
    es.squash_mask()
    np.testing.assert_array_equal(em[2].weight.detach().numpy(), tm[2].weight.detach().numpy())


def test_nearly_diagonal_errors():
    for lib_p, model in ((tp, _pair(6, sizes=(4, 3, 4))[0]), (ep, _pair(6, sizes=(4, 3, 4))[1])):
        s = lib_p.NearlyDiagonalSparsifier(2)
        s.prepare(model, [{"tensor_fqn": "0.weight"}])
        with pytest.raises(ValueError, match="nearliness can only be an odd number"):
            s.step()
        s = lib_p.NearlyDiagonalSparsifier(7)
        s.prepare(model, [{"tensor_fqn": "2.weight"}])
        with pytest.raises(ValueError, match="nearliness cannot be larger than the dimensions of tensor"):
            s.step()


def _scheduled(lib_p, model, make):
    """Six sparsifier + scheduler steps (levels only grow: among blocks of equal norm -- pruned
    ones when a level goes down -- which torch keeps is its topk's unspecified tie order)."""
    s = lib_p.WeightNormSparsifier(sparsity_level=0.8, sparse_block_shape=(1, 2))
    s.prepare(model, [{"tensor_fqn": "0.weight"}, {"tensor_fqn": "2.weight", "sparsity_level": 0.6}])
    sched = make(lib_p, s)
    levels, masks = [], []
    for _ in range(6):
        s.step()
        sched.step()
        levels.append(sched.get_last_sl())
        masks.append(_mask(model, "0").numpy().copy())
    return levels, masks, sched


@pytest.mark.parametrize("make", [
    lambda lib_p, s: lib_p.LambdaSL(s, lambda epoch: min(1.0, epoch / 4)),
    lambda lib_p, s: lib_p.LambdaSL(s, [lambda e: 1 - 0.5 ** e, lambda e: e / 10]),
    lambda lib_p, s: lib_p.CubicSL(s, init_sl=0.1, init_t=1, delta_t=1, total_t=4),
    lambda lib_p, s: lib_p.CubicSL(s, init_sl=[0.0, 0.2], init_t=2, delta_t=2, total_t=[3, 2], initially_zero=True),
], ids=["lambda", "lambda-list", "cubic", "cubic-lists"])
def test_schedulers_match_torch(make):
    tm, em = _pair(7)
    tl, tmasks, tsched = _scheduled(tp, tm, make)
    el, emasks, esched = _scheduled(ep, em, make)
    np.testing.assert_allclose(np.array(el, np.float64), np.array(tl, np.float64), rtol=1e-12)
    for a, b in zip(emasks, tmasks):
        np.testing.assert_array_equal(a, b)
    assert esched.base_sl == tsched.base_sl
    assert sorted(esched.state_dict()) == sorted(tsched.state_dict())
    assert esched.last_epoch == tsched.last_epoch


def test_scheduler_order_warning_and_state_dict_round_trip():
    for lib_p, model in ((tp, _pair(8)[0]), (ep, _pair(8)[1])):
        s = lib_p.WeightNormSparsifier(0.5)
        s.prepare(model, None)
        sched = lib_p.LambdaSL(s, lambda e: 1.0)
        with pytest.warns(UserWarning, match="before `sparsifier.step\\(\\)`"):
            sched.step()
        with pytest.warns(UserWarning, match="please use `get_last_sl\\(\\)`"):
            sched.get_sl()
    tm, em = _pair(9)
    ts, es = tp.WeightNormSparsifier(0.5), ep.WeightNormSparsifier(0.5)
    ts.prepare(tm, None)
    es.prepare(em, None)
    ts.step()
    es.step()
    sd = es.state_dict()
    _, em2 = _pair(10)
    es2 = ep.WeightNormSparsifier(0.5)
    es2.model = em2
    es2.load_state_dict(copy.deepcopy(sd))
    np.testing.assert_array_equal(_mask(em2, "0").numpy(), _mask(em, "0").numpy())
    assert [g["tensor_fqn"] for g in es2.groups] == [g["tensor_fqn"] for g in es.groups]
    assert es2.groups[0]["module"] is em2[0]


def test_fqn_helpers_and_fake_sparsity():
    _, em = _pair(11)
    assert ep.module_to_fqn(em, em[2]) == "2"
    assert ep.module_to_fqn(em, ember.nn.Linear(1, 1)) is None
    assert ep.fqn_to_module(em, "2.weight") is em[2].weight
    info = ep.get_arg_info_from_tensor_fqn(em, "0.bias")
    assert info["module"] is em[0] and info["tensor_name"] == "bias" and info["module_fqn"] == "0"
    fs = ep.FakeSparsity(ember.tensor([[1.0, 0.0]]))
    np.testing.assert_array_equal(fs(ember.tensor([[3.0, 4.0]])).numpy(), [[3.0, 0.0]])
    assert fs.state_dict() == {} == tp.FakeSparsity(torch.ones(1)).state_dict()
    with pytest.raises(AssertionError, match="mask shape"):
        fs(ember.ones(2, 2))

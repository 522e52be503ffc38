"""ember.nn.utils.prune against torch.nn.utils.prune (torch 2.13).

The deterministic methods (L1 / Ln / custom masks / global L1) run on an ember and a
torch module holding the same random continuous weights (no ties) and must produce
the same masks, state_dict keys, forward values and gradients; the random methods
are checked for how many units (entries, or whole slices) they zero. Error types and
messages are compared with torch's.
"""
import copy

import numpy as np
import pytest

import ember
from oracle import assert_same_error
import ember.nn.utils.prune as prune


def _torch():
    return pytest.importorskip("torch")


def _tprune():
    _torch()
    import torch.nn.utils.prune as tprune
    return tprune


def _pair(kind, rng, double=False):
    """An ember and a torch module (``kind``: 'linear' or 'conv') with identical random weights."""
    torch = _torch()
    if kind == "linear":
        em, tm = ember.nn.Linear(6, 5), torch.nn.Linear(6, 5)
    else:
        em, tm = ember.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(3, 4, 3)
    for name, p in tm.named_parameters():
        val = rng.standard_normal(tuple(p.shape)).astype(np.float32)
        with torch.no_grad():
            p.copy_(torch.from_numpy(val))
        with ember.no_grad():
            getattr(em, name).copy_(ember.tensor(val))
    return em, tm


def _inp(kind, rng):
    shape = (3, 6) if kind == "linear" else (2, 3, 6, 6)
    return rng.standard_normal(shape).astype(np.float32)


def _np(t):
    return t.detach().numpy()


def _check_same(em, tm, kind, rng, names=("weight",)):
    """Masks, state_dict keys/values, forward output and gradients w.r.t. ``<name>_orig`` agree."""
    torch = _torch()
    for name in names:
        np.testing.assert_array_equal(_np(getattr(em, name + "_mask")), _np(getattr(tm, name + "_mask")))
        np.testing.assert_allclose(_np(getattr(em, name)), _np(getattr(tm, name)), rtol=1e-6, atol=1e-6)
    esd, tsd = em.state_dict(), tm.state_dict()
    assert list(esd) == list(tsd)
    for k in tsd:
        np.testing.assert_allclose(_np(esd[k]), _np(tsd[k]), rtol=1e-6, atol=1e-6)
    x = _inp(kind, rng)
    eo, to = em(ember.tensor(x)), tm(torch.from_numpy(x))
    np.testing.assert_allclose(_np(eo), _np(to), rtol=1e-5, atol=1e-5)
    eo.sum().backward()
    to.sum().backward()
    for (en, ep), (tn, tp) in zip(em.named_parameters(), tm.named_parameters()):
        assert en == tn
        np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-5)
    for name in names:
        orig_grad = getattr(em, name + "_orig").grad.numpy()
        # pruned entries get no gradient
        assert np.all(orig_grad[_np(getattr(em, name + "_mask")) == 0] == 0)


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("amount", [0, 1, 7, 0.0, 0.25, 0.5, 0.9, 1.0])
def test_l1_unstructured_matches_torch(kind, amount):
    rng = np.random.default_rng()
    em, tm = _pair(kind, rng)
    out = prune.l1_unstructured(em, "weight", amount=amount)
    assert out is em
    _tprune().l1_unstructured(tm, "weight", amount=amount)
    assert isinstance(em.weight_orig, ember.nn.Parameter)
    assert "weight" not in em._parameters and "weight_mask" in em._buffers
    assert not isinstance(em.weight, ember.nn.Parameter)
    assert em.weight_mask.dtype == ember.float32
    _check_same(em, tm, kind, rng)


@pytest.mark.parametrize("n", [1, 2, 3, float("inf"), float("-inf"), "fro"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("amount", [1, 0.5, 0.0])
def test_ln_structured_matches_torch(n, dim, amount):
    rng = np.random.default_rng()
    # 'fro' is a matrix norm: over the other dims of a 2-D weight only (a conv weight's 3 raise, below)
    kind = "linear" if n == "fro" else "conv"
    em, tm = _pair(kind, rng)
    prune.ln_structured(em, "weight", amount=amount, n=n, dim=dim)
    _tprune().ln_structured(tm, "weight", amount=amount, n=n, dim=dim)
    _check_same(em, tm, kind, rng)


def test_importance_scores_match_torch():
    torch = _torch()
    tprune = _tprune()
    rng = np.random.default_rng()
    for _ in range(3):
        em, tm = _pair("conv", rng)
        s = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
        prune.l1_unstructured(em, "weight", 0.4, importance_scores=ember.tensor(s))
        tprune.l1_unstructured(tm, "weight", 0.4, importance_scores=torch.from_numpy(s))
        s2 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
        prune.ln_structured(em, "weight", 1, n=1, dim=0, importance_scores=ember.tensor(s2))
        tprune.ln_structured(tm, "weight", 1, n=1, dim=0, importance_scores=torch.from_numpy(s2))
        _check_same(em, tm, "conv", rng)


@pytest.mark.parametrize("seq", [
    [("l1", 0.3), ("l1", 0.3)],
    [("l1", 5), ("ln", 0.5, 2, 0), ("l1", 0.2)],
    [("ln", 1, 1, 0), ("ln", 1, 2, 1), ("l1", 4)],
    [("identity",), ("custom",), ("l1", 0.5)],
    [("custom",), ("ln", 2, float("inf"), -1), ("identity",)],
])
def test_iterative_pruning_matches_torch(seq):
    """Repeated pruning stacks methods in a PruningContainer and each acts on what is left."""
    torch = _torch()
    tprune = _tprune()
    rng = np.random.default_rng()
    em, tm = _pair("conv", rng)
    for step in seq:
        if step[0] == "l1":
            prune.l1_unstructured(em, "weight", step[1])
            tprune.l1_unstructured(tm, "weight", step[1])
        elif step[0] == "ln":
            prune.ln_structured(em, "weight", step[1], n=step[2], dim=step[3])
            tprune.ln_structured(tm, "weight", step[1], n=step[2], dim=step[3])
        elif step[0] == "identity":
            prune.identity(em, "weight")
            tprune.identity(tm, "weight")
        else:
            m = (rng.random((4, 3, 3, 3)) > 0.3).astype(np.float32)
            prune.custom_from_mask(em, "weight", ember.tensor(m))
            tprune.custom_from_mask(tm, "weight", torch.from_numpy(m))
    hooks = list(em._forward_pre_hooks.values())
    assert len(hooks) == 1
    if len(seq) > 1:
        assert isinstance(hooks[0], prune.PruningContainer) and len(hooks[0]) == len(seq)
        assert [type(h).__name__ for h in hooks[0]] == [type(h).__name__ for h in
                                                         next(iter(tm._forward_pre_hooks.values()))]
    _check_same(em, tm, "conv", rng)


def test_unstructured_amount_applies_to_what_is_left():
    rng = np.random.default_rng()
    m = ember.nn.Linear(10, 10)
    with ember.no_grad():
        m.weight.copy_(ember.tensor(rng.standard_normal((10, 10)).astype(np.float32)))
    prune.l1_unstructured(m, "weight", 0.5)
    prune.l1_unstructured(m, "weight", 0.5)
    assert int((m.weight_mask == 0).sum().item()) == 75
    prune.random_unstructured(m, "weight", 5)
    assert int((m.weight_mask == 0).sum().item()) == 80
    with pytest.raises(ValueError, match="should be smaller than the number of parameters to prune=20"):
        prune.l1_unstructured(m, "weight", 21)


def test_bias_and_weight_pruned_together_match_torch():
    tprune = _tprune()
    rng = np.random.default_rng()
    em, tm = _pair("linear", rng)
    for mod, P in ((em, prune), (tm, tprune)):
        P.l1_unstructured(mod, "weight", 0.3)
        P.l1_unstructured(mod, "bias", 2)
    _check_same(em, tm, "linear", rng, names=("weight", "bias"))
    assert len(em._forward_pre_hooks) == 2


@pytest.mark.parametrize("amount", [0.0, 0.3, 17, 0.8])
def test_global_unstructured_matches_torch(amount):
    torch = _torch()
    tprune = _tprune()
    rng = np.random.default_rng()
    el, tl = _pair("linear", rng)
    ec, tc = _pair("conv", rng)
    prune.l1_unstructured(el, "weight", 0.2)          # an earlier mask is respected
    tprune.l1_unstructured(tl, "weight", 0.2)
    prune.global_unstructured(((el, "weight"), (ec, "weight"), (ec, "bias")), pruning_method=prune.L1Unstructured,
                              amount=amount)
    tprune.global_unstructured([(tl, "weight"), (tc, "weight"), (tc, "bias")],
                               pruning_method=tprune.L1Unstructured, amount=amount)
    _check_same(el, tl, "linear", rng)
    _check_same(ec, tc, "conv", rng, names=("weight", "bias"))
    assert isinstance(next(iter(ec._forward_pre_hooks.values())), prune.CustomFromMask)

    # importance scores per (module, name), and a generator of parameters
    el, tl = _pair("linear", rng)
    ec, tc = _pair("conv", rng)
    s = rng.standard_normal((5, 6)).astype(np.float32)
    prune.global_unstructured(((m, "weight") for m in (el, ec)), prune.L1Unstructured,
                              importance_scores={(el, "weight"): ember.tensor(s)}, amount=amount)
    tprune.global_unstructured([(tl, "weight"), (tc, "weight")], tprune.L1Unstructured,
                               importance_scores={(tl, "weight"): torch.from_numpy(s)}, amount=amount)
    _check_same(el, tl, "linear", rng)
    _check_same(ec, tc, "conv", rng)


def test_global_random_unstructured_counts():
    a, b = ember.nn.Linear(8, 4), ember.nn.Conv2d(2, 3, 3)
    prune.global_unstructured([(a, "weight"), (b, "weight")], prune.RandomUnstructured, amount=0.5)
    zeros = int((a.weight_mask == 0).sum().item()) + int((b.weight_mask == 0).sum().item())
    assert zeros == round(0.5 * (32 + 54))


@pytest.mark.parametrize("amount", [0, 3, 0.1, 0.5, 1.0])
def test_random_unstructured_counts(amount):
    for _ in range(3):
        m = ember.nn.Conv2d(3, 4, 3)
        before = m.weight.detach().numpy().copy()
        prune.random_unstructured(m, "weight", amount)
        mask = m.weight_mask.numpy()
        n = mask.size
        k = amount if isinstance(amount, int) else round(amount * n)
        assert set(np.unique(mask)) <= {0.0, 1.0}
        assert int((mask == 0).sum()) == k
        np.testing.assert_array_equal(m.weight.detach().numpy(), before * mask)
        np.testing.assert_array_equal(m.weight_orig.detach().numpy(), before)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("amount", [1, 2, 0.5, 0])
def test_random_structured_zeroes_whole_slices(dim, amount):
    for _ in range(3):
        m = ember.nn.Conv2d(3, 4, 3)
        prune.random_structured(m, "weight", amount, dim=dim)
        mask = np.moveaxis(m.weight_mask.numpy(), dim, 0).reshape(m.weight.shape[dim], -1)
        n = mask.shape[0]
        k = amount if isinstance(amount, int) else round(amount * n)
        alive = mask.all(axis=1)
        dead = (mask == 0).all(axis=1)
        assert np.all(alive | dead)                      # each slice entirely kept or entirely pruned
        assert int(dead.sum()) == k


def test_random_structured_iterative_keeps_earlier_pruning():
    m = ember.nn.Conv2d(3, 6, 3)
    prune.random_structured(m, "weight", 2, dim=0)
    first_dead = (m.weight_mask.numpy().reshape(6, -1) == 0).all(axis=1)
    prune.random_structured(m, "weight", 2, dim=0)         # two more among the four left
    dead = (m.weight_mask.numpy().reshape(6, -1) == 0).all(axis=1)
    assert dead.sum() == 4 and np.all(dead[first_dead])
    prune.random_unstructured(m, "weight", 0.5)            # half of the 2 * 27 live entries
    assert int((m.weight_mask.numpy() == 0).sum()) == 4 * 27 + 27


def test_forward_pre_hook_recomputes_and_training_keeps_zeros():
    rng = np.random.default_rng()
    m = ember.nn.Linear(6, 3)
    prune.l1_unstructured(m, "weight", 0.5)
    mask = m.weight_mask.numpy().copy()
    opt = ember.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(3):
        x = ember.tensor(rng.standard_normal((4, 6)).astype(np.float32))
        opt.zero_grad()
        m(x).pow(2).sum().backward()
        opt.step()
    m(ember.tensor(rng.standard_normal((1, 6)).astype(np.float32)))
    np.testing.assert_allclose(m.weight.detach().numpy(), m.weight_orig.detach().numpy() * mask)
    assert np.all(m.weight.detach().numpy()[mask == 0] == 0)
    assert m.weight.grad_fn is not None        # differentiable w.r.t. weight_orig


def test_remove_makes_pruning_permanent_like_torch():
    tprune = _tprune()
    rng = np.random.default_rng()
    em, tm = _pair("conv", rng)
    prune.ln_structured(em, "weight", 0.5, n=2, dim=0)
    prune.l1_unstructured(em, "weight", 0.3)
    tprune.ln_structured(tm, "weight", 0.5, n=2, dim=0)
    tprune.l1_unstructured(tm, "weight", 0.3)
    orig = em.weight_orig
    assert prune.is_pruned(em)
    assert prune.remove(em, "weight") is em
    tprune.remove(tm, "weight")
    assert not prune.is_pruned(em)
    assert em.weight is orig and isinstance(em.weight, ember.nn.Parameter)
    assert list(em.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    assert not hasattr(em, "weight_orig") and not hasattr(em, "weight_mask")
    assert len(em._forward_pre_hooks) == 0
    np.testing.assert_allclose(_np(em.weight), _np(tm.weight), rtol=1e-6, atol=1e-6)
    _check_same_plain(em, tm, rng)


def _check_same_plain(em, tm, rng):
    torch = _torch()
    x = _inp("conv", rng)
    np.testing.assert_allclose(_np(em(ember.tensor(x))), _np(tm(torch.from_numpy(x))), rtol=1e-5, atol=1e-5)


def test_is_pruned_sees_submodules():
    net = ember.nn.Sequential(ember.nn.Linear(3, 3), ember.nn.Sequential(ember.nn.ReLU(), ember.nn.Linear(3, 2)))
    assert not prune.is_pruned(net)
    prune.random_unstructured(net[1][1], "bias", 1)
    assert prune.is_pruned(net)
    prune.remove(net[1][1], "bias")
    assert not prune.is_pruned(net)


def test_state_dict_roundtrip_into_identity_pruned_module():
    rng = np.random.default_rng()
    a = ember.nn.Linear(4, 4)
    prune.l1_unstructured(a, "weight", 0.5)
    b = ember.nn.Linear(4, 4)
    prune.identity(b, "weight")
    b.load_state_dict(a.state_dict())
    x = ember.tensor(rng.standard_normal((2, 4)).astype(np.float32))
    np.testing.assert_allclose(_np(b(x)), _np(a(x)), rtol=1e-6)


def test_deepcopy_like_torch():
    torch = _torch()
    tprune = _tprune()
    # under grad mode the cached pruned weight is a non-leaf: both frameworks refuse to deepcopy it
    em, tm = ember.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    prune.l1_unstructured(em, "weight", 0.5)
    tprune.l1_unstructured(tm, "weight", 0.5)
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(tm)
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(em)
    # once the weight was recomputed without grad (or pruning ran under no_grad), it works
    with ember.no_grad():
        em(ember.randn(1, 4))
    c = copy.deepcopy(em)
    np.testing.assert_array_equal(c.weight_mask.numpy(), em.weight_mask.numpy())
    assert c.weight_orig is not em.weight_orig and prune.is_pruned(c)
    with ember.no_grad():
        c.weight_orig.mul_(2.0)
    c(ember.randn(1, 4))
    np.testing.assert_allclose(_np(c.weight), 2 * _np(em.weight))
    prune.remove(c, "weight")
    assert prune.is_pruned(em) and not prune.is_pruned(c)
    m = ember.nn.Conv2d(2, 2, 3)
    with ember.no_grad():
        prune.ln_structured(m, "weight", 1, n=1, dim=0)
    assert prune.is_pruned(copy.deepcopy(m))


def test_prune_method_on_plain_tensor_matches_torch():
    torch = _torch()
    tprune = _tprune()
    rng = np.random.default_rng()
    x = rng.standard_normal((4, 5)).astype(np.float32)
    s = rng.standard_normal((4, 5)).astype(np.float32)
    dm = (rng.random((4, 5)) > 0.2).astype(np.float32)
    for em, tm in ((prune.L1Unstructured(0.3), tprune.L1Unstructured(0.3)),
                   (prune.LnStructured(2, n=1, dim=1), tprune.LnStructured(2, n=1, dim=1)),
                   (prune.CustomFromMask(ember.tensor(dm)), tprune.CustomFromMask(torch.from_numpy(dm)))):
        np.testing.assert_array_equal(_np(em.prune(ember.tensor(x))), _np(tm.prune(torch.from_numpy(x))))
        np.testing.assert_array_equal(
            _np(em.prune(ember.tensor(x), importance_scores=ember.tensor(s), default_mask=ember.tensor(dm))),
            _np(tm.prune(torch.from_numpy(x), importance_scores=torch.from_numpy(s),
                         default_mask=torch.from_numpy(dm))))




def test_errors_match_torch():
    torch = _torch()
    tprune = _tprune()
    for amount in (-1, 1.5, -0.1, "0.5", None, 2.0):
        assert_same_error(lambda: prune.L1Unstructured(amount), lambda: tprune.L1Unstructured(amount))
        assert_same_error(lambda: prune.RandomStructured(amount), lambda: tprune.RandomStructured(amount))
        assert_same_error(lambda: prune.LnStructured(amount, 2), lambda: tprune.LnStructured(amount, 2))
    mk = (lambda: ember.nn.Linear(4, 3), lambda: torch.nn.Linear(4, 3))
    cases = [
        lambda P, m: P.l1_unstructured(m, "weight", 13),                       # more than 12 entries
        lambda P, m: P.random_unstructured(m, "weight", 13),
        lambda P, m: P.ln_structured(m, "weight", 4, n=2, dim=0),             # 3 rows only
        lambda P, m: P.ln_structured(m, "bias", 1, n=2, dim=0),               # 1-D
        lambda P, m: P.random_structured(m, "bias", 1, dim=0),
        lambda P, m: P.ln_structured(m, "weight", 1, n=2, dim=2),             # bad dim
        lambda P, m: P.random_structured(m, "weight", 1, dim=5),
        lambda P, m: P.global_unstructured(5, P.L1Unstructured, amount=1),
        lambda P, m: P.global_unstructured([(m, "weight")], P.L1Unstructured, importance_scores=[1], amount=1),
        lambda P, m: P.global_unstructured([(m, "weight")], P.RandomStructured, amount=1),
    ]
    for case in cases:
        assert_same_error(lambda: case(prune, mk[0]()), lambda: case(tprune, mk[1]()))
    # 'fro' is a matrix norm: a conv weight has three other dims
    assert_same_error(lambda: prune.ln_structured(ember.nn.Conv2d(2, 2, 3), "weight", 1, n="fro", dim=0),
                lambda: tprune.ln_structured(torch.nn.Conv2d(2, 2, 3), "weight", 1, n="fro", dim=0))
    # messages naming the module (its repr is the same in both)
    assert_same_error(lambda: prune.remove(ember.nn.Linear(4, 3), "weight"),
                lambda: tprune.remove(torch.nn.Linear(4, 3), "weight"))
    assert_same_error(lambda: prune.l1_unstructured(ember.nn.Linear(4, 3), "weight", 1,
                                                    importance_scores=ember.ones(3, 3)),
                lambda: tprune.l1_unstructured(torch.nn.Linear(4, 3), "weight", 1, importance_scores=torch.ones(3, 3)))
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        prune.remove(ember.nn.Linear(2, 2), "weight")
    with pytest.raises(AssertionError, match="importance_scores should have the same shape"):
        prune.L1Unstructured(0.1).prune(ember.ones(2, 2), importance_scores=ember.ones(3))
    with pytest.raises(AssertionError, match="must match"):
        prune.custom_from_mask(ember.nn.Linear(2, 2), "weight", ember.ones(3))


def test_container_errors():
    a = prune.L1Unstructured(0.1)
    a._tensor_name = "weight"
    c = prune.PruningContainer(a)
    assert c._tensor_name == "weight" and len(c) == 1 and c[0] is a and list(c) == [a]
    b = prune.L1Unstructured(0.2)
    b._tensor_name = "bias"
    with pytest.raises(ValueError, match="Can only add pruning methods acting on the parameter named 'weight'"):
        c.add_pruning_method(b)
    with pytest.raises(TypeError, match="is not a BasePruningMethod subclass"):
        c.add_pruning_method(3)
    b._tensor_name = "weight"
    assert len(prune.PruningContainer(a, b)) == 2

    class Weird(prune.BasePruningMethod):
        PRUNING_TYPE = "diagonal"

        def compute_mask(self, t, default_mask):
            return default_mask

    m = ember.nn.Linear(3, 3)
    prune.identity(m, "weight")
    with pytest.raises(ValueError, match="Unrecognized PRUNING_TYPE diagonal"):
        Weird.apply(m, "weight")

    class NoDim(Weird):
        PRUNING_TYPE = "structured"

    with pytest.raises(AttributeError, match="need to have the attribute `dim` defined"):
        NoDim.apply(m, "weight")
    with pytest.raises(AttributeError, match="has not been applied"):
        prune.L1Unstructured(0.1).apply_mask(m)


def test_failed_pruning_leaves_module_unchanged():
    rng = np.random.default_rng()
    m = ember.nn.Linear(4, 3)
    w = m.weight
    with pytest.raises(ValueError):
        prune.l1_unstructured(m, "weight", 20)
    assert m.weight is w and "weight" in m._parameters and not prune.is_pruned(m)
    assert list(m.state_dict()) == ["weight", "bias"]

    prune.l1_unstructured(m, "weight", 2)
    prune.l1_unstructured(m, "weight", 2)
    mask = m.weight_mask.numpy().copy()
    for bad in (lambda: prune.l1_unstructured(m, "weight", 9),
                lambda: prune.ln_structured(m, "weight", 1, n=2, dim=3),
                lambda: prune.l1_unstructured(m, "weight", 1, importance_scores=ember.ones(2))):
        with pytest.raises((ValueError, IndexError, AssertionError)):
            bad()
        hooks = list(m._forward_pre_hooks.values())
        assert len(hooks) == 1 and len(hooks[0]) == 2
        np.testing.assert_array_equal(m.weight_mask.numpy(), mask)
    with ember.no_grad():
        m.weight_orig.add_(1.0)
    m(ember.tensor(rng.standard_normal((1, 4)).astype(np.float32)))       # the hook still refreshes weight
    np.testing.assert_allclose(_np(m.weight), _np(m.weight_orig) * mask)


def test_namespace():
    assert ember.nn.utils.prune is prune
    for name in prune.__all__:
        assert hasattr(prune, name)
    torch = _torch()
    import torch.nn.utils.prune as tprune
    public = {n for n in dir(tprune) if not n.startswith("_") and callable(getattr(tprune, n))
              and getattr(getattr(tprune, n), "__module__", "") == tprune.__name__}
    assert public <= set(prune.__all__)


def _holder(nn_mod, value):
    """A bare module holding one parameter ``w`` (any shape / dtype)."""
    m = nn_mod.Module()
    m.w = nn_mod.Parameter(value)
    return m


def test_random_shapes_and_sequences_match_torch():
    """Random shapes (1-4 dims), float32 / float64, random chains of L1 / Ln / custom-mask steps on
    a bare parameter: the masks equal torch's after every step (continuous draws: no ties)."""
    torch = _torch()
    tprune = _tprune()
    from hypothesis import given, settings, strategies as st

    @settings(max_examples=40, deadline=None)
    @given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
           dtype=st.sampled_from(["float32", "float64"]),
           steps=st.lists(st.tuples(st.sampled_from(["l1", "ln", "custom"]), st.floats(0.0, 1.0),
                                    st.integers(0, 3), st.sampled_from([1, 2, float("inf")])),
                          min_size=1, max_size=4),
           seed=st.integers(0, 2 ** 31 - 1))
    def run(shape, dtype, steps, seed):
        rng = np.random.default_rng(seed)
        w = rng.standard_normal(shape).astype(dtype)
        em, tm = _holder(ember.nn, ember.tensor(w)), _holder(torch.nn, torch.from_numpy(w.copy()))
        for kind, amount, dim, n in steps:
            dim = dim % len(shape)
            if kind == "l1":
                prune.l1_unstructured(em, "w", amount)
                tprune.l1_unstructured(tm, "w", amount)
            elif kind == "ln" and len(shape) > 1:
                prune.ln_structured(em, "w", amount, n=n, dim=dim)
                tprune.ln_structured(tm, "w", amount, n=n, dim=dim)
            else:
                mask = (rng.random(shape) > amount).astype(dtype)
                prune.custom_from_mask(em, "w", ember.tensor(mask))
                tprune.custom_from_mask(tm, "w", torch.from_numpy(mask))
            np.testing.assert_array_equal(_np(em.w_mask), _np(tm.w_mask))
            assert em.w_mask.dtype == getattr(ember, dtype)
        np.testing.assert_array_equal(_np(em.w), _np(tm.w))
        em.w.sum().backward()
        tm.w.sum().backward()
        np.testing.assert_array_equal(em.w_orig.grad.numpy(), tm.w_orig.grad.numpy())

    run()

"""Capture gaps found by comparing realistic model code with torch.compile (probes s46): each
program gives eager's result with the number of graphs PyTorch's dynamo gives it."""
import functools
import inspect

import numpy as np
import pytest

import ember
from ember import dynamo, nn
from ember.nn.utils.stateless import functional_call as stateless_functional_call

from ._util import assert_one_graph, assert_same, check, clone_tree


def _mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _params(model):
    return {k: ember.randn(*v.shape) for k, v in model.named_parameters()}


# ---------------------------------------------------------------- functional_call
def test_functional_call_is_traced_into_one_graph():
    """``ember.func.functional_call(model, params, (x,))`` in a compiled function: one graph
    whose inputs are the given tensors (it broke the graph: 'cannot pass NNModuleVariable(...)
    to an ember operator'; torch.compile traces it)."""
    model = _mlp()

    def f(params, x):
        return ember.func.functional_call(model, params, (x,))

    assert_one_graph(f, _params(model), ember.randn(3, 4))
    check(f, lambda: (_params(model), ember.randn(3, 4)))


def test_functional_call_partial_dict_and_single_argument():
    """Only some names swapped (the others are the module's own), args given as one tensor, and
    ember.nn.utils.stateless's spelling."""
    model = _mlp()

    def f(w, x):
        return ember.func.functional_call(model, {"0.weight": w}, x) + model(x)

    def g(params, x):
        return stateless_functional_call(model, params, x)

    check(f, lambda: (ember.randn(8, 4), ember.randn(3, 4)))
    check(g, lambda: (_params(model), ember.randn(3, 4)))


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x, scale=1.0):
        # a parameters() walk inside forward sees the swapped tensors too
        return self.bn(self.lin(x)) * scale + sum(p.sum() for p in self.parameters())


def test_functional_call_with_buffers_kwargs_and_parameter_walk():
    """A tuple of (params, buffers) dicts, keyword arguments, BatchNorm updating the swapped
    running stats in place, a parameters() walk in forward: eager's results and buffer values,
    and the module's own buffers untouched."""
    ember.manual_seed(0)
    m = _Block()
    own = {k: v.clone() for k, v in m.named_buffers()}

    def f(ps, bufs, x):
        return ember.func.functional_call(m, (ps, bufs), (x,), {"scale": 2.0})

    def inputs():
        return ({k: ember.randn(*v.shape) for k, v in m.named_parameters()},
                {k: v.clone() for k, v in own.items()}, ember.randn(5, 4))

    assert_one_graph(f, *inputs())
    check(f, inputs)        # (compares the buffer dicts after the call too)
    for backend in ("aot_eager", "inductor"):
        dynamo.reset()
        args = inputs()
        a, b = clone_tree(args), clone_tree(args)
        assert_same(f(*a), ember.compile(f, backend=backend)(*b))
        assert_same(a, b, "inputs after the call")
    for k, v in m.named_buffers():
        assert bool((v == own[k]).all()), k


def test_functional_call_gradients_match_eager():
    """backward through a compiled functional_call reaches the swapped tensors (not the
    module's parameters), with eager's values."""
    model = _mlp()

    def f(params, x):
        loss = ember.func.functional_call(model, params, (x,)).pow(2).sum()
        loss.backward()
        return loss

    ps = {k: v.requires_grad_() for k, v in _params(model).items()}
    x = ember.randn(3, 4)
    ref_ps = {k: v.detach().clone().requires_grad_() for k, v in ps.items()}
    f(ref_ps, x)
    ember.compile(f, backend="aot_eager")(ps, x)
    for k in ps:
        np.testing.assert_allclose(ps[k].grad.numpy(), ref_ps[k].grad.numpy(), rtol=1e-5, atol=1e-6)
    assert all(p.grad is None for p in model.parameters())


def test_functional_call_ensemble_over_stacked_state():
    """An ensemble loop over ``stack_module_state``'s stacked parameters: one graph."""
    ember.manual_seed(0)
    base = nn.Linear(4, 3)
    params, _ = ember.func.stack_module_state([nn.Linear(4, 3) for _ in range(3)])

    def f(sp, x):
        return ember.stack([ember.func.functional_call(base, {k: v[i] for k, v in sp.items()}, (x,))
                            for i in range(3)])

    assert_one_graph(f, params, ember.randn(2, 4))
    check(f, lambda: ({k: ember.randn(*v.shape) for k, v in params.items()}, ember.randn(2, 4)))


@pytest.mark.parametrize("case", ["unknown", "strict"])
def test_functional_call_errors_are_eager_errors(case):
    """A name the module lacks (torch: set as a plain attribute for the call, no error), or a
    missing one under strict=True (torch's "Error(s) in reparametrizing"): the compiled program
    does what eager does (the call runs eagerly), never a silently different result."""
    model = _mlp()

    def f(w, x):
        if case == "unknown":
            return ember.func.functional_call(model, {"nope": w}, (x,))
        return ember.func.functional_call(model, {"0.weight": w}, (x,), strict=True)

    w, x = ember.randn(8, 4), ember.randn(3, 4)
    if case == "unknown":
        assert_same(f(w, x), ember.compile(f, backend="eager")(w, x))
        assert not hasattr(model, "nope")
        return
    with pytest.raises(RuntimeError, match=r"Error\(s\) in reparametrizing for Sequential"):
        ember.compile(f, backend="eager")(w, x)


def test_functional_call_guards_the_module_tree():
    """The names eager accepts depend on the module tree, which is guarded: a parameter added
    after the first call recompiles (the walk and the strict check are redone)."""
    model = _mlp()

    def f(params, x):
        return ember.func.functional_call(model, params, (x,), strict=True)

    cf = ember.compile(f, backend="eager")
    ps = _params(model)
    x = ember.randn(3, 4)
    assert_same(f(ps, x), cf(ps, x))
    model[2].extra = nn.Parameter(ember.randn(2))
    with pytest.raises(RuntimeError, match=r"Missing key\(s\): '2.extra'"):
        cf(ps, x)


# ---------------------------------------------------------------- typing objects
def test_typing_subscripts_fold_to_constants():
    """timm's ``feats = torch.jit.annotate(List[Tensor], [])``, ``Dict[str, Tensor]``,
    ``Optional[Tensor]``, ``isinstance(x, Sequence)``, ``list[int]``, ``Union[...]``: constants of
    the trace, one graph (``List[...]`` broke the graph: 'indexing UserObjectVariable')."""
    import typing
    from typing import Dict, List, Optional, Sequence, Union, cast

    def f(x, seq):
        a = ember.jit.annotate(List[ember.Tensor], [])
        d = ember.jit.annotate(Dict[str, ember.Tensor], {})
        o = ember.jit.annotate(Optional[ember.Tensor], None)
        a.append(x)
        d["k"] = x * 2
        s = 1.0
        if isinstance(seq, Sequence):
            s += 1
        if isinstance(seq, typing.Mapping):
            s += 10
        y = cast(ember.Tensor, x)
        return a[0] + d["k"] + y * s + (0 if o is None else 1), list[int] is not None, \
            Union[int, str] == Union[str, int]

    for seq in ([1, 2], {"a": 1}):
        assert_one_graph(f, ember.randn(3), seq)
        check(f, lambda: (ember.randn(3), seq))


# ---------------------------------------------------------------- objects with a raising __getattr__
class _KeyErrorAttrs(dict):
    """``AttrDict``: attribute reads are item reads, so an unknown attribute raises KeyError."""
    __getattr__ = dict.__getitem__


def test_object_whose_getattr_raises_keyerror_is_no_internal_error():
    """Wrapping such an object (a frame argument) probed ember's ``_ember_*`` marker attributes
    with ``getattr(value, name, default)``, which lets the KeyError through: the trace failed
    with an internal error. Now it is an ordinary object: the program gives eager's result with
    no internal error."""
    def f(x, cfg):
        return x * cfg["scale"] + 1

    cfg = _KeyErrorAttrs(scale=3.0)
    x = ember.randn(4)
    got = ember.compile(f, backend="eager")(x, cfg)
    assert_same(f(x, cfg), got)
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons


# ---------------------------------------------------------------- attribute dicts
class _AttrDict(dict):
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


class _EasyDict(dict):
    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k)

    def __setattr__(self, k, v):
        self[k] = v


class _OutputDict(dict):
    scale = 2.0

    def __getattr__(self, k):
        if k.startswith("_"):
            raise AttributeError(k)
        return self.get(k, None)


def _attr_dicts(x, cfg, out):
    a = _AttrDict(h=x)
    a.g = a.h * cfg.scale
    r = a.g + out.h + (1 if hasattr(cfg, "scale") else 0) + (10 if hasattr(cfg, "nope") else 0)
    r = r + (100 if getattr(out, "missing", None) is None else 0) + out.scale
    try:
        a.nope
    except KeyError:
        r = r + 1000
    e = _EasyDict()
    e.y = r
    return r, e, a, hasattr(e, "y"), hasattr(e, "q")


def test_attribute_dicts_made_in_and_passed_to_the_frame():
    """dict subclasses whose attributes are their items (``AttrDict`` with ``__getattr__ =
    dict.__getitem__``, ``EasyDict`` with Python ``__getattr__``/``__setattr__``), made in the
    frame or passed in: one graph, eager's results (KeyError vs AttributeError misses, hasattr,
    class attributes first), real instances returned. Constructing one broke the graph, and an
    outside one was an opaque object ('indexing UserObjectVariable')."""
    def inputs():
        return ember.randn(3), _EasyDict(scale=3.0), _OutputDict(h=ember.randn(3))

    assert_one_graph(_attr_dicts, *inputs())
    dynamo.reset()
    cf = ember.compile(_attr_dicts, backend="eager")
    for scale in (3.0, 3.0, 5.0):
        # (the outside config's items are guarded: a new value recompiles, never a stale constant)
        x, cfg, out = inputs()
        cfg.scale = scale
        expected, got = _attr_dicts(x, cfg, out), cf(x, cfg, out)
        assert [type(v) for v in got] == [type(v) for v in expected]
        assert_same(expected[0], got[0])
        assert_same(dict(expected[1]), dict(got[1]))
        assert_same(dict(expected[2]), dict(got[2]))
        assert got[3:] == expected[3:] == (True, False)
    assert dynamo.counters["internal_errors"] == 0 and dynamo.counters["graph_breaks"] == 0


def test_attribute_dict_missing_key_raises_like_eager():
    """``AttrDict().missing`` raises KeyError (dict.__getitem__), which ``hasattr`` does not
    swallow: the compiled call raises it too."""
    def f(x, cfg):
        return x + (1 if hasattr(cfg, "nope") else 0)

    with pytest.raises(KeyError):
        ember.compile(f, backend="eager")(ember.randn(2), _AttrDict(scale=1.0))


# ---------------------------------------------------------------- autograd engine w.r.t. graph intermediates
def _grad_wrt_intermediate(x):
    h = x * 2
    y = (h.sin() * x).sum()
    (g,) = ember.autograd.grad(y, [h])
    return g


def _backward_inputs_intermediate(x):
    h = x * 2
    y = (h.sin() * x).sum()
    y.backward(inputs=[h])
    return h.grad


def _autograd_backward_inputs_intermediate(x):
    h = x * 2
    y = (h.sin() * x).sum()
    ember.autograd.backward([y], inputs=[h])
    return h.grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [_grad_wrt_intermediate, _backward_inputs_intermediate,
                                _autograd_backward_inputs_intermediate])
def test_autograd_engine_wrt_tensor_computed_in_the_graph(fn, backend):
    """``autograd.grad(y, h)`` / ``backward(inputs=[h])`` where ``h`` and ``y`` were computed in
    the graph being traced: split there, no gradient reaches ``h`` (both leave one compiled
    autograd node): grad raised 'appears to not have been used in the graph', backward left
    ``h.grad`` None (a silent wrong answer; torch.compile does the same). The frame now runs
    eagerly: eager's gradient."""
    x = ember.randn(5, requires_grad=True)
    expected = fn(x)
    got = ember.compile(fn, backend=backend)(x)
    assert got is not None
    assert_same(expected, got)


def test_maml_inner_loop_with_functional_call_matches_eager():
    """MAML: adapted parameters ``p = {k: w - lr * g}`` then ``grad(loss(functional_call(model,
    p)), p.values(), create_graph=True)`` -- with functional_call traced, ``p`` and the loss are in
    one resume function's graph (the case above); query loss and meta-gradients equal eager's."""
    model = _mlp()
    params = dict(model.named_parameters())
    F = ember.nn.functional

    def fn(xs, ys, xq, yq):
        p = dict(params)
        for _ in range(2):
            loss = F.mse_loss(ember.func.functional_call(model, p, (xs,)), ys)
            grads = ember.autograd.grad(loss, list(p.values()), create_graph=True)
            p = {k: w - 0.1 * g for (k, w), g in zip(p.items(), grads)}
        qloss = F.mse_loss(ember.func.functional_call(model, p, (xq,)), yq)
        return qloss, ember.autograd.grad(qloss, list(params.values()))

    args = (ember.randn(5, 4), ember.randn(5, 2), ember.randn(5, 4), ember.randn(5, 2))
    expected = fn(*args)
    for backend in ("aot_eager", "inductor"):
        dynamo.reset()
        got = ember.compile(fn, backend=backend)(*args)
        np.testing.assert_allclose(got[0].detach().numpy(), expected[0].detach().numpy(), rtol=1e-5, atol=1e-6)
        for a, b in zip(got[1], expected[1]):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------- inspect.signature
class _Processor:
    def __call__(self, attn, h, scale=1.0, *args, **kwargs):
        return h * scale


class _WithProcessor(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.processor = _Processor()

    def forward(self, x, return_dict=True, **cross_attention_kwargs):
        # diffusers' Attention.forward: keep the keyword arguments the processor accepts
        keys = set(inspect.signature(self.processor.__call__).parameters.keys())
        kw = {k: w for k, w in cross_attention_kwargs.items() if k in keys}
        return self.processor(self, self.lin(x), **kw)


def _positional_helper(a, b=2, *, c):
    return a


def test_inspect_signature_is_folded():
    """``inspect.signature`` of a bound method, a module's forward, a function, a class and a
    module: folded at trace time, one graph (inspect's code broke the graph at every call)."""
    m = _WithProcessor()

    def f(x):
        out = m(x, scale=3.0, unused=1)
        has_rd = "return_dict" in inspect.signature(m.forward).parameters
        var_kw = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in inspect.signature(m.forward).parameters.values())
        required = [p.name for p in inspect.signature(_positional_helper).parameters.values()
                    if p.default is inspect.Parameter.empty]
        return out, has_rd, var_kw, required, len(inspect.signature(_WithProcessor).parameters), \
            len(inspect.signature(m).parameters)

    assert_one_graph(f, ember.randn(2, 3))
    check(f, lambda: (ember.randn(2, 3),))


# ---------------------------------------------------------------- Logger methods added by libraries
@functools.lru_cache(None)
def _warning_once(self, *args, **kwargs):
    self.warning(*args, **kwargs)


def test_logger_warning_once_is_replayed_once():
    """transformers sets ``logging.Logger.warning_once`` (an lru_cache'd function); models call
    ``logger.warning_once(...)`` in forward. It broke the graph ('attribute warning_once of a
    logging.Logger'); now one graph, replayed after it as the real cached method: logged once per
    message, with eager's records."""
    import logging
    logging.Logger.warning_once = _warning_once
    try:
        logger = logging.getLogger("ember.test.s46.warning_once")
        records = []

        class _Keep(logging.Handler):
            def emit(self, r):
                records.append((r.getMessage(), r.funcName, r.lineno, r.levelno))

        handler = _Keep()
        logger.addHandler(handler)
        logger.propagate = False

        def f(x):
            logger.warning_once("`use_cache=True` is incompatible with gradient checkpointing")
            return x * 2

        x = ember.randn(3)
        assert_one_graph(f, x)
        records.clear()
        _warning_once.cache_clear()
        for _ in range(3):
            f(x)
        eager = list(records)
        records.clear()
        _warning_once.cache_clear()
        dynamo.reset()
        cf = ember.compile(f, backend="eager")
        for _ in range(3):
            assert_same(x * 2, cf(x))
        assert records == eager and len(eager) == 1
        logger.removeHandler(handler)
    finally:
        del logging.Logger.warning_once

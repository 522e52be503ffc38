"""Session 34's argument errors: the exception type and text torch raises (computed by calling
torch in the test) for ``F.batch_norm``'s dtype rules and running-buffer pairing, the int-list
methods without sizes, Python's wordings where torch has its own (missing ``dim``, unknown
keywords, the setitem broadcast, ``std(unbiased=, correction=)``, einsum's operand sizes,
masked_fill's broadcast), and a sweep of common methods/functions called with a wrong argument
type, an unknown keyword, or too many positional arguments. (Module-qualified names print as
ember's: ``torch.Size`` is ``ember.Size``.)"""
import itertools

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _outcome(m, fn):
    try:
        r = fn(m)
    except Exception as e:                          # noqa: BLE001 -- compared with torch's
        return type(e).__name__, str(e).replace("torch.", "ember.")
    return "ok", tuple(r.shape) if hasattr(r, "shape") else r


def _same(fn):
    t, e = _outcome(torch, fn), _outcome(ember, fn)
    assert t == e
    return t


# ---------------------------------------------------------------------- F.batch_norm dtypes / buffers
_BN_DT = {"f": "float32", "d": "float64", "h": "float16", "b": "bfloat16", "l": "int64"}


def _bn_call(x, rm, rv, w, b, training, xs, n):
    def call(m):
        gen = np.random.default_rng(len(xs) * 7 + n)
        inp = m.tensor(gen.standard_normal(xs).astype(np.float32)).to(getattr(m, _BN_DT[x]))

        def mk(d, fill):
            return None if d is None else m.full((n,), fill, dtype=getattr(m, _BN_DT[d]))
        r_m, r_v = mk(rm, 0.25), mk(rv, 1.5)
        out = m.nn.functional.batch_norm(inp, r_m, r_v, mk(w, 0.5), mk(b, 0.1), training=training)
        return out.float().sum().item(), *(None if t is None else t.float().sum().item() for t in (r_m, r_v))
    return call


_BN_CASES = list(itertools.product("fdhl", ["f", "d", "h", None], ["f", "d", None], ["f", "d", None], ["f", None],
                                   [True, False]))


@pytest.mark.parametrize("shape", [((4, 3), 3), ((3,), 0), ((4, 3), 2), ((0, 3), 3), ((1, 3), 3)])
def test_batch_norm_dtypes_and_buffer_pairing(shape):
    """Every combination of input / running-buffer / affine dtypes and of given buffers, in
    training and evaluation, on good and bad shapes: torch's error (the mixed-dtype rule, the
    kernel's "expected scalar type", running_mean without running_var, the order of the rank and
    size checks) or its values."""
    xs, n = shape
    for combo in _BN_CASES:
        fn = _bn_call(*combo, xs, n)
        t, e = _outcome(torch, fn), _outcome(ember, fn)
        if t[0] == "ok" and e[0] == "ok":
            np.testing.assert_allclose(np.array(e[1], dtype=float), np.array(t[1], dtype=float), rtol=2e-2,
                                       atol=2e-2, err_msg=str(combo))
        else:
            assert t == e, combo


def test_batch_norm_mixed_half_input_values():
    """A float16/bfloat16 input with float32 statistics (torch's mixed mode): output and updated
    buffers as torch's."""
    for dt in ("float16", "bfloat16"):
        def run(m):
            gen = np.random.default_rng(3)
            x = m.tensor(gen.standard_normal((6, 4)).astype(np.float32) * 2 + 1).to(getattr(m, dt))
            rm, rv = m.tensor(gen.random(4).astype(np.float32)), m.tensor(gen.random(4).astype(np.float32) + 1)
            out = m.nn.functional.batch_norm(x, rm, rv, training=True, momentum=0.3)
            assert out.dtype == getattr(m, dt)
            return np.concatenate([out.float().numpy().ravel(), rm.numpy(), rv.numpy()])
        np.testing.assert_allclose(run(ember), run(torch), rtol=1e-2, atol=1e-2)


def test_instance_norm_buffer_pairing():
    _same(lambda m: m.nn.functional.instance_norm(m.randn(4, 3, 5), m.zeros(3), None))
    _same(lambda m: m.nn.functional.instance_norm(m.randn(4, 3, 5), None, m.ones(3)))


# ---------------------------------------------------------------------- int-list methods without sizes
@pytest.mark.parametrize("call", [
    lambda m: m.randn(2, 3).flip(), lambda m: m.randn(2, 3).tile(), lambda m: m.flip(m.randn(2, 3)),
    lambda m: m.tile(m.randn(2, 3)), lambda m: m.tensor(1.5).expand(), lambda m: m.tensor(1.5).permute(),
    lambda m: m.tensor(1.5).repeat(), lambda m: m.randn(1).reshape(), lambda m: m.randn(1, 1).reshape(),
    lambda m: m.tensor(1.5).reshape(), lambda m: m.permute(m.tensor(1.5)),
    # the explicit empty list: accepted where torch accepts it
    lambda m: m.randn(2, 3).flip(()), lambda m: m.randn(2, 3).tile(()), lambda m: m.flip(m.randn(2, 3), ()),
    lambda m: m.tensor(1.5).expand(()), lambda m: m.tensor(1.5).permute(()), lambda m: m.tensor(1.5).repeat(()),
    lambda m: m.randn(1).reshape(()), lambda m: m.randn(1, 1).reshape([]), lambda m: m.randn(2, 3).repeat(()),
    lambda m: m.tensor(1.5).expand(3), lambda m: m.tensor(1.5).expand([]).add(1)])
def test_int_list_methods_without_sizes(call):
    _same(call)


def test_internal_callers_of_empty_shapes():
    """ember's own code that expands/reshapes/permutes to a possibly empty shape (0-dim operands)
    still works with the public methods refusing no sizes: values as torch's."""
    def run(m):
        g = np.random.default_rng(4)
        a, b = m.tensor(float(g.standard_normal())), m.tensor(g.standard_normal(3).astype(np.float32))
        outs = [m.broadcast_to(a, ()), *m.broadcast_tensors(a, m.tensor(2.0)), m.kron(a, m.tensor(3.0)),
                m.tensordot(a, m.tensor(2.0), dims=0), m.einsum("->", a), m.take_along_dim(b, m.tensor([1, 0]), 0),
                m.nn.functional.mse_loss(a, m.tensor(0.5)), m.diag_embed(b).sum(), m.cartesian_prod(b).sum()]
        return np.array([float(o.sum()) for o in outs])
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- Python's wording -> torch's
@pytest.mark.parametrize("call", [
    lambda m: m.full(foo=1), lambda m: m.full((2,)), lambda m: m.full((2,), 1.0, foo=1), lambda m: m.full(),
    lambda m: m.full((2,), 1.0, 2, 3), lambda m: m.full(size=(2,)), lambda m: m.full((2,), 1.0, size=(2,)),
    lambda m: m.cat([m.ones(2)], foo=1), lambda m: m.cat([m.ones(2)], 0, 1, 2), lambda m: m.stack([m.ones(2)], foo=1),
    lambda m: m.stack([m.ones(2)], 0, 1), lambda m: m.index_put(m.ones(2), (m.tensor([0]),), m.ones(1), foo=1),
    lambda m: m.view_as_complex(m.ones(2, 2), foo=1), lambda m: m.ones(2).prelu(m.ones(1), foo=1),
    lambda m: m.ones(2).polygamma(1, foo=1), lambda m: m.ones(2).type(m.float64, foo=1),
    lambda m: m.ones(2).index_put_((m.tensor([0]),), m.ones(1), foo=1), lambda m: m.ones(2).resize(2, foo=1)])
def test_public_names_in_binding_errors(call):
    """An unknown keyword / too many or missing arguments of a function whose implementation is a
    private entry function: torch's text, naming the public function."""
    assert _same(call)[0] == "TypeError"


def test_renamed_entry_functions_stay_picklable():
    import pickle
    for f in (ember.cat, ember.stack, ember.full, ember.index_put, ember.Tensor.where, ember.Tensor.polygamma,
              ember.Tensor.resize, ember.Tensor.index_put_, ember.view_as_complex):
        assert pickle.loads(pickle.dumps(f)) is f
        assert not f.__qualname__.startswith("_")


@pytest.mark.parametrize("call", [
    lambda m: m.randn(3, 4).__setitem__(0, m.ones(3)),
    lambda m: m.randn(3, 4).__setitem__((slice(None), 0), m.ones(4)),
    lambda m: m.randn(3, 4).__setitem__(slice(0, 2), m.ones(3, 4)),
    lambda m: m.randn(3, 4).__setitem__(0, m.ones(2, 4)),
    lambda m: m.einsum("ij,jk->ik", m.randn(2, 3), m.randn(4, 5)), lambda m: m.einsum("i,i->", m.randn(2), m.randn(3)),
    lambda m: m.einsum("bij,bjk->bik", m.randn(2, 3, 4), m.randn(3, 4, 5)),
    lambda m: m.randn(3, 4).masked_fill(m.ones(3, dtype=m.bool), 0.0),
    lambda m: m.randn(3, 4).masked_fill(m.ones(2, 4, dtype=m.bool), 0.0),
    lambda m: m.masked_fill(m.randn(3, 4), m.ones(3, 1, 2, dtype=m.bool), m.tensor(1.0))])
def test_broadcast_messages(call):
    assert _same(call)[0] == "RuntimeError"


def test_setitem_broadcast_values():
    """The expand before the copy: broadcast assignments and their gradients as torch's."""
    def run(m):
        g = np.random.default_rng(9)
        x = m.tensor(g.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
        v = m.tensor(g.standard_normal(4).astype(np.float32), requires_grad=True)
        w = m.tensor(g.standard_normal((2, 1)).astype(np.float32), requires_grad=True)
        y = x * 1
        y[1:] = v
        y[0, :2] = w[0]
        y[:, 3] = m.tensor(2.5)
        (y * m.arange(12.0).reshape(3, 4)).sum().backward()
        return np.concatenate([y.detach().numpy().ravel(), x.grad.numpy().ravel(), v.grad.numpy(), w.grad.numpy().ravel()])
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------- the sweep
# ~150 common methods/functions: (after the tensor) the arguments of a valid call. Each is called
# (a) with its first non-tensor argument of a wrong type, (b) with an unknown keyword, (c) with
# six positional arguments too many, as a method ("m") and as a function ("f").
_SWEEP = {
 "sum": (0,), "mean": (0,), "prod": (0,), "max": (0,), "min": (0,), "amax": (0,), "amin": (0,), "argmax": (0,), "argmin": (0,),
 "std": (0,), "var": (0,), "norm": (2,), "logsumexp": (0,), "cumsum": (0,), "cumprod": (0,), "cummax": (0,), "cummin": (0,),
 "softmax": (0,), "log_softmax": (0,), "all": (0,), "any": (0,), "median": (0,), "mode": (0,), "nansum": (0,), "count_nonzero": (0,),
 "topk": (2,), "kthvalue": (1,), "sort": (0,), "argsort": (0,), "msort": (), "unique": (), "flatten": (0,), "unflatten": (1, (2, 2)),
 "squeeze": (0,), "unsqueeze": (0,), "transpose": (0, 1), "swapaxes": (0, 1), "movedim": (0, 1), "narrow": (0, 0, 1),
 "select": (0, 1), "chunk": (2,), "split": (2,), "tensor_split": (2,), "roll": (1,), "rot90": (1, (0, 1)), "diagonal": (0,),
 "diag": (0,), "tril": (0,), "triu": (0,), "trace": (), "clamp": (0.0,), "clip": (0.0,), "pow": (2,), "add": (1,), "sub": (1,),
 "mul": (2,), "div": (2,), "remainder": (2,), "fmod": (2,), "floor_divide": (2,), "atan2": ("T",), "maximum": ("T",),
 "minimum": ("T",), "eq": (1,), "ne": (1,), "lt": (1,), "gt": (1,), "le": (1,), "ge": (1,), "lerp": ("T", 0.5), "where": ("B", 0.0),
 "masked_fill": ("B", 0.0), "index_select": (0, "I"), "gather": (1, "I2"), "take": ("I",), "repeat_interleave": (2,),
 "round": (), "abs": (), "exp": (), "log": (), "sqrt": (), "sigmoid": (), "tanh": (), "relu": (), "neg": (), "sign": (),
 "floor": (), "ceil": (), "trunc": (), "frac": (), "reciprocal": (), "rsqrt": (), "sin": (), "cos": (), "erf": (),
 "nan_to_num": (0.0,), "isclose": ("T",), "allclose": ("T",), "equal": ("T",), "dot": (), "matmul": ("T2",), "mm": ("T2",),
 "outer": (), "cross": (), "kron": ("T",), "histc": (4,), "bincount": (), "diff": (1,), "renorm": (2, 0, 1.0),
 "addmm": ("T34", "T44"), "baddbmm": (), "bmm": (), "t": (), "view": (12,), "view_as": ("T",), "reshape_as": ("T",),
 "expand_as": ("T",), "type_as": ("T",), "to": (), "clone": (), "contiguous": (), "detach": (), "numel": (), "dim": (),
 "size": (0,), "stride": (0,), "item": (), "tolist": (), "new_zeros": ((2,),), "new_ones": ((2,),), "new_full": ((2,), 1.0),
 "new_empty": ((2,),), "new_tensor": ([1.0],), "fill_": (1.0,), "zero_": (), "copy_": ("T",), "index_fill": (0, "I", 1.0),
 "scatter": (1, "I2", 1.0), "index_add": (0, "I", "TI"), "masked_select": ("B",), "nonzero": (), "argwhere": (),
 "float": (), "double": (), "half": (), "int": (), "long": (), "bool": (), "requires_grad_": (), "retain_grad": (),
 "logical_and": ("T",), "logical_not": (), "bitwise_not": (), "sgn": (), "square": (), "exp2": (), "expm1": (), "log1p": (),
 "log2": (), "log10": (), "hypot": ("T",), "dist": ("T",), "xlogy": ("T",), "heaviside": ("T",), "nanmean": (0,), "aminmax": (),
 "std_mean": (0,), "var_mean": (0,), "quantile": (0.5,), "nanquantile": (0.5,), "searchsorted": ("T",), "bucketize": ("T",),
 "flip": ((0,),), "fliplr": (), "flipud": (), "tile": ((2,),), "repeat": (2, 1), "expand": (3, 4), "permute": (1, 0),
 "reshape": (12,), "cos_": (), "add_": (1,), "mul_": (2,), "clamp_": (0.0,), "unbind": (0,), "split_with_sizes": ([1, 2],),
 "cumulative_trapezoid": (), "trapezoid": (), "logcumsumexp": (0,), "cdist": ("T",), "tensordot": ("T43", 1), "einsum": (),
 "softplus": (), "gelu": (), "silu": (),
}
_FUNC_ONLY = {"cdist", "tensordot", "einsum", "softplus", "gelu", "silu", "cumulative_trapezoid", "trapezoid", "bucketize"}


def _sweep_arg(m, a):
    return {"T": lambda: m.randn(3, 4), "T2": lambda: m.randn(4, 2), "T34": lambda: m.randn(3, 4),
            "T44": lambda: m.randn(4, 4), "T43": lambda: m.randn(4, 3), "TI": lambda: m.randn(2, 4),
            "B": lambda: m.randn(3, 4) > 0, "I": lambda: m.tensor([0, 2]),
            "I2": lambda: m.zeros(3, 4, dtype=m.int64)}.get(a, lambda: a)() if isinstance(a, str) else a


def _sweep_input(m, name):
    if name == "bincount":
        return m.tensor([0, 1, 1])
    if name in ("dot", "outer", "searchsorted", "msort", "diag"):
        return m.arange(3.0)
    if name == "cross":
        return m.randn(3, 3)
    if name in ("baddbmm", "bmm"):
        return m.randn(2, 3, 3)
    if name == "item":
        return m.tensor(1.5)
    return m.randn(3, 4)


def _sweep_call(name, kind, case):
    def call(m):
        m.manual_seed(0)
        x = _sweep_input(m, name)
        args = [_sweep_arg(m, a) for a in _SWEEP[name]]
        kw = {}
        if case == "type":
            args[0] = "a" if not isinstance(_SWEEP[name][0], str) else 1.5
        elif case == "kw":
            kw = {"foo": 1}
        else:
            args += [1] * 6
        if kind == "m":
            return getattr(x, name)(*args, **kw)
        ns = m.nn.functional if name in ("softplus", "gelu", "silu") else m
        return getattr(ns, name)(x, *args, **kw)
    return call


# the cases where ember's error is torch's (type and text); the others are torch's overload
# parser's "invalid combination of arguments" listings, its per-position argument types for
# methods and functions, and its positional counts without self for methods (see the report)
_SWEEP_MATCHING = """
abs:f:kw abs:f:many add:f:kw add:m:kw add_:m:kw addmm:f:type addmm:m:kw allclose:f:kw allclose:f:many
amax:f:kw amax:f:many amax:m:kw amin:f:kw amin:f:many amin:m:kw aminmax:f:kw aminmax:f:many aminmax:m:kw
argmax:f:kw argmax:f:many argmax:m:kw argmin:f:kw argmin:f:many argmin:m:kw argwhere:f:kw argwhere:f:many
atan2:f:kw atan2:f:many atan2:f:type atan2:m:kw bincount:f:kw bincount:f:many bincount:m:kw bitwise_not:f:kw
bitwise_not:f:many cdist:f:kw cdist:f:many cdist:f:type ceil:f:kw ceil:f:many chunk:f:kw chunk:f:many
chunk:m:kw clone:f:kw clone:f:many clone:m:kw contiguous:m:kw copy_:m:kw cos:f:kw cos:f:many cos_:f:kw
cos_:f:many cross:f:kw cross:f:many cummax:f:kw cummax:f:many cummax:m:kw cummin:f:kw cummin:f:many
cummin:m:kw cumprod:f:kw cumprod:f:many cumprod:m:kw cumsum:f:kw cumsum:f:many cumsum:m:kw detach:f:kw
detach:f:many diag:f:kw diag:f:many diag:m:kw diagonal:f:kw diagonal:f:many diagonal:m:kw diff:f:kw
diff:f:many diff:m:kw dist:f:kw dist:f:many dist:f:type dist:m:kw dot:f:many einsum:f:kw equal:f:kw
equal:f:many erf:f:kw erf:f:many exp2:f:kw exp2:f:many exp:f:kw exp:f:many expand:m:kw expand:m:many
expand:m:type expand_as:m:kw expm1:f:kw expm1:f:many flatten:f:kw flatten:f:many flatten:m:kw flip:f:kw
flip:m:kw flip:m:many flip:m:type fliplr:f:kw fliplr:f:many flipud:f:kw flipud:f:many floor:f:kw floor:f:many
floor_divide:f:kw frac:f:kw frac:f:many gather:f:kw gather:f:many gather:m:kw gelu:f:kw heaviside:f:kw
heaviside:f:many heaviside:f:type heaviside:m:kw histc:f:kw histc:f:many histc:m:kw hypot:f:kw hypot:f:many
hypot:f:type hypot:m:kw index_add:f:kw index_add:f:many index_add:m:kw index_select:f:kw index_select:f:many
index_select:m:kw isclose:f:kw isclose:f:many isclose:f:type isclose:m:kw kron:f:kw kron:f:many kron:f:type
kron:m:kw kthvalue:f:kw kthvalue:f:many kthvalue:m:kw log10:f:kw log10:f:many log1p:f:kw log1p:f:many
log2:f:kw log2:f:many log:f:kw log:f:many log_softmax:f:kw log_softmax:f:many log_softmax:m:kw
logcumsumexp:f:kw logcumsumexp:f:many logcumsumexp:m:kw logical_and:f:kw logical_and:f:many logical_and:f:type
logical_and:m:kw logical_not:f:kw logical_not:f:many logsumexp:f:kw logsumexp:f:many logsumexp:m:kw
masked_select:f:kw masked_select:f:many masked_select:f:type masked_select:m:kw matmul:f:kw matmul:f:many
matmul:f:type matmul:m:kw max:m:kw maximum:f:kw maximum:f:many maximum:f:type maximum:m:kw mean:m:kw
median:f:kw median:m:kw min:m:kw minimum:f:kw minimum:f:many minimum:f:type minimum:m:kw mm:f:type mm:m:kw
mode:f:kw mode:f:many mode:m:kw msort:f:kw msort:f:many mul:f:kw mul:f:many mul:m:kw mul_:m:kw nan_to_num:f:kw
nan_to_num:f:many nan_to_num:m:kw nanmean:f:kw nanmean:f:many nanmean:m:kw nansum:f:kw nansum:f:many
nansum:m:kw neg:f:kw neg:f:many new_empty:m:kw new_ones:m:kw new_zeros:m:kw nonzero:f:kw nonzero:f:many
norm:f:kw norm:f:many norm:f:type norm:m:type numel:f:kw numel:f:many outer:f:many permute:m:kw permute:m:type
prod:f:kw prod:m:kw reciprocal:f:kw reciprocal:f:many relu:f:kw relu:f:many renorm:f:kw renorm:f:many
renorm:m:kw repeat:m:kw repeat:m:many repeat:m:type reshape:m:kw reshape:m:many reshape:m:type reshape_as:m:kw
roll:f:kw roll:f:many roll:m:kw rot90:f:kw rot90:f:many rot90:m:kw rsqrt:f:kw rsqrt:f:many searchsorted:m:kw
searchsorted:m:many searchsorted:m:type select:f:kw select:f:many select:m:kw sgn:f:kw sgn:f:many sigmoid:f:kw
sigmoid:f:many sign:f:kw sign:f:many silu:f:kw silu:f:many sin:f:kw sin:f:many softmax:f:kw softmax:f:many
softmax:m:kw softplus:f:kw softplus:f:many split:f:kw split:f:many split_with_sizes:f:kw
split_with_sizes:f:many split_with_sizes:m:kw sqrt:f:kw sqrt:f:many square:f:kw square:f:many std_mean:m:kw
std_mean:m:many std_mean:m:type sub:f:kw sub:m:kw sum:f:kw sum:m:kw swapaxes:f:kw swapaxes:f:many
swapaxes:m:kw t:f:kw t:f:many take:f:kw take:f:many take:f:type take:m:kw tanh:f:kw tanh:f:many tensordot:f:kw
tensordot:f:many tile:f:kw tile:m:kw tile:m:many tile:m:type topk:f:kw topk:f:many topk:m:kw trace:f:kw
trace:f:many transpose:f:kw transpose:f:many transpose:m:kw tril:f:kw tril:f:many tril:m:kw triu:f:kw
triu:f:many triu:m:kw trunc:f:kw trunc:f:many unbind:f:kw unbind:f:many unbind:m:kw unflatten:f:kw
unflatten:f:many unsqueeze:f:kw unsqueeze:f:many unsqueeze:m:kw var_mean:m:kw var_mean:m:many var_mean:m:type
view:m:kw view:m:many view_as:m:kw zero_:f:kw zero_:f:many
""".split()


@pytest.mark.parametrize("case", _SWEEP_MATCHING)
def test_argument_error_sweep(case):
    name, kind, which = case.split(":")
    _same(_sweep_call(name, kind, which))

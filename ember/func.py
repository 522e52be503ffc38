"""``ember.func``: composable function transforms, like ``torch.func``.

* ``grad`` / ``grad_and_value`` / ``vjp`` / ``jvp`` / ``linearize`` / ``jacrev`` /
  ``jacfwd`` / ``hessian``: built on ``ember.autograd.grad`` with
  ``create_graph=True``, so they compose (``grad(grad(f))``, ``jacfwd(jacrev(f))``,
  ``vmap(grad(f))``). Forward mode (``jvp``, ``jacfwd``) uses the double-vjp
  identity: ``g(u) = J^T u`` is linear in ``u``, so the vjp of ``g`` with the
  tangent ``t`` as cotangent is ``J t``.
* ``vmap``: runs ``func`` once per slice in a Python loop and stacks the results
  (see its docstring).
* ``functional_call`` / ``stack_module_state``: run a module with swapped-in
  parameters, and stack the state of several same-class modules for ensembling.

How a transform treats its inputs: each differentiated tensor is replaced inside
the transform by a fresh tensor of its own -- a detached copy that requires grad
when the input takes no part in an outer graph, else an alias view of the input
(so an enclosing transform, or ordinary autograd, can still differentiate through
the result). Results are returned connected to the outer graph only where they
really depend on it; otherwise they come back as plain tensors, as torch.func's
unwrapped outputs do. ``.grad`` of the caller's tensors is never touched.
"""
from __future__ import annotations

import collections
import functools
import sys
from typing import Any, Callable

from .nn.utils.stateless import functional_call as _stateless_functional_call
from .tensor import Tensor

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "linearize",
           "stack_module_state", "vjp", "vmap"]


def _api():
    from .ops import api
    return api


# Pytrees (tuples, lists, dicts, namedtuples, registered nodes) come from ember.utils._pytree.
from .utils._pytree import (TreeSpec, _broadcast_to_and_flatten, tree_flatten, tree_map,  # noqa: E402,F401
                            tree_unflatten)


# --------------------------------------------------------------------------------------------
# Shared plumbing of the autodiff transforms
# --------------------------------------------------------------------------------------------

def _check_argnum(argnum, num_args):
    if not isinstance(argnum, int) or isinstance(argnum, bool):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if 0 <= argnum < num_args:
        return argnum
    if -num_args <= argnum < 0:
        return argnum + num_args
    raise RuntimeError(f"Got argnum={argnum}, but only {num_args} positional inputs")


def _normalize_argnums(argnums, num_args):
    if not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if isinstance(argnums, int):
        return _check_argnum(argnums, num_args)
    argnums = tuple(_check_argnum(a, num_args) for a in argnums)
    if len(argnums) == 0:
        raise RuntimeError("argnums must be non-empty")
    if len(set(argnums)) != len(argnums):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return argnums


def _slice_argnums(args, argnums):
    """The differentiated part of ``args``: ``args[i]`` for an int, a tuple for a tuple."""
    if isinstance(argnums, int):
        return args[argnums]
    return tuple(args[i] for i in argnums)


def _replace_argnums(args, new, argnums):
    args = list(args)
    if isinstance(argnums, int):
        args[argnums] = new
    else:
        for i, v in zip(argnums, new):
            args[i] = v
    return tuple(args)


class _Level:
    """One transform's bookkeeping: the fresh tensors it made differentiable, and whether
    grad mode was on outside it (if not, nothing it returns may carry a graph)."""

    def __init__(self):
        from .autograd import is_grad_enabled
        self.outer_grad = is_grad_enabled()
        self.fresh = []

    def make_differentiable(self, x):
        if not isinstance(x, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
        if self.outer_grad and x.requires_grad:
            y = x.view_as(x)        # own node, still connected to the outer graph
        else:
            y = x.detach().requires_grad_(True)
        self.fresh.append(y)
        return y

    def _reaches_outer(self, t):
        """Does ``t``'s graph reach a tensor requiring grad other than this level's fresh ones?"""
        from .autograd.graph import AccumulateGrad, gradient_edge
        fresh = {id(f) for f in self.fresh}
        edge = gradient_edge(t)
        if edge is None:
            return False
        seen = set()
        stack = [edge[0]]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, AccumulateGrad):
                if id(node.variable) not in fresh:
                    return True
                continue
            stack.extend(e[0] for e in node.next_edges if e is not None)
        return False

    def unwrap(self, x):
        if isinstance(x, Tensor) and x.requires_grad:
            if not self.outer_grad or not self._reaches_outer(x):
                return x.detach()
        return x

    def unwrap_tree(self, tree, tensors_only=False):
        def one(x):
            if tensors_only and not isinstance(x, Tensor):
                raise RuntimeError(f"Expected tensors, got unsupported type {type(x)}")
            return self.unwrap(x)
        return tree_map(one, tree)


def _autograd_grad(outputs, inputs, grad_outputs=None, retain_graph=True, create_graph=True):
    """``autograd.grad`` that tolerates outputs which do not depend on the inputs (zeros)."""
    from .autograd import grad as _grad
    api = _api()
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs or not inputs:
        return tuple(api.zeros_like(x) for x in inputs)
    outs, gos = zip(*pairs)
    gos = tuple(api.ones_like(o) if g is None else g for o, g in pairs)
    got = _grad(list(outs), list(inputs), list(gos), retain_graph=retain_graph, create_graph=create_graph,
                allow_unused=True)
    return tuple(api.zeros_like(x) if g is None else g for g, x in zip(got, inputs))


def _split_aux(out, has_aux, api_name):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api_name}: output of function f should be a tuple: (output, aux) "
                           "if has_aux is True")
    return out


def _check_tensor_outputs(flat, api_name):
    if (len(flat) == 1 and flat[0] is None) or len(flat) < 1:
        raise RuntimeError(f"{api_name}: Expected f to be a function that has non-empty output (got output = {flat})")
    for o in flat:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{api_name}: expected f(*primals) to return only tensors, "
                               f"got unsupported type {type(o)}")


def _torch_dtype(dt):
    return f"torch.{dt.name}" if hasattr(dt, "name") else str(dt)


# --------------------------------------------------------------------------------------------
# grad / grad_and_value
# --------------------------------------------------------------------------------------------

def _grad_and_value_impl(func, argnums, has_aux, args, kwargs):
    from .autograd import enable_grad
    lvl = _Level()
    with enable_grad():
        argnums = _normalize_argnums(argnums, len(args))
        flat, spec = tree_flatten(_slice_argnums(args, argnums))
        flat = [lvl.make_differentiable(x) for x in flat]
        args = _replace_argnums(args, tree_unflatten(flat, spec), argnums)
        output = func(*args, **kwargs)
        output, aux = _split_aux(output, has_aux, "grad_and_value(f)(*args)")
        if not isinstance(output, Tensor):
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(output)}")
        if output.dim() != 0:
            raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor "
                               f"with {output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
        grads = _autograd_grad([output], flat, create_graph=True)
        grads = tree_unflatten([lvl.unwrap(g) for g in grads], spec)
        output = lvl.unwrap(output)
        if has_aux:
            aux = lvl.unwrap_tree(aux, tensors_only=True)
    return grads, ((output, aux) if has_aux else output)


def grad_and_value(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """Returns a function computing ``(gradient, value)`` of ``func`` w.r.t. the args at
    ``argnums`` (an int or a tuple of ints; each arg may be a pytree of tensors). With
    ``has_aux=True`` ``func`` returns ``(output, aux)`` and the result is
    ``(gradient, (output, aux))``. ``func`` must return a scalar tensor."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _grad_and_value_impl(func, argnums, has_aux, args, kwargs)
    return wrapper


def grad(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """Returns a function computing the gradient of scalar-valued ``func`` w.r.t. the args at
    ``argnums``; ``(gradient, aux)`` with ``has_aux=True``. Composes: ``grad(grad(f))``,
    ``vmap(grad(f))``, ``jacrev(grad(f))``. Runs under grad mode even inside ``no_grad``
    (an inner ``no_grad`` in ``func`` is respected)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = _grad_and_value_impl(func, argnums, has_aux, args, kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


# --------------------------------------------------------------------------------------------
# vjp / jacrev
# --------------------------------------------------------------------------------------------

def _vjp_with_argnums(func, args, argnums, has_aux):
    from .autograd import enable_grad, is_grad_enabled
    lvl = _Level()
    with enable_grad():
        if argnums is None:
            flat, spec = tree_flatten(args)
            flat = [lvl.make_differentiable(x) for x in flat]
            args = tree_unflatten(flat, spec)
        else:
            argnums = _normalize_argnums(argnums, len(args))
            flat, spec = tree_flatten(_slice_argnums(args, argnums))
            flat = [lvl.make_differentiable(x) for x in flat]
            args = _replace_argnums(args, tree_unflatten(flat, spec), argnums)
        out = func(*args)
        out, aux = _split_aux(out, has_aux, "vjp(f, *primals)")
        if has_aux:
            aux = lvl.unwrap_tree(aux, tensors_only=True)
        flat_out, out_spec = tree_flatten(out)
        _check_tensor_outputs(flat_out, "vjp(f, *primals)")
        for o in flat_out:
            if not o.dtype.is_floating_point:
                raise RuntimeError("vjp(f, ...): All outputs of f must be floating-point or complex Tensors, "
                                   f"got Tensor with dtype {_torch_dtype(o.dtype)}")
        results = tree_unflatten([lvl.unwrap(o) for o in flat_out], out_spec)

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        if create_graph is None:
            create_graph = is_grad_enabled()
        flat_ct, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function. cotangents: {ct_spec.pprint()}, "
                               f"primal output: {out_spec.pprint()}")
        call = _Level()
        call.fresh = lvl.fresh
        with enable_grad():
            gs = _autograd_grad(flat_out, flat, flat_ct, retain_graph=retain_graph, create_graph=create_graph)
            gs = [call.unwrap(g) for g in gs]
        return tree_unflatten(gs, spec)

    return results, vjp_fn, aux, flat_out, flat, spec, out_spec


def vjp(func: Callable, *primals, has_aux: bool = False):
    """``(output, vjp_fn)`` (``(output, vjp_fn, aux)`` with ``has_aux``): ``vjp_fn(cotangents)``,
    with cotangents structured like ``output``, returns a tuple with one vector-Jacobian
    product per primal (pytrees of tensors allowed). ``vjp_fn`` can be called many times."""
    results, vjp_fn, aux, *_ = _vjp_with_argnums(func, primals, None, has_aux)
    if has_aux:
        return results, vjp_fn, aux
    return results, vjp_fn


def jacrev(func: Callable, argnums=0, *, has_aux: bool = False, chunk_size=None,
           _preallocate_and_copy: bool = False) -> Callable:
    """Jacobian of ``func`` w.r.t. the args at ``argnums`` by reverse mode: one vjp per output
    element (rows of the standard basis; ``chunk_size`` is accepted and validated, ember
    always loops). Result structure as torch.func.jacrev: the output pytree, each leaf holding
    the jacobian(s) of shape ``out.shape + in.shape`` (a tuple for tuple ``argnums``)."""
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args):
        api = _api()
        norm = _normalize_argnums(argnums, len(args))
        output, vjp_fn, aux, flat_out, _, _, out_spec = _vjp_with_argnums(func, args, norm, has_aux)
        flat_primals, primals_spec = tree_flatten(_slice_argnums(args, norm) if isinstance(norm, tuple)
                                                  else (args[norm],))
        numels = [o.numel() for o in flat_out]
        rows = [[] for _ in flat_primals]
        for j, o in enumerate(flat_out):
            for k in range(numels[j]):
                basis = [api.zeros_like(oo) for oo in flat_out]
                basis[j].reshape(-1)[k] = 1
                got = tree_flatten(vjp_fn(tree_unflatten(basis, out_spec)))[0]
                for p, g in enumerate(got):
                    rows[p].append(g)
        per_out = []
        for j, o in enumerate(flat_out):
            start = sum(numels[:j])
            jacs = []
            for p, prim in enumerate(flat_primals):
                r = rows[p][start:start + numels[j]]
                jac = (api.stack(r) if r else api.zeros((0,) + tuple(prim.shape), dtype=prim.dtype))
                jacs.append(jac.reshape(tuple(o.shape) + tuple(prim.shape)))
            tree = tree_unflatten(jacs, primals_spec)
            per_out.append(tree[0] if isinstance(argnums, int) else tree)
        result = tree_unflatten(per_out, out_spec)
        return (result, aux) if has_aux else result

    return wrapper


# --------------------------------------------------------------------------------------------
# jvp / linearize / jacfwd / hessian (forward mode by double vjp)
# --------------------------------------------------------------------------------------------

_JVP = "jvp(f, primals, tangents)"


def _rng_state():
    from .random import get_rng_state
    return bytes(get_rng_state()._data.tobytes())


_RANDOM_ERROR = ("vmap: called random operation while in randomness error mode. Please either use the "
                 "'same' or 'different' randomness flags on vmap or perform the randomness operation out of vmap")


def _linearize_impl(func, args, argnums, has_aux, api_name=_JVP, randomness=None):
    """Run ``func`` once and build ``g(u) = J^T u`` against dummy cotangents ``u``.
    Returns (output, jvp(flat_tangents) -> flat output tangents, aux, flat primals, out_spec)."""
    from .autograd import enable_grad
    api = _api()
    lvl = _Level()
    with enable_grad():
        if argnums is None:
            flat, spec = tree_flatten(args)
            flat = [lvl.make_differentiable(x) for x in flat]
            args = tree_unflatten(flat, spec)
        else:
            flat, spec = tree_flatten(_slice_argnums(args, argnums) if isinstance(argnums, tuple)
                                      else (args[argnums],))
            flat = [lvl.make_differentiable(x) for x in flat]
            new = tree_unflatten(flat, spec)
            args = _replace_argnums(args, new if isinstance(argnums, tuple) else new[0], argnums)
        before = _rng_state() if randomness == "error" else None
        out = func(*args)
        if before is not None and _rng_state() != before:
            raise RuntimeError(_RANDOM_ERROR)
        out, aux = _split_aux(out, has_aux, api_name)
        if has_aux:
            aux = lvl.unwrap_tree(aux, tensors_only=True)
        flat_out, out_spec = tree_flatten(out)
        _check_tensor_outputs(flat_out, api_name)
        diff = [i for i, o in enumerate(flat_out) if o.requires_grad and o.dtype.is_floating_point]
        us = [api.zeros_like(flat_out[i]).requires_grad_(True) for i in diff]
        lvl.fresh.extend(us)
        g = _autograd_grad([flat_out[i] for i in diff], flat, us, create_graph=True) if diff else ()
        live = [(k, gk) for k, gk in enumerate(g) if gk.requires_grad]
        outputs = tree_unflatten([lvl.unwrap(o) for o in flat_out], out_spec)

    def push(flat_tangents, strict=False):
        call = _Level()
        call.fresh = lvl.fresh
        call.outer_grad = call.outer_grad and lvl.outer_grad
        with enable_grad():
            res = [None] * len(flat_out)
            if live:
                ts = [flat_tangents[k].to(gk.dtype) for k, gk in live]
                jt = _autograd_grad([gk for _, gk in live], us, ts, create_graph=True)
                for i, j in zip(diff, jt):
                    res[i] = j
            for i, o in enumerate(flat_out):
                if res[i] is None:
                    if strict:
                        raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is "
                                           "independent of the inputs. This is not allowed with strict=True.")
                    res[i] = api.zeros_like(o)
            return [call.unwrap(r) for r in res]

    return outputs, push, aux, flat, spec, out_spec


def _check_tangents(flat_primals, flat_tangents):
    for p, t in zip(flat_primals, flat_tangents):
        if tuple(t.shape) != tuple(p.shape):
            raise RuntimeError("Trying to set a forward gradient that has a different size than that of the "
                               "original Tensor, this is not supported. Tensor is of size "
                               f"{list(p.shape)} while the given forward gradient is of size {list(t.shape)}.")


def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J @ tangents)`` (plus ``aux`` with ``has_aux``). ``primals`` is a tuple
    (of pytrees of tensors), ``tangents`` has the same structure. Computed by the double-vjp
    trick on ember's reverse-mode autograd (no dual numbers)."""
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{_JVP}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals).")
    flat_p, p_spec = tree_flatten(primals)
    flat_t, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(f"{_JVP}: Expected primals and tangents to have the same python structure. For example, "
                           f"if primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
                           f"{p_spec} and tangents with structure {t_spec}")
    for flat, name in ((flat_p, "primals"), (flat_t, "tangents")):
        if not flat:
            raise RuntimeError(f"{_JVP}: Expected {name} to contain at least one Tensor.")
        for x in flat:
            if not isinstance(x, Tensor):
                raise RuntimeError(f"{_JVP}: Expected {name} to only contain Tensors, got {type(x)}")
    _check_tangents(flat_p, flat_t)
    out, push, aux, _, _, out_spec = _linearize_impl(func, primals, None, has_aux)
    tang = tree_unflatten(push(flat_t, strict=strict), out_spec)
    return (out, tang, aux) if has_aux else (out, tang)


def linearize(func: Callable, *primals):
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` returns ``J @ tangents``. ``func`` runs
    once; each ``jvp_fn`` call is one backward pass through the retained double-vjp graph."""
    out, push, _, flat_p, p_spec, out_spec = _linearize_impl(func, primals, None, False,
                                                             api_name="linearize(f, *primals)")

    def jvp_fn(*tangents):
        flat_t, t_spec = tree_flatten(tangents)
        if t_spec != p_spec:
            raise RuntimeError(f"Expected the tangents {t_spec} to have the same argspec as the primals {p_spec}")
        for i, (p, t) in enumerate(zip(flat_p, flat_t)):
            if tuple(t.shape) != tuple(p.shape):
                raise RuntimeError(f"tangent:{i} with shape {t.shape} in flattened pytree doesn't match the shape "
                                   f"{p.shape} of the corresponding primal.")
            if t.dtype != p.dtype:
                raise RuntimeError(f"tangent:{i} with dtype {t.dtype} in flattened pytree doesn't match the dtype "
                                   f"{p.dtype} of the corresponding primal.")
        return tree_unflatten(push(flat_t), out_spec)

    return out, jvp_fn


def jacfwd(func: Callable, argnums=0, has_aux: bool = False, *, randomness: str = "error") -> Callable:
    """Jacobian of ``func`` w.r.t. the args at ``argnums`` by forward mode: one jvp per input
    element (columns of the standard basis), all pushed through one retained double-vjp
    graph, so ``func`` runs once. Same result structure as :func:`jacrev`. ``randomness``:
    "error" raises if ``func`` draws random numbers; "same"/"different" allow it (ember's one
    call means every column sees the same draw)."""
    _check_randomness_arg(randomness)

    @functools.wraps(func)
    def wrapper(*args):
        api = _api()
        norm = _normalize_argnums(argnums, len(args))
        out, push, aux, flat_p, p_spec, out_spec = _linearize_impl(
            func, args, norm, has_aux, randomness=randomness)
        flat_out = tree_flatten(out)[0]
        numels = [p.numel() for p in flat_p]
        cols = []     # cols[k] = flat output tangents for basis vector k
        for i, p in enumerate(flat_p):
            for k in range(numels[i]):
                ts = [api.zeros_like(q) for q in flat_p]
                ts[i].reshape(-1)[k] = 1
                cols.append(push(ts))
        per_out = []
        for j, o in enumerate(flat_out):
            jacs, start = [], 0
            for i, p in enumerate(flat_p):
                c = [cols[k][j] for k in range(start, start + numels[i])]
                start += numels[i]
                jac = api.stack(c, dim=-1) if c else api.zeros(tuple(o.shape) + (0,), dtype=o.dtype)
                jacs.append(jac.reshape(tuple(o.shape) + tuple(p.shape)))
            tree = tree_unflatten(jacs, p_spec)
            per_out.append(tree[0] if isinstance(argnums, int) else tree)
        result = tree_unflatten(per_out, out_spec)
        return (result, aux) if has_aux else result

    return wrapper


def hessian(func: Callable, argnums=0) -> Callable:
    """Hessian of ``func`` w.r.t. the args at ``argnums``: ``jacfwd(jacrev(func, argnums), argnums)``."""
    return jacfwd(jacrev(func, argnums), argnums)


# --------------------------------------------------------------------------------------------
# vmap
# --------------------------------------------------------------------------------------------

def _get_name(func):
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_get_name(func.func)}, ...)"
    return repr(func)


def _check_randomness_arg(randomness):
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")


def _process_batched_inputs(in_dims, args, func):
    name = _get_name(func)
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
                         f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if len(args) == 0:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                         "trying to vmap over a function with no inputs. The latter is unsupported.")
    flat_args, args_spec = tree_flatten(args)
    flat_in_dims = _broadcast_to_and_flatten(in_dims, args_spec)
    if flat_in_dims is None:
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                         f"structure of `inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but inputs has "
                         f"structure {args_spec}.")
    for i, (arg, d) in enumerate(zip(flat_args, flat_in_dims)):
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but "
                             "in_dim must be either an integer dimension or None.")
        if isinstance(d, int) and not isinstance(arg, Tensor):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but the "
                             f"input is of type {type(arg)}. We cannot vmap over non-Tensor arguments, please use "
                             "None as the respective in_dim")
        if d is not None and (d < -arg.dim() or d >= arg.dim()):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some input, but "
                             f"that input is a Tensor of dimensionality {arg.dim()} so expected in_dim to satisfy "
                             f"-{arg.dim()} <= in_dim < {arg.dim()}.")
        if d is not None and d < 0:
            flat_in_dims[i] = d % arg.dim()
    sizes = [a.size(d) for a, d in zip(flat_args, flat_in_dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return sizes[0], flat_in_dims, flat_args, args_spec


def _check_out_dims(out_dims, func):
    def ok(x):
        if x is None or (isinstance(x, int) and not isinstance(x, bool)):
            return
        raise ValueError(f"vmap({_get_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a "
                         "python collection of ints representing where in the outputs the vmapped dimension "
                         "should appear.")
    for leaf in tree_flatten(out_dims)[0]:
        ok(leaf)


def _flat_out_dims(first, out_dims, func):
    flat, spec = tree_flatten(first)

    def incompatible():
        raise ValueError(f"vmap({_get_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible "
                         f"with the structure of `outputs`. out_dims has structure {tree_flatten(out_dims)[1]} but "
                         f"outputs has structure {spec}.")
    if isinstance(first, Tensor):
        if isinstance(out_dims, int) or out_dims is None:
            return [out_dims], spec
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            return list(out_dims), spec
        incompatible()
    got = _broadcast_to_and_flatten(out_dims, spec)
    if got is None:
        incompatible()
    return got, spec


def _same_value(a, b):
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a is b or (tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype
                          and bool(a.detach().equal(b.detach())))
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return False
    try:
        return bool(a == b)
    except Exception:
        return a is b


def _vmap_loop(func, batch_size, flat_in_dims, flat_args, args_spec, out_dims, randomness, kwargs):
    from .random import get_rng_state, set_rng_state
    api = _api()
    name = _get_name(func)
    probe = batch_size == 0
    saved = get_rng_state() if (randomness == "same" or probe) else None
    outs = []
    for i in range(max(batch_size, 1)):
        if probe:   # no slice to call func on: run it once on zero-filled slices, for output shapes only
            sl = [a if d is None else api.zeros(tuple(s for k, s in enumerate(a.shape) if k != d), dtype=a.dtype)
                  for a, d in zip(flat_args, flat_in_dims)]
        else:
            sl = [a if d is None else a.select(d, i) for a, d in zip(flat_args, flat_in_dims)]
        if randomness == "same":
            set_rng_state(saved)
        before = _rng_state() if randomness == "error" else None
        out = func(*tree_unflatten(sl, args_spec), **kwargs)
        if before is not None and _rng_state() != before:
            raise RuntimeError(_RANDOM_ERROR)
        outs.append(out)
    if probe:
        set_rng_state(saved)
    flat_dims, out_spec = _flat_out_dims(outs[0], out_dims, func)
    flats = []
    for o in outs:
        f, s = tree_flatten(o)
        if s != out_spec:
            raise ValueError(f"vmap({name}, ...): `{name}` returned outputs of different structure for different "
                             f"slices ({out_spec} vs {s}); ember's vmap runs `{name}` once per slice and needs "
                             "every slice to return the same structure.")
        flats.append(f)
    result = []
    for j, d in enumerate(flat_dims):
        leaves = [f[j] for f in flats]
        if d is None:
            if not probe and not all(_same_value(leaves[0], x) for x in leaves[1:]):
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            result.append(leaves[0])
            continue
        for x in leaves:
            if not isinstance(x, Tensor):
                raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(x)}. "
                                 "Did you mean to set out_dims= to None for output?")
        if probe:
            n = leaves[0].dim() + 1
            if not -n <= d < n:
                raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
            shape = list(leaves[0].shape)
            shape.insert(d % n, 0)
            result.append(api.empty(tuple(shape), dtype=leaves[0].dtype))
        else:
            result.append(api.stack(leaves, dim=d))
    return tree_unflatten(result, out_spec)


def vmap(func: Callable, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None) -> Callable:
    """Vectorizing map, with torch.func.vmap's interface and validation.

    ``in_dims`` (int, or a tuple with one entry per positional argument, each a prefix pytree
    of that argument; ``None`` = not mapped) says which dimension of each input is mapped;
    ``out_dims`` (int, None, or a pytree prefix of the outputs) where the mapped dimension goes
    in each output. Keyword arguments are passed through unmapped.

    ember's vmap is honest, not batched: it calls ``func`` once per index along the mapped
    dimension, on slices (``select``) of the mapped inputs, and stacks the results along
    ``out_dims``. Results equal torch's; the speed is that of the Python loop (``chunk_size``
    is accepted and validated but changes nothing). Anything composes: nested
    ``vmap(vmap(f))``, per-sample gradients ``vmap(grad(loss), in_dims=(None, 0, 0))``,
    ensembling with :func:`stack_module_state` and :func:`functional_call`. The result is
    differentiable w.r.t. the mapped inputs by ordinary autograd.

    In-place ops on a mapped input write into a slice (a view) of that input, as in torch.
    Differences from torch's batching: in-place ops on an *unmapped* input are not rejected
    (they simply run once per slice); ``out_dims=None`` checks that every slice returned an
    equal value instead of tracking batchedness; data-dependent Python control flow works
    (each slice is a real tensor).

    ``randomness``: "error" (default) raises torch's error if ``func`` changes the global RNG
    state (checked around each call); "different" lets each slice draw its own numbers;
    "same" restores the RNG state before each slice, so all slices draw the same numbers.
    """
    _check_randomness_arg(randomness)
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        _check_out_dims(out_dims, func)
        batch_size, flat_in_dims, flat_args, args_spec = _process_batched_inputs(in_dims, args, func)
        lib = sys.modules.get("ember.library._extensions")     # a custom op's register_vmap rule
        if lib is not None and lib.vmap_rule_for(func) is not None:
            return lib.vmap_with_rule(func, batch_size, flat_in_dims, flat_args, args_spec, out_dims, randomness,
                                      kwargs)
        return _vmap_loop(func, batch_size, flat_in_dims, flat_args, args_spec, out_dims, randomness, kwargs)

    return wrapped


# --------------------------------------------------------------------------------------------
# Modules: functional_call, stack_module_state
# --------------------------------------------------------------------------------------------

def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """Call ``module`` with its parameters/buffers replaced by the given tensors.
    ``parameter_and_buffer_dicts`` is a dict, or a tuple/list of dicts (e.g. the
    ``(params, buffers)`` of :func:`stack_module_state`) whose keys must not repeat."""
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, (list, tuple)):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts = collections.Counter(k for d in parameter_and_buffer_dicts for k in d)
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
        merged = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, "
                         f"but got {type(parameter_and_buffer_dicts)}")
    return _stateless_functional_call(module, merged, () if args is None else args, kwargs, tie_weights=tie_weights,
                                      strict=strict)


def _stacked_leaf(tensors, name):
    api = _api()
    all_rg = all(t.requires_grad for t in tensors)
    if not all_rg and any(t.requires_grad for t in tensors):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    out = api.stack([t.detach() for t in tensors])
    return out.requires_grad_(True) if all_rg else out


def stack_module_state(models):
    """``(params, buffers)``: dicts name -> the models' tensors stacked along a new dim 0 (new
    leaves, requiring grad where the originals do), for ``vmap`` over an ensemble."""
    models = list(models)
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    typ = type(models[0])
    if not all(type(m) is typ for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    params = {k: _stacked_leaf([p[k] for p in all_params], k) for k in all_params[0]}
    all_buffers = [dict(m.named_buffers()) for m in models]
    buffers = {k: _stacked_leaf([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers


from ._func_functionalize import functionalize, replace_all_batch_norm_modules_  # noqa: E402

__all__ += ["functionalize", "replace_all_batch_norm_modules_"]


def debug_unwrap(tensor, *, recurse=True):
    """The tensor under a transform's wrapper, for debugging (torch.func.debug_unwrap). ember's
    transforms (grad, vmap, jvp) run on plain tensors -- vmap loops over the batch -- so there is
    no wrapper: the tensor itself."""
    return tensor


from ._rearrange import rearrange  # noqa: E402 - einops-style rearrange (torch.func.rearrange)

__all__ += ["rearrange"]

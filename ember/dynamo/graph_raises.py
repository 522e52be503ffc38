"""Whether a captured graph can raise when it runs, judged from its nodes.

Why. A graph over code in a user try block (or one whose print/log calls are replayed after
it) is re-run eagerly from the frame's start when it raises, so the handler sees the exception
(``OutputGraph.compile``). That re-run is only sound if the graph changed nothing outside, so
such frames refused every in-place op on an input (``_check_rerunnable``): in 400 programs of
the bytecode fuzzer, 78 ran eagerly for it -- typically ``x * k`` inside the try block and
``a[0] += t`` after it. Most graphs cannot raise at all: with static shapes every shape error
was raised while tracing (the trace runs each op on example values), and what is left to fail
at run time depends on values -- an index out of range, an integer division by zero, a
singular matrix, a negative integer power, an assertion. A graph made only of ops that have
no such failure needs no re-run, so nothing needs refusing.

The judgement is an allowlist (an op not listed may raise): float and integer arithmetic
without rounding division or powers (``div`` takes a ``rounding_mode``; ``/`` is listed), comparisons and logic, reductions, views, matmul, the common
``nn.functional`` layers, and indexing whose index holds no tensor. A graph with symbolic
sizes may raise anywhere a size check was not turned into a guard, so it always counts as
raising. An exception no op raises (KeyboardInterrupt during the graph) is not re-run for.
"""
from __future__ import annotations

import operator

_SAFE_OPERATORS = (operator.add, operator.sub, operator.mul, operator.truediv, operator.neg, operator.pos,
                   operator.matmul, operator.lt, operator.le, operator.gt, operator.ge, operator.eq,
                   operator.ne, operator.and_, operator.or_, operator.xor, operator.invert, operator.abs,
                   operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.iand,
                   operator.ior, operator.ixor)

# ember.<name> / Tensor.<name>: no failure that depends on values (shapes are static)
_SAFE_NAMES = frozenset("""
    add sub subtract mul multiply true_divide neg negative abs absolute sign
    exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan sinh cosh tanh asin acos atan atan2
    sigmoid relu relu_ gelu silu mish softplus erf erfc reciprocal square
    maximum minimum fmax fmin clamp clamp_ clamp_min clamp_max clip lerp addcmul addcdiv
    lt le gt ge eq ne logical_and logical_or logical_xor logical_not bitwise_and bitwise_or
    bitwise_xor bitwise_not isnan isinf isfinite where masked_fill masked_fill_ nan_to_num
    sum mean amax amin max min prod std var norm logsumexp softmax log_softmax cumsum cumprod
    any all argmax argmin
    matmul mm bmm t transpose permute reshape view view_as flatten unflatten squeeze unsqueeze
    expand expand_as contiguous clone detach flip roll tril triu chunk split unbind movedim
    stack cat concat concatenate hstack vstack
    zeros ones full zeros_like ones_like full_like empty empty_like arange linspace rand randn
    rand_like randn_like float double half int long bool to type_as
    add_ sub_ mul_ neg_ abs_ exp_ log_ sqrt_ sigmoid_ tanh_ fill_ zero_ copy_ lerp_
    addcmul_ addcdiv_ maximum_ minimum_
""".split())

# ... safe when every argument after the tensor is a constant (a tensor ``start`` of ``narrow``
# is checked only when the graph runs)
_SAFE_WITH_CONSTANT_ARGS = frozenset("narrow select diagonal as_strided unfold".split())
# ``getattr(x, name)`` nodes
_SAFE_ATTRS = frozenset("T mT H mH data real shape dtype device".split())

# ember.nn.functional.<name>
_SAFE_FUNCTIONAL = frozenset("""
    linear conv1d conv2d conv3d layer_norm batch_norm group_norm rms_norm relu gelu silu tanh
    sigmoid softmax log_softmax dropout leaky_relu elu hardtanh mish softplus normalize
    max_pool2d avg_pool2d adaptive_avg_pool2d adaptive_max_pool2d pad mse_loss l1_loss
    scaled_dot_product_attention
""".split())


def _ember_module(mod: str) -> bool:
    return mod == "ember" or mod.startswith("ember.")


def _safe_function(target) -> bool:
    if target in _SAFE_OPERATORS:
        return True
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", "")
    if not _ember_module(mod):
        return False
    if mod.startswith("ember.nn.functional"):
        return name in _SAFE_FUNCTIONAL
    if mod.startswith("ember.dynamo.variables.ctx") or mod.startswith("ember.fx.experimental"):
        return name in ("_set_grad_enabled", "sym_size")
    return name in _SAFE_NAMES


def _holds_node(x) -> bool:
    from ..fx import Node
    if isinstance(x, Node):
        return True
    if isinstance(x, (tuple, list)):
        return any(_holds_node(i) for i in x)
    if isinstance(x, slice):
        return any(_holds_node(i) for i in (x.start, x.stop, x.step))
    return False


def _constant_args(node) -> bool:
    return not _holds_node(list(node.args[1:])) and not _holds_node(list(node.kwargs.values()))


def may_raise(graph, symbolic: bool) -> bool:
    """Whether running ``graph`` (an fx Graph) could raise for some input values."""
    if symbolic:
        return True
    for node in graph.nodes:
        if node.op == "call_function":
            if node.target in (operator.getitem, operator.setitem):
                # an index of ints, slices, None and Ellipsis is checked against static shapes
                # while tracing; a tensor index (or a traced scalar) is checked only at run time
                if len(node.args) < 2 or _holds_node(node.args[1]):
                    return True
                continue
            if node.target is getattr:
                if len(node.args) == 2 and node.args[1] in _SAFE_ATTRS:
                    continue
                return True
            name = getattr(node.target, "__name__", "")
            if not (_safe_function(node.target)
                    or (name in _SAFE_WITH_CONSTANT_ARGS and _ember_module(getattr(node.target, "__module__", ""))
                        and _constant_args(node))):
                return True
        elif node.op == "call_method":
            if not (node.target in _SAFE_NAMES
                    or (node.target in _SAFE_WITH_CONSTANT_ARGS and _constant_args(node))):
                return True
        elif node.op not in ("placeholder", "output", "get_attr"):
            return True
    return False

"""Views, reshapes, indexing, concatenation, constant creation, and size arithmetic.

Sizes that ``dynamic_shapes`` made symbolic reach these ops as ``SymValue``s (1-element int64
tensors computed by ``Shape`` from the inputs), so a reshape to ``(batch, -1)`` still reads the
batch size at run time."""
from __future__ import annotations

import operator

import numpy as np

from ._context import SymValue, Unavailable, Value, is_static
from ._dtypes import numpy_dtype, onnx_type
from ._registry import arg, register

_INT64_MAX = np.iinfo(np.int64).max


def _sizes(size):
    if isinstance(size, (list, tuple)) and len(size) == 1 and isinstance(size[0], (list, tuple)):
        return list(size[0])
    return list(size) if isinstance(size, (list, tuple)) else [size]


# ---- size arithmetic
@register("sym_size")
def _sym_size(ctx, args, kwargs):
    x, d = args[0], arg(args, kwargs, 1, "dim")
    d = ctx.norm_dim(int(d), x.rank)
    hint = ctx.node.meta.get("sym_val")
    name = ctx.op("Shape", [x.name], start=d, end=d + 1, name=f"{ctx.node.name}")
    return SymValue(name, hint)


_SYM_OPS = {"add": "Add", "sub": "Sub", "mul": "Mul", "floordiv": None, "mod": "Mod"}


def _sym_binary(op_name):
    def handler(ctx, args, kwargs):
        a, b = args
        if not isinstance(a, SymValue) and not isinstance(b, SymValue):
            return getattr(operator, op_name)(a, b)
        ta, tb = ctx.int_tensor(a), ctx.int_tensor(b)
        if op_name == "floordiv":     # sizes are >= 0 here, where ONNX's truncating Div is floor
            return SymValue(ctx.op("Div", [ta, tb]))
        return SymValue(ctx.op(_SYM_OPS[op_name], [ta, tb]))
    return handler


for _k in _SYM_OPS:
    register(f"operator.{_k}")(_sym_binary(_k))


@register("sym_max", "sym_min")
def _sym_minmax(ctx, args, kwargs):
    a, b = args
    op = "Max" if ctx.node.target.__name__ == "sym_max" else "Min"
    return SymValue(ctx.op(op, [ctx.int_tensor(a), ctx.int_tensor(b)]))


@register("operator.getitem")
def _getitem(ctx, args, kwargs):
    seq, i = args
    if not isinstance(seq, (list, tuple)):
        raise ctx.unsupported(f"getitem on {type(seq).__name__}")
    item = seq[i]
    if isinstance(item, Unavailable):
        return item
    if isinstance(item, Value):
        return item.name      # re-wrapped with this node's dtype and shape
    return item


# ---- reshapes and views
@register("view", "_unsafe_view", "reshape", "_reshape_alias", "view_copy")
def _reshape(ctx, args, kwargs):
    x = args[0]
    size = _sizes(args[1]) if len(args) > 1 else _sizes(kwargs.get("size", kwargs.get("shape")))
    if isinstance(size, list) and size and isinstance(size[0], type(x.dtype)):
        raise ctx.unsupported("view(dtype) (a bit reinterpretation)")
    allowzero = 1 if any(is_static(s) and int(s) == 0 for s in size) else None
    return ctx.op("Reshape", [x.name, ctx.ints(size)], allowzero=allowzero)


@register("flatten")
def _flatten(ctx, args, kwargs):
    x = args[0]
    start = ctx.norm_dim(arg(args, kwargs, 1, "start_dim", 0), max(x.rank, 1))
    end = ctx.norm_dim(arg(args, kwargs, 2, "end_dim", -1), max(x.rank, 1))
    out = ctx.out_shape
    return ctx.op("Reshape", [x.name, _shape_of_output(ctx, x, out, keep=(start, end))])


def _shape_of_output(ctx, x, out, keep):
    """A shape tensor for ``out`` (static parts constant, one -1 for the flattened run)."""
    start, end = keep
    dims = []
    for i in range(start):
        dims.append(out[i] if is_static(out[i]) else 0)       # 0: copy the input's dim (allowzero=0)
    dims.append(-1)
    for i in range(end + 1, x.rank):
        d = out[start + 1 + (i - end - 1)]
        dims.append(int(d) if is_static(d) else 0)
    return ctx.b.int64s(dims)


@register("permute")
def _permute(ctx, args, kwargs):
    x = args[0]
    dims = _sizes(args[1:] if len(args) > 2 else (args[1] if len(args) > 1 else kwargs["dims"]))
    perm = [ctx.norm_dim(int(d), x.rank) for d in dims]
    out = ctx.op("Transpose", [x.name], perm=perm)
    if perm == [1, 0]:
        ctx.transposed_of[out] = x.name
    return out


@register("transpose", "swapaxes", "swapdims")
def _transpose(ctx, args, kwargs):
    x = args[0]
    d0 = ctx.norm_dim(arg(args, kwargs, 1, "dim0"), x.rank)
    d1 = ctx.norm_dim(arg(args, kwargs, 2, "dim1"), x.rank)
    perm = list(range(x.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    out = ctx.op("Transpose", [x.name], perm=perm)
    if x.rank == 2 and d0 != d1:
        ctx.transposed_of[out] = x.name
    return out


@register("t", "numpy_T")
def _t(ctx, args, kwargs):
    x = args[0]
    if x.rank < 2:
        return ctx.op("Identity", [x.name])
    out = ctx.op("Transpose", [x.name], perm=list(range(x.rank))[::-1])
    if x.rank == 2:
        ctx.transposed_of[out] = x.name     # addmm reads it as Gemm(transB=1); then this node is dead
    return out


@register("unsqueeze")
def _unsqueeze(ctx, args, kwargs):
    x = args[0]
    d = ctx.norm_dim(int(arg(args, kwargs, 1, "dim")), x.rank + 1)
    return ctx.op("Unsqueeze", [ctx.tensor(x), ctx.b.int64s([d])])


@register("squeeze")
def _squeeze(ctx, args, kwargs):
    x = args[0]
    dim = arg(args, kwargs, 1, "dim")
    dims = range(x.rank) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    # torch leaves dims whose size is not 1 alone
    axes = [ctx.norm_dim(int(d), x.rank) for d in dims]
    axes = [d for d in axes if is_static(x.shape[d]) and int(x.shape[d]) == 1]
    if not axes:
        return ctx.op("Identity", [x.name])
    return ctx.op("Squeeze", [x.name, ctx.b.int64s(axes)])


@register("expand", "expand_copy", "broadcast_to")
def _expand(ctx, args, kwargs):
    x = args[0]
    size = _sizes(args[1]) if len(args) > 1 else _sizes(kwargs["size"])
    # -1 keeps the input's size; ONNX's bidirectional broadcast does that with a 1
    size = [1 if is_static(s) and int(s) == -1 else s for s in size]
    return ctx.op("Expand", [ctx.tensor(x), ctx.ints(size)])


@register("expand_as")
def _expand_as(ctx, args, kwargs):
    return ctx.op("Expand", [ctx.tensor(args[0]), ctx.op("Shape", [args[1].name])])


@register("cat", "concat", "concatenate")
def _cat(ctx, args, kwargs):
    tensors = args[0]
    dim = arg(args, kwargs, 1, "dim", 0)
    dt = ctx.out_dtype
    rank = len(ctx.out_shape)
    parts = [t for t in tensors if not (isinstance(t, Value) and t.rank == 1 and is_static(t.shape[0])
                                        and int(t.shape[0]) == 0 and rank != 1)]
    return ctx.op("Concat", [ctx.tensor(t, dt) for t in parts], axis=ctx.norm_dim(dim, rank))


@register("stack")
def _stack(ctx, args, kwargs):
    tensors = args[0]
    dim = ctx.norm_dim(arg(args, kwargs, 1, "dim", 0), len(ctx.out_shape))
    dt = ctx.out_dtype
    axes = ctx.b.int64s([dim])
    return ctx.op("Concat", [ctx.op("Unsqueeze", [ctx.tensor(t, dt), axes]) for t in tensors], axis=dim)


def _static_split(ctx, x, dim, sizes):
    axes = ctx.b.int64s([dim])
    return ctx.op("Split", [x.name, ctx.b.int64s(sizes)], axis=dim, outputs=len(sizes)) if len(sizes) > 1 \
        else [ctx.op("Identity", [x.name])]


def _used_outputs(node) -> int:
    """How many leading outputs of a multi-output node the graph reads (``getitem`` users)."""
    idx = [u.args[1] for u in node.users if u.op == "call_function" and u.target is operator.getitem]
    if len(idx) != len(node.users):
        return -1
    return max(idx) + 1 if idx else 0


def _dynamic_split(ctx, name, x, dim, spec):
    """``split`` along a dimension whose size is symbolic: each piece is a ``Slice`` from the sum
    of the sizes before it (ints, or symbolic sizes computed by the graph), the last one clamped
    by ``Slice`` to the end -- so the pieces are right for every size of that dimension the
    program's guards allow (the number of pieces was fixed by the trace)."""
    if name not in ("split", "split_with_sizes"):
        raise ctx.unsupported(f"{name} along a dynamic dimension (the number of pieces depends on the size)")
    m = _used_outputs(ctx.node)
    if m < 0:
        raise ctx.unsupported(f"{name} along a dynamic dimension whose result is used other than by indexing")
    axes = ctx.b.int64s([dim])
    end_of_dim = ctx.b.int64s([_INT64_MAX])

    def times(k, i):
        if isinstance(k, (int, np.integer)):
            return int(k) * i
        return ctx.op("Mul", [ctx.int_tensor(k), ctx.b.int64s([i])], name="split_start")

    def plus(a, b):
        if isinstance(a, int) and isinstance(b, (int, np.integer)):
            return a + int(b)
        return ctx.op("Add", [_as_int_tensor(ctx, a), ctx.int_tensor(b)], name="split_start")
    starts = []
    if isinstance(spec, (list, tuple)):
        if m > len(spec):
            raise ctx.unsupported(f"{name}: piece {m - 1} of {len(spec)} requested")
        acc = 0
        for sz in list(spec)[:m + 1]:
            starts.append(acc)
            acc = plus(acc, sz)
        starts.append(acc)
    else:
        starts = [times(spec, i) for i in range(m + 1)]
    outs = []
    for i in range(m):
        st, en = _as_int_tensor(ctx, starts[i]), _as_int_tensor(ctx, starts[i + 1]) if i + 1 < len(starts) \
            else end_of_dim
        outs.append(ctx.op("Slice", [x.name, st, en, axes], name=f"{ctx.node.name}_{i}"))
    return [Value(o, x.dtype, ()) for o in outs]


def _as_int_tensor(ctx, v):
    """A 1-element int64 tensor for an int, a SymValue or an ONNX name already holding one."""
    if isinstance(v, str):
        return v
    return ctx.int_tensor(v)


@register("split", "split_with_sizes", "chunk", "tensor_split", "unbind")
def _split(ctx, args, kwargs):
    name = ctx.node.target.__name__
    x = args[0]
    dim_default = 0
    dim = ctx.norm_dim(arg(args, kwargs, 2 if name != "unbind" else 1, "dim", dim_default), x.rank)
    n = x.shape[dim]
    if not is_static(n):
        return _dynamic_split(ctx, name, x, dim, arg(args, kwargs, 1, "split_size_or_sections",
                                                     kwargs.get("split_sizes", kwargs.get("chunks"))))
    n = int(n)
    if name == "unbind":
        outs = _static_split(ctx, x, dim, [1] * n)
        axes = ctx.b.int64s([dim])
        return [ctx.op("Squeeze", [o, axes]) for o in outs]
    spec = arg(args, kwargs, 1, "split_size_or_sections", kwargs.get("split_sizes", kwargs.get("chunks")))
    if name == "chunk":
        step = -(-n // int(spec)) if int(spec) else n
        sizes = [min(step, n - i) for i in range(0, n, step)] if n else [0]
    elif name == "tensor_split":
        if isinstance(spec, int):
            q, r = divmod(n, spec)
            sizes = [q + 1] * r + [q] * (spec - r)
        else:
            bounds = [0] + [min(max(int(i), 0), n) for i in spec] + [n]
            sizes = [max(b - a, 0) for a, b in zip(bounds, bounds[1:])]
    elif isinstance(spec, int):
        sizes = [min(spec, n - i) for i in range(0, n, spec)] if n else [0]
    else:
        sizes = [int(s) for s in spec]
    return _static_split(ctx, x, dim, sizes)


@register("slice")
def _slice(ctx, args, kwargs):
    x = args[0]
    dim = ctx.norm_dim(arg(args, kwargs, 1, "dim", 0), x.rank)
    start = arg(args, kwargs, 2, "start", None)
    end = arg(args, kwargs, 3, "end", None)
    step = arg(args, kwargs, 4, "step", 1)
    start = 0 if start is None else start
    end = _INT64_MAX if end is None or (is_static(end) and int(end) >= _INT64_MAX) else end
    return ctx.op("Slice", [x.name, ctx.ints([start]), ctx.ints([end]), ctx.b.int64s([dim]),
                            ctx.b.int64s([int(step)])])


@register("narrow")
def _narrow(ctx, args, kwargs):
    x, dim, start, length = args[0], args[1], args[2], args[3]
    dim = ctx.norm_dim(dim, x.rank)
    st = ctx.int_tensor(start)
    en = ctx.op("Add", [st, ctx.int_tensor(length)])
    return ctx.op("Slice", [x.name, st, en, ctx.b.int64s([dim])])


@register("select")
def _select(ctx, args, kwargs):
    x = args[0]
    dim = ctx.norm_dim(arg(args, kwargs, 1, "dim"), x.rank)
    index = arg(args, kwargs, 2, "index")
    idx = ctx.tensor(index, None) if isinstance(index, SymValue) else ctx.b.const(int(index), np.int64, "index")
    return ctx.op("Gather", [x.name, idx], axis=dim)


@register("index", "_index")
def _index(ctx, args, kwargs):
    import ember
    x, indices = args[0], list(arg(args, kwargs, 1, "indices"))
    pos = [i for i, t in enumerate(indices) if t is not None]
    for i in pos:
        t = indices[i]
        if not isinstance(t, Value):
            raise ctx.unsupported(f"index with a {type(t).__name__} index")
        if t.dtype == ember.bool or t.dtype == ember.uint8:
            raise ctx.unsupported("boolean-mask indexing (data-dependent output shape)")
    if len(pos) == 1:
        return ctx.op("Gather", [x.name, ctx.tensor(indices[pos[0]], ember.int64)], axis=pos[0])
    if pos != list(range(len(pos))):
        raise ctx.unsupported("advanced indexing with several index tensors that do not start at dim 0 "
                              "or are not adjacent")
    # several index tensors on the leading dims: broadcast them, stack on a last axis, GatherND
    idx = [ctx.tensor(indices[i], ember.int64) for i in pos]
    shape = None
    for t in idx:
        s = ctx.op("Shape", [t])
        shape = s if shape is None else ctx.op("Shape", [ctx.op("Expand", [ctx.op("ConstantOfShape", [shape]),
                                                                           s])])
    last = ctx.b.int64s([-1])
    stacked = ctx.op("Concat", [ctx.op("Unsqueeze", [ctx.op("Expand", [t, shape]), last]) for t in idx], axis=-1)
    return ctx.op("GatherND", [x.name, stacked])


@register("index_select")
def _index_select(ctx, args, kwargs):
    import ember
    x, dim, index = args[0], args[1], args[2]
    return ctx.op("Gather", [x.name, ctx.tensor(index, ember.int64)], axis=ctx.norm_dim(dim, x.rank))


@register("tril", "triu")
def _tril(ctx, args, kwargs):
    x = args[0]
    k = arg(args, kwargs, 1, "diagonal", 0)
    upper = 1 if ctx.node.target.__name__ == "triu" else 0
    return ctx.op("Trilu", [x.name, ctx.b.const(int(k), np.int64, "diagonal")], upper=upper)


@register("flip")
def _flip(ctx, args, kwargs):
    x = args[0]
    dims = [ctx.norm_dim(int(d), x.rank) for d in _sizes(arg(args, kwargs, 1, "dims"))]
    n = len(dims)
    return ctx.op("Slice", [x.name, ctx.b.int64s([-1] * n), ctx.b.int64s([-_INT64_MAX] * n), ctx.b.int64s(dims),
                            ctx.b.int64s([-1] * n)])


@register("repeat")
def _repeat(ctx, args, kwargs):
    x = args[0]
    reps = _sizes(args[1:] if len(args) > 2 else args[1])
    t = x.name
    if len(reps) > x.rank:
        t = ctx.op("Reshape", [t, ctx.ints([1] * (len(reps) - x.rank) + list(x.shape))])
    return ctx.op("Tile", [t, ctx.ints(reps)])


@register("constant_pad_nd", "pad")
def _pad(ctx, args, kwargs):
    x = args[0]
    pad = list(arg(args, kwargs, 1, "pad"))
    mode = kwargs.get("mode", "constant") if ctx.node.target.__name__ == "pad" else "constant"
    value = arg(args, kwargs, 2, "value", 0) if ctx.node.target.__name__ == "constant_pad_nd" \
        else (kwargs.get("value") or (args[3] if len(args) > 3 else 0))
    if mode != "constant":
        mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(mode)
        if mode is None:
            raise ctx.unsupported(f"pad mode {kwargs.get('mode')!r}")
    n = len(pad) // 2
    begins, ends = [0] * x.rank, [0] * x.rank
    for i in range(n):     # torch lists (last dim begin, end), (second last ...) ...
        d = x.rank - 1 - i
        begins[d], ends[d] = pad[2 * i], pad[2 * i + 1]
    ins = [x.name, ctx.ints(begins + ends)]
    if mode == "constant":
        ins.append(ctx.tensor(value if value is not None else 0, x.dtype))
    return ctx.op("Pad", ins, mode=mode)


# ---- constants and creation
def _fill(ctx, size, value):
    dt = ctx.out_dtype
    if all(is_static(s) for s in size):
        return ctx.b.const(np.full([int(s) for s in size], value, dtype=numpy_dtype(dt)), numpy_dtype(dt),
                           ctx.node.name)
    from onnx import numpy_helper
    fill = numpy_helper.from_array(np.asarray([value], dtype=numpy_dtype(dt)))
    return ctx.op("ConstantOfShape", [ctx.ints(size)], value=fill)


@register("full", "new_full")
def _full(ctx, args, kwargs):
    if ctx.node.target.__name__ == "new_full":
        args = args[1:]
    size, value = _sizes(args[0] if args else kwargs["size"]), arg(args, kwargs, 1, "fill_value")
    if not isinstance(value, (bool, int, float)):
        raise ctx.unsupported(f"full with a fill value of type {type(value).__name__}")
    return _fill(ctx, size, value)


@register("zeros", "ones", "empty", "new_zeros", "new_ones", "new_empty", "empty_strided")
def _zeros(ctx, args, kwargs):
    name = ctx.node.target.__name__
    if name.startswith("new_"):
        args = args[1:]
    size = _sizes(args[0] if len(args) == 1 or name == "empty_strided" else args) if args \
        else _sizes(kwargs["size"])
    return _fill(ctx, size, 1 if name.endswith("ones") else 0)


@register("zeros_like", "ones_like", "full_like", "empty_like")
def _like(ctx, args, kwargs):
    name = ctx.node.target.__name__
    x = args[0]
    value = {"zeros_like": 0, "ones_like": 1, "empty_like": 0}.get(name)
    if value is None:
        value = arg(args, kwargs, 1, "fill_value")
    return _fill(ctx, list(ctx.out_shape) if all(is_static(s) for s in x.shape) else
                 [SymValue(ctx.op("Shape", [x.name], start=i, end=i + 1)) if not is_static(s) else int(s)
                  for i, s in enumerate(x.shape)], value)


@register("arange")
def _arange(ctx, args, kwargs):
    if len(args) >= 2:
        start, end = args[0], args[1]
        step = arg(args, kwargs, 2, "step", 1)
    else:
        start, end = 0, args[0] if args else kwargs["end"]
        step = kwargs.get("step", 1)
    dt = ctx.out_dtype
    if all(isinstance(v, (int, float)) for v in (start, end, step)):
        n = int(ctx.out_shape[0])
        return ctx.b.const(start + step * np.arange(n, dtype=np.float64), numpy_dtype(dt), ctx.node.name)
    return ctx.op("Range", [ctx.tensor(start, dt), ctx.tensor(end, dt), ctx.tensor(step, dt)])


@register("iota")
def _iota(ctx, args, kwargs):
    """``[start + i * step for i in range(length)]`` (arange with a symbolic length)."""
    length, start, step = args[0], arg(args, kwargs, 1, "start", 0), arg(args, kwargs, 2, "step", 1)
    dt = ctx.out_dtype
    if is_static(length):
        return ctx.b.const(start + step * np.arange(int(length), dtype=np.float64), numpy_dtype(dt), ctx.node.name)
    import ember
    n = ctx.tensor(length, ember.int64)
    idx = ctx.op("Range", [ctx.b.const(0, np.int64, "zero"), n, ctx.b.const(1, np.int64, "one")])
    vals = ctx.op("Cast", [idx], to=onnx_type(dt))
    if step != 1:
        vals = ctx.op("Mul", [vals, ctx.tensor(step, dt)])
    if start != 0:
        vals = ctx.op("Add", [vals, ctx.tensor(start, dt)])
    return vals

"""``torch.nn.functional`` names ember lacked: ``linear_cross_entropy`` (with its chunked path),
``conv_tbc``, ``grouped_mm`` / ``scaled_mm`` / ``scaled_grouped_mm``, the ``GRID_SAMPLE_*``
mode tables and the ``has_torch_function*`` / ``handle_torch_function`` re-exports.

Why ``linear_cross_entropy`` has a chunked path: an LLM head's logits ``(tokens, vocab)`` are the
largest activation of the model. With ``options`` the batch is processed in chunks; each chunk's
logits are made, turned into the loss and its gradients, and dropped, so the full logits tensor
never exists -- the gradients are computed during the forward pass and only scaled in backward.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import warnings

from .. import types as _t

__all__ = ["linear_cross_entropy", "LinearCrossEntropyOptions", "conv_tbc", "grouped_mm", "scaled_mm",
           "scaled_grouped_mm", "ScalingType", "SwizzleType", "GRID_SAMPLE_INTERPOLATION_MODES",
           "GRID_SAMPLE_PADDING_MODES", "has_torch_function", "has_torch_function_unary",
           "has_torch_function_variadic", "handle_torch_function", "native_channel_shuffle"]

GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def _ember():
    import ember
    return ember


def __getattr__(name):
    if name in ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
                "handle_torch_function"):
        from .. import overrides
        return getattr(overrides, name)
    if name == "native_channel_shuffle":
        from .._torch_level_gaps import native_channel_shuffle
        return native_channel_shuffle
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------- linear_cross_entropy
_ACC_POLICIES = ("auto", "accurate", "balanced", "compact")


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """How ``linear_cross_entropy`` chunks the batch (``options=None`` is the reference path).

    ``batch_chunk_size``: rows per chunk (None: decided by ``chunking_method``, else one chunk);
    ``chunking_method``: ``"auto"``, ``"aspect_ratio"`` or ``"aspect_ratio:N"`` (a chunk's logits
    as large as the input, divided by N), or None; ``acc_policy`` / ``acc_dtype``: the precision
    of the accumulations (ember accumulates float16/bfloat16 inputs in float32 under every policy:
    its matmuls compute in float32 anyway); ``allow_retain_graph``: keep the precomputed gradients
    for a second backward."""

    allow_retain_graph: bool = False
    batch_chunk_size: "int | None" = None
    chunking_method: "str | None" = "auto"
    acc_policy: str = "auto"
    acc_dtype: "object | None" = None

    def __post_init__(self):
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = self.chunking_method.partition(":")
            if not sep:
                factor = "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (self.batch_chunk_size is None
                or (isinstance(self.batch_chunk_size, int) and self.batch_chunk_size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {self.batch_chunk_size!r}")
        if self.acc_dtype is not None and self.acc_dtype not in (_t.float16, _t.bfloat16, _t.float32, _t.float64):
            raise ValueError(f"acc_dtype must be one of {{None, ember.float16, ember.bfloat16, ember.float32, "
                             f"ember.float64}}, got {self.acc_dtype!r}. Pass acc_dtype=None to let the op pick "
                             f"automatically.")

    def _chunk_size(self, num_batches, in_features, num_classes):
        """Rows per chunk for this call (torch's resolution of ``"auto"`` and the aspect ratio)."""
        method = self.chunking_method
        if method == "auto":
            method = None if self.batch_chunk_size is not None else "aspect_ratio:2"
        size = num_batches if self.batch_chunk_size is None else min(self.batch_chunk_size, num_batches)
        if method is not None:
            factor = int(method.split(":", 1)[1]) if ":" in method else 1
            inc = -(-num_classes // in_features)
            target = -(-num_batches // inc)
            pow2 = 1 << (target - 1).bit_length() if target > 0 else 1
            computed = min(pow2 // factor, num_batches)
            if self.batch_chunk_size is not None and self.batch_chunk_size != computed:
                raise ValueError(f"batch_chunk_size (={self.batch_chunk_size}) and chunking_method ('{method}') "
                                 f"give different chunk sizes ({self.batch_chunk_size} vs {computed}); set one "
                                 f"of them")
            size = computed
        return max(int(size), 1)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``; with ``options``
    the batch is processed in chunks and the full logits are never materialised."""
    ember = _ember()
    from . import functional as F
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.dim()}")
    num_batches = tuple(input.shape[:-1])
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("expected equal input and linear_weight last dimensions (in_features), "
                           f"got {input.shape[-1]} and {linear_weight.shape[-1]}, respectively")
    num_classes = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not num_batches:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} requires "
                           f"batched input, (N, {in_features}), got unbatched input with shape "
                           f"{tuple(input.shape)}")
    logits_shape = (*num_batches, num_classes, *out_features)
    probabilities = tuple(target.shape) == logits_shape
    if probabilities and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    ignore_index = ignore_index if ignore_index is not None else -100
    chunkable = (not out_features and reduction in ("mean", "sum", "none") and label_smoothing == 0.0
                 and target.dtype is ember.int64)
    if options is not None and not chunkable:
        warnings.warn("linear_cross_entropy: ``options`` ignored; chunked path needs reduction in "
                      "{'mean','sum','none'}, label_smoothing == 0, target.dtype == int64, out_features == (). Got "
                      f"reduction={reduction!r}, label_smoothing={label_smoothing}, target.dtype={target.dtype}, "
                      f"out_features={out_features}, tracing=False, linear_bias.shape="
                      f"{tuple(linear_bias.shape) if linear_bias is not None else None}.", stacklevel=2)
    if options is not None and chunkable:
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        tg = target if batched else target.unsqueeze(0)
        chunk = options._chunk_size(x.shape[0], in_features, num_classes)
        res = _chunked(x, linear_weight, tg, linear_bias, weight, reduction, ignore_index, chunk,
                       options.allow_retain_graph)
        return res if batched else res.squeeze(0)
    w2 = linear_weight
    b2 = linear_bias
    if out_features:
        w2 = linear_weight.reshape((math.prod(out_features, start=num_classes), in_features))
        if linear_bias is not None:
            b2 = linear_bias.reshape(math.prod(out_features, start=num_classes))
    logits = F.linear(input, w2, b2).reshape(logits_shape)
    return F.cross_entropy(logits, target, weight=weight, reduction=reduction, ignore_index=ignore_index,
                           label_smoothing=label_smoothing)


def _chunk_pass(x, w, b, tg, weight, ignore_index, acc, want_grads):
    """One chunk: (per-row losses, per-row class weights (0 where ignored), and -- when
    ``want_grads`` -- d(sum of weighted losses)/d(logits) for the chunk), in ``acc`` precision."""
    ember = _ember()
    logits = x.to(acc) @ w.to(acc).t()
    if b is not None:
        logits = logits + b.to(acc)
    lse = ember.logsumexp(logits, 1)
    valid = tg != ignore_index
    safe = ember.where(valid, tg, ember.zeros_like(tg))
    picked = logits.gather(1, safe.unsqueeze(1)).squeeze(1)
    cw = weight.to(acc)[safe] if weight is not None else ember.ones(tg.shape, dtype=acc)
    cw = ember.where(valid, cw, ember.zeros_like(cw))
    loss = (lse - picked) * cw
    glogits = None
    if want_grads:
        p = ember.softmax(logits, 1)
        onehot = ember.zeros_like(p).scatter_(1, safe.unsqueeze(1), 1.0)
        glogits = (p - onehot) * cw.unsqueeze(1)
    return loss, cw, glogits


def _chunked(x, w, tg, b, weight, reduction, ignore_index, chunk, allow_retain_graph):
    ember = _ember()
    from ..autograd import Function

    acc = ember.float32 if x.dtype in (ember.float16, ember.bfloat16) else x.dtype
    n = x.shape[0]

    class _LinearCrossEntropyChunked(Function):
        @staticmethod
        def forward(ctx, x, w, b):
            with ember.no_grad():
                want = reduction != "none"
                need_x, need_w = x.requires_grad, w.requires_grad
                need_b = b is not None and b.requires_grad
                losses, total_w = [], ember.zeros((), dtype=acc)
                gx = ember.zeros(x.shape, dtype=acc) if want and need_x else None
                gw = ember.zeros(w.shape, dtype=acc) if want and need_w else None
                gb = ember.zeros(b.shape, dtype=acc) if want and need_b else None
                for s in range(0, n, chunk):
                    xs, ts = x[s:s + chunk], tg[s:s + chunk]
                    loss, cw, gl = _chunk_pass(xs, w, b, ts, weight, ignore_index, acc, want)
                    losses.append(loss)
                    total_w = total_w + cw.sum()
                    if want:
                        if gx is not None:
                            gx[s:s + chunk] = gl @ w.to(acc)
                        if gw is not None:
                            gw += gl.t() @ xs.to(acc)
                        if gb is not None:
                            gb += gl.sum(0)
                per_row = ember.cat(losses) if losses else ember.zeros((0,), dtype=acc)
                if reduction == "none":
                    ctx.save_for_backward(x, w, b if b is not None else ember.zeros(0))
                    ctx.has_b = b is not None
                    return per_row.to(x.dtype)
                scale = 1.0 / total_w if reduction == "mean" else ember.ones((), dtype=acc)
                out = per_row.sum() * scale
                ctx.grads = tuple(g * scale if g is not None else None for g in (gx, gw, gb))
                ctx.dtypes = (x.dtype, w.dtype, b.dtype if b is not None else None)
                ctx.retain = allow_retain_graph
                return out.to(x.dtype)

        @staticmethod
        def backward(ctx, grad):
            if reduction == "none":
                x, w, b = ctx.saved_tensors
                b = b if ctx.has_b else None
                gx = ember.zeros(x.shape, dtype=acc)
                gw = ember.zeros(w.shape, dtype=acc)
                gb = ember.zeros(b.shape, dtype=acc) if b is not None else None
                with ember.no_grad():
                    for s in range(0, n, chunk):
                        xs, ts = x[s:s + chunk], tg[s:s + chunk]
                        _, _, gl = _chunk_pass(xs, w, b, ts, weight, ignore_index, acc, True)
                        gl = gl * grad[s:s + chunk].to(acc).unsqueeze(1)
                        gx[s:s + chunk] = gl @ w.to(acc)
                        gw += gl.t() @ xs.to(acc)
                        if gb is not None:
                            gb += gl.sum(0)
                return gx.to(x.dtype), gw.to(w.dtype), (gb.to(b.dtype) if gb is not None else None)
            if ctx.grads is None:
                raise RuntimeError("linear_cross_entropy: the chunked path's gradients were consumed by a previous "
                                   "backward; pass LinearCrossEntropyOptions(allow_retain_graph=True) to backward "
                                   "twice")
            gx, gw, gb = ctx.grads
            if not ctx.retain:
                ctx.grads = None
            g = grad.to(acc)
            return tuple(None if t is None else (t * g).to(dt) for t, dt in zip((gx, gw, gb), ctx.dtypes))

    return _LinearCrossEntropyChunked.apply(x, w, b)


# ---------------------------------------------------------------------- conv_tbc
def conv_tbc(input, weight, bias, pad=0):
    """fairseq's (time, batch, channels) 1-d convolution: ``ember.conv_tbc`` (ember/ops/top_level_gaps.py)."""
    from ..ops.top_level_gaps import conv_tbc as _conv_tbc
    return _conv_tbc(input, weight, bias, pad)


# ---------------------------------------------------------------------- grouped / scaled matmuls
def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None):
    """A matmul per group (Mixture-of-Experts layers): 3-d x 3-d is a batched matmul; with a 2-d
    operand, ``offs`` (int32 cumulative ends) cuts it into groups -- the rows of a 2-d ``mat_a``
    (against ``mat_b[g]``), the columns of a 2-d ``mat_b`` (against ``mat_a[g]``), or the shared
    contraction dim when both are 2-d (one (M, N) result per group)."""
    ember = _ember()
    a, b = mat_a, mat_b
    if a.dim() not in (2, 3):
        raise RuntimeError("mat_a has to be 2 or 3d")
    if b.dim() not in (2, 3):
        raise RuntimeError("mat_b has to be 2 or 3d")
    for name, m in (("mat_a", a), ("mat_b", b)):
        if m.dtype not in (ember.float32, ember.bfloat16, ember.float16):
            raise RuntimeError(f"Expected {name} to be Float32, BFloat16 or Float16 matrix, got {m.dtype.legacy_name}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"Expected mat_a and mat_b to have the same dtype, got {a.dtype} and {b.dtype}")
    if bias is not None:
        raise RuntimeError("Bias not supported yet")
    if out_dtype is not None and out_dtype is not a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError("contraction dimension of mat_a and mat_b must match")
    both3d = a.dim() == 3 and b.dim() == 3
    if (offs is None) != both3d:
        raise RuntimeError("Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d")
    if both3d:
        if a.shape[0] != b.shape[0]:
            raise RuntimeError("batch sizes of mat_a and mat_b must match")
        return ember.matmul(a, b)
    if offs.dtype is not ember.int32 or offs.dim() != 1:
        raise RuntimeError("Offsets have to be int32")
    ends = [int(v) for v in offs.tolist()]
    starts = [0] + ends[:-1]
    if a.dim() == 2 and b.dim() == 3:              # rows of mat_a per group
        if len(ends) != b.shape[0]:
            raise RuntimeError(f"offs must have one entry per group of mat_b ({b.shape[0]}), got {len(ends)}")
        parts = [a[s:e] @ b[g] for g, (s, e) in enumerate(zip(starts, ends))]
        rest = a.shape[0] - (ends[-1] if ends else 0)
        if rest > 0:
            parts.append(ember.zeros((rest, b.shape[2]), dtype=a.dtype))
        return ember.cat(parts, 0)
    if a.dim() == 3 and b.dim() == 2:              # columns of mat_b per group
        if len(ends) != a.shape[0]:
            raise RuntimeError(f"offs must have one entry per group of mat_a ({a.shape[0]}), got {len(ends)}")
        parts = [a[g] @ b[:, s:e] for g, (s, e) in enumerate(zip(starts, ends))]
        rest = b.shape[1] - (ends[-1] if ends else 0)
        if rest > 0:
            parts.append(ember.zeros((a.shape[1], rest), dtype=a.dtype))
        return ember.cat(parts, 1)
    # 2-d x 2-d: the contraction dim is cut into groups
    return ember.stack([a[:, s:e] @ b[s:e] for s, e in zip(starts, ends)])


class ScalingType(enum.Enum):
    """How ``scaled_mm``'s scales apply: one per tensor, one per row (of ``mat_a``) / column (of
    ``mat_b``), or per block."""

    TensorWise = 0
    RowWise = 1
    BlockWise1x16 = 2
    BlockWise1x32 = 3
    BlockWise1x128 = 4
    BlockWise128x128 = 5


class SwizzleType(enum.Enum):
    """The memory layout of block scales (``scaled_mm``)."""

    NO_SWIZZLE = 0
    SWIZZLE_32_4_4 = 1


def _invalid_scaling(m, n, mat_a, scale_a, mat_b, scale_b):
    return ValueError("Invalid scaling configuration.\n"
                      "- For TensorWise scaling, a and b should be float8, scales should be float and singletons.\n"
                      f"- For RowWise scaling, a and b should be float8, scales should be float, scale_a should be "
                      f"({m}, 1) and scale_b should be (1, {n}), and both should be contiguous.\n"
                      f"Got mat_a.dtype()={mat_a.dtype.legacy_name}, scale_a.dtype()={scale_a.dtype.legacy_name}, "
                      f"scale_a.size()={list(scale_a.shape)}, scale_a.stride()={list(scale_a.stride())}, "
                      f"mat_b.dtype()={mat_b.dtype.legacy_name}, scale_b.dtype()={scale_b.dtype.legacy_name}, "
                      f"scale_b.size()={list(scale_b.shape)} and scale_b.stride()={list(scale_b.stride())}")


def scaled_mm(mat_a, mat_b, scale_a, scale_recipe_a, scale_b, scale_recipe_b, swizzle_a=None, swizzle_b=None,
              bias=None, output_dtype=_t.bfloat16, contraction_dim=(), use_fast_accum=False):
    """``(mat_a * scale_a) @ (mat_b * scale_b) (+ bias)`` of float8 matrices, computed in float32
    and rounded to ``output_dtype``: TensorWise (one float32 scale each) and RowWise (scale_a
    (M, 1), scale_b (1, N)) scaling, as torch runs them on the CPU."""
    ember = _ember()
    if mat_a.dim() != 2 or mat_b.dim() != 2:
        raise ValueError(f"mat_a and mat_b must be 2-D, got {mat_a.dim()}-D and {mat_b.dim()}-D")
    m, k = mat_a.shape
    k2, n = mat_b.shape
    if k != k2:
        raise ValueError(f"mat_a and mat_b shapes cannot be multiplied ({m}x{k} and {k2}x{n})")
    if contraction_dim:
        raise NotImplementedError("ember.nn.functional.scaled_mm: contraction_dim is not supported")
    recipes = (scale_recipe_a, scale_recipe_b)
    if any(isinstance(r, list) for r in recipes) or isinstance(scale_a, list) or isinstance(scale_b, list):
        raise NotImplementedError("ember.nn.functional.scaled_mm: lists of scales (multi-level block scaling) "
                                  "are not supported")
    f8 = all(x.dtype._limited == "float8" and x.dtype is not ember.float8_e8m0fnu for x in (mat_a, mat_b))
    floats = all(s.dtype is ember.float32 for s in (scale_a, scale_b))
    if recipes == (ScalingType.TensorWise, ScalingType.TensorWise):
        ok = f8 and floats and scale_a.numel() == 1 and scale_b.numel() == 1
    elif recipes == (ScalingType.RowWise, ScalingType.RowWise):
        ok = f8 and floats and tuple(scale_a.shape) == (m, 1) and tuple(scale_b.shape) == (1, n) and \
            scale_a.is_contiguous() and scale_b.is_contiguous()
    elif all(isinstance(r, ScalingType) for r in recipes):
        ok = False
    else:
        raise TypeError(f"scaled_mm(): scale recipes must be ScalingType members, got {recipes!r}")
    if not ok:
        raise _invalid_scaling(m, n, mat_a, scale_a, mat_b, scale_b)
    out_dt = output_dtype if output_dtype is not None else ember.bfloat16
    with ember.no_grad():
        a = mat_a.to(ember.float32) * scale_a.reshape(-1, 1) if scale_a.numel() > 1 else \
            mat_a.to(ember.float32) * scale_a.reshape(())
        b = mat_b.to(ember.float32) * (scale_b.reshape(1, -1) if scale_b.numel() > 1 else scale_b.reshape(()))
        out = a @ b
        if bias is not None:
            out = out + bias.to(ember.float32)
        return out.to(out_dt)


def scaled_grouped_mm(mat_a, mat_b, scale_a, scale_recipe_a, scale_b, scale_recipe_b, swizzle_a=None,
                      swizzle_b=None, bias=None, offs=None, output_dtype=_t.bfloat16, contraction_dim=(),
                      use_fast_accum=False):
    """Grouped float8 matmuls: torch has no CPU kernel for them, and neither has ember."""
    raise NotImplementedError("Could not run 'aten::_scaled_grouped_mm_v2' with arguments from the 'CPU' backend "
                              "(ember: scaled_grouped_mm needs a CUDA kernel; ember runs on the CPU)")

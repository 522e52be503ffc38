"""Differential testing of the compiled ``nn.functional`` layer ops: compiled vs eager.

Why: test_fuzz_compiled.py draws programs of pointwise/reduction/view/indexing ops; the
layer ops (convolutions, pools, interpolation, padding modes, fold/unfold, norms with
running statistics, losses, attention) reach the compiler through their own
decompositions and lowerings, with their own index arithmetic (window bounds, ceil_mode,
align_corners, reflect/circular wrap, ignore_index masks). A wrong one there is a silent
wrong answer in a model. This file draws one such op with random arguments -- followed
now and then by a pointwise epilogue (so the op's loops get fused into) -- over random
shapes and input layouts (contiguous, transposed, stepped slices, channels_last-like
permutes, stride-0 expanded dims), and compares ``ember.compile(fn, backend="inductor")`` with eager:
in inference, with ``dynamic=True`` (the second call with other sizes: ``resized_specs``),
and in training (gradients of inputs and weights), in float32 and float64. Mutated inputs
(batch_norm's running statistics) are compared after each call; a graph that ran eagerly
(a graph break, an aot/inductor "running it eagerly" fallback) fails the case.

A case is a seed: ``gen_case(seed)`` builds the program's source and its input specs
deterministically, so a failure prints a readable, reproducible program.
CI runs a fixed handful of seeds; ``EMBER_FUZZ_EXAMPLES=N`` runs N seeds per mode
(``EMBER_FUZZ_SEED`` offsets the stream).
"""
import logging
import os

import numpy as np
import pytest

import ember
import ember.nn.functional as F

N_EXAMPLES = int(os.environ.get("EMBER_FUZZ_EXAMPLES", "0"))
SEED0 = int(os.environ.get("EMBER_FUZZ_SEED", "0"))


# -- program generation ------------------------------------------------------------
class Case:
    """The source of ``def f(a0, a1, ...)`` and the specs of its inputs."""

    def __init__(self, seed, mode):
        self.rng = np.random.default_rng((SEED0, seed, MODES.index(mode)))
        self.mode = mode
        self.inputs = []    # (name, shape, dtype, layout, kind)
        self.lines = []
        self.outs = []
        self.fdt = "float64" if self.coin(0.2) else "float32"    # the floating inputs' dtype

    def pick(self, xs):
        xs = list(xs)
        return xs[int(self.rng.integers(len(xs)))]

    def coin(self, p=0.5):
        return bool(self.rng.random() < p)

    def randint(self, lo, hi):
        return int(self.rng.integers(lo, hi + 1))

    def inp(self, shape, kind="data", dtype=None, layout=None):
        """kind: data (random, differentiable), weight (differentiable, contiguous),
        pos (positive), lossw (a loss's class/element weight: positive, and never requiring grad,
        which torch and ember refuse for these arguments), prob (in (0, 1)), probs:<dim> (a distribution along dim),
        index:<n> (int64 in [0, n)), bool, buffer (a mutated running statistic), bufpos."""
        name = f"a{len(self.inputs)}"
        dtype = dtype or self.fdt
        if layout is None:
            if kind in ("data", "pos", "lossw", "prob") and self.mode != "dynamic":
                choices = ["contig", "contig", "sliced"]
                if len(shape) >= 2:
                    choices.append("transposed")
                if len(shape) >= 3:
                    choices.append("channels_last")
                if any(d > 1 for d in shape):
                    choices.append("expanded")
                layout = self.pick(choices)
            else:
                layout = "contig"
        self.inputs.append((name, tuple(int(s) for s in shape), dtype, layout, kind))
        return name

    def emit(self, expr):
        name = f"v{len(self.lines)}"
        self.lines.append(f"{name} = {expr}")
        return name

    def out(self, name, epilogue=True):
        if epilogue and self.coin(0.3):
            name = self.emit(self.pick([f"{name}.sin() * 1.5", f"({name} - 0.25).abs()",
                                        f"{name} * {name}", f"ember.tanh({name}) + {name}"]))
        self.outs.append(name)

    def source(self):
        args = ", ".join(s[0] for s in self.inputs)
        body = "\n".join("    " + ln for ln in self.lines) or "    pass"
        return f"def f({args}):\n{body}\n    return ({', '.join(self.outs)},)\n"


def _size(c, lo=1, hi=9):
    """Mostly small; now and then around the SIMD widths (8/16 floats: vector tails)."""
    if c.coin(0.15):
        return c.pick([s for s in (7, 8, 9, 15, 16, 17) if s >= lo])
    return c.randint(lo, hi)


def g_conv(c):
    nd = c.pick([1, 2])
    groups = c.pick([1, 1, 2, 3])
    cin, cout = groups * c.randint(1, 3), groups * c.randint(1, 3)
    k = [c.randint(1, 3) for _ in range(nd)]
    dil = [c.pick([1, 1, 2]) for _ in range(nd)]
    pad_mode = c.pick(["int", "tuple", "same", "valid"])
    stride = [1] * nd if pad_mode == "same" else [c.pick([1, 1, 2, 3]) for _ in range(nd)]
    span = [d * (kk - 1) + 1 for d, kk in zip(dil, k)]
    pad = [c.randint(0, kk // 2) for kk in k]
    if pad_mode == "int":
        pad = [min(pad)] * nd
    lo = [max(1, s - (2 * p if pad_mode in ("int", "tuple") else 0)) for s, p in zip(span, pad)]
    spatial = [c.randint(l, l + 7) for l in lo]
    n = c.randint(1, 3)
    x = c.inp([n, cin] + spatial)
    w = c.inp([cout, cin // groups] + k, kind="weight")
    b = c.inp([cout], kind="weight") if c.coin() else "None"
    padding = {"int": str(pad[0]), "tuple": str(tuple(pad)), "same": "'same'", "valid": "'valid'"}[pad_mode]
    st = str(stride[0]) if c.coin() and len(set(stride)) == 1 else str(tuple(stride))
    dl = str(dil[0]) if len(set(dil)) == 1 else str(tuple(dil))
    c.out(c.emit(f"F.conv{nd}d({x}, {w}, {b}, stride={st}, padding={padding}, dilation={dl}, groups={groups})"))


def g_conv_transpose(c):
    groups = c.pick([1, 1, 2])
    cin, cout = groups * c.randint(1, 3), groups * c.randint(1, 3)
    k = [c.randint(1, 3) for _ in range(2)]
    stride = [c.pick([1, 2, 3]) for _ in range(2)]
    dil = [c.pick([1, 1, 2]) for _ in range(2)]
    pad = [c.randint(0, (d * (kk - 1)) // 2) for d, kk in zip(dil, k)]
    opad = [c.randint(0, max(s, d) - 1) for s, d in zip(stride, dil)]
    x = c.inp([c.randint(1, 2), cin, _size(c, 1, 6), _size(c, 1, 6)])
    w = c.inp([cin, cout // groups] + k, kind="weight")
    b = c.inp([cout], kind="weight") if c.coin() else "None"
    c.out(c.emit(f"F.conv_transpose2d({x}, {w}, {b}, stride={tuple(stride)}, padding={tuple(pad)}, "
                 f"output_padding={tuple(opad)}, groups={groups}, dilation={tuple(dil)})"))


def _window_in_padding(hw, k, stride, pad, dil, ceil):
    """Whether some pooling window (dilated taps) lies wholly in the padding. Eager ember's
    max_pool gives 0 there, torch and compiled ember -inf (an eager bug, reported): not drawn."""
    stride = (stride, stride) if isinstance(stride, int) else stride
    for n, kk, s, p, d in zip(hw, k, stride, pad, dil):
        span = d * (kk - 1) + 1
        num = n + 2 * p - span
        o = (num + (s - 1 if ceil else 0)) // s + 1
        if ceil and (o - 1) * s >= n + p:
            o -= 1
        for i in range(o):
            if not any(0 <= i * s - p + d * j < n for j in range(kk)):
                return True
    return False


def g_max_pool(c):
    k = [c.randint(1, 3) for _ in range(2)]
    stride = c.pick(["None", str(c.randint(1, 3)), str((c.randint(1, 3), c.randint(1, 2)))])
    pad = [c.randint(0, kk // 2) for kk in k]
    dil = [c.pick([1, 1, 2]) for _ in range(2)]
    ceil = c.coin()
    ri = c.coin()
    span = [d * (kk - 1) + 1 for d, kk in zip(dil, k)]
    hw = [c.randint(max(1, s - 2 * p), max(1, s - 2 * p) + 7) for s, p in zip(span, pad)]
    if _window_in_padding(hw, k, eval(stride) if stride != "None" else k, pad, dil, ceil):
        stride, dil = "None", [1, 1]     # (a window of padding only: see _window_in_padding)
        hw = [max(s, kk) for s, kk in zip(hw, k)]
    shape = [c.randint(1, 3)] * c.pick([0, 1]) + [c.randint(1, 4)] + hw
    x = c.inp(shape)
    v = c.emit(f"F.max_pool2d({x}, {tuple(k)}, stride={stride}, padding={tuple(pad)}, dilation={tuple(dil)}, "
               f"ceil_mode={ceil}, return_indices={ri})")
    if ri:
        c.out(c.emit(f"{v}[0]"))
        c.out(c.emit(f"{v}[1]"), epilogue=False)
    else:
        c.out(v)


def g_avg_pool(c):
    k = [c.randint(1, 3) for _ in range(2)]
    stride = c.pick(["None", str(c.randint(1, 3)), str((c.randint(1, 3), c.randint(1, 2)))])
    pad = [c.randint(0, kk // 2) for kk in k]
    hw = [c.randint(max(1, kk - 2 * p), max(1, kk - 2 * p) + 7) for kk, p in zip(k, pad)]
    shape = [c.randint(1, 3)] * c.pick([0, 1]) + [c.randint(1, 4)] + hw
    x = c.inp(shape)
    div = c.pick(["None", "None", str(c.randint(1, 5))])
    c.out(c.emit(f"F.avg_pool2d({x}, {tuple(k)}, stride={stride}, padding={tuple(pad)}, ceil_mode={c.coin()}, "
                 f"count_include_pad={c.coin()}, divisor_override={div})"))


def g_adaptive(c):
    kind = c.pick(["avg2", "max2", "avg1", "max1"])
    nd = int(kind[-1])
    spatial = [_size(c, 1, 11) for _ in range(nd)]
    x = c.inp([c.randint(1, 2), c.randint(1, 4)] + spatial)
    osz = [c.pick([1, 2, 3, 4, 5, s]) for s in spatial]
    if nd == 2 and c.coin(0.3):
        o = str((osz[0], None))
    elif nd == 1 or c.coin(0.3):
        o = str(osz[0])
    else:
        o = str(tuple(osz))
    if kind.startswith("max") and c.coin():
        v = c.emit(f"F.adaptive_max_pool{nd}d({x}, {o}, return_indices=True)")
        c.out(c.emit(f"{v}[0]"))
        c.out(c.emit(f"{v}[1]"), epilogue=False)
    else:
        c.out(c.emit(f"F.adaptive_{kind[:3]}_pool{nd}d({x}, {o})"))


def g_interpolate(c):
    mode = c.pick(["nearest", "bilinear", "bilinear", "nearest-exact", "linear"] +
                  # (bicubic under dynamic=True graph-breaks: interpolate builds its weights in
                  # numpy from the sizes -- a capture gap of ember.nn, reported)
                  (["bicubic"] if c.mode != "dynamic" else []))
    nd = 1 if mode == "linear" else 2
    spatial = [_size(c, 1, 8) for _ in range(nd)]
    x = c.inp([c.randint(1, 2), c.randint(1, 3)] + spatial)
    ac = ""
    if mode in ("bilinear", "linear", "bicubic"):
        ac = f", align_corners={c.coin()}"
    if c.coin():
        size = [c.randint(1, 13) for _ in range(nd)]
        arg = f"size={size[0] if nd == 1 or c.coin(0.3) and len(set(size)) == 1 else tuple(size)}"
    else:
        sf = [c.pick([0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0]) for _ in range(nd)]
        if any(int(s * f) == 0 for s, f in zip(spatial, sf)):
            sf = [2.0] * nd
        arg = f"scale_factor={sf[0] if nd == 1 else tuple(sf)}"
        if c.coin(0.3):
            arg += ", recompute_scale_factor=True"
    c.out(c.emit(f"F.interpolate({x}, {arg}, mode='{mode}'{ac})"))


def g_pad(c):
    mode = c.pick(["reflect", "replicate", "circular"])
    nd = c.pick([1, 2])
    spatial = [_size(c, 2, 8) for _ in range(nd)]
    x = c.inp([c.randint(1, 2), c.randint(1, 3)] + spatial)
    pads = []
    for s in reversed(spatial):
        hi = s - 1 if mode in ("reflect", "circular") else 4
        pads += [c.randint(0, hi), c.randint(0, hi)]
    if mode == "circular" and c.coin(0.3):   # a negative pad crops
        pads[0] = -c.randint(0, 1)
    c.out(c.emit(f"F.pad({x}, {tuple(pads)}, mode='{mode}')"))


def g_fold(c):
    k = (c.randint(1, 3), c.randint(1, 3))
    dil = (c.pick([1, 2]), 1)
    pad = (c.randint(0, 1), c.randint(0, 1))
    stride = (c.randint(1, 2), c.randint(1, 3))
    hw = [c.randint(max(1, d * (kk - 1) + 1 - 2 * p), 8) for d, kk, p in zip(dil, k, pad)]
    if c.coin():
        x = c.inp([c.randint(1, 2), c.randint(1, 3)] + hw)
        c.out(c.emit(f"F.unfold({x}, {k}, dilation={dil}, padding={pad}, stride={stride})"))
    else:
        blocks = 1
        for s, d, kk, p, st in zip(hw, dil, k, pad, stride):
            blocks *= (s + 2 * p - d * (kk - 1) - 1) // st + 1
        ch = c.randint(1, 3)
        x = c.inp([c.randint(1, 2), ch * k[0] * k[1], blocks])
        c.out(c.emit(f"F.fold({x}, {tuple(hw)}, {k}, dilation={dil}, padding={pad}, stride={stride})"))


def g_pixel(c):
    r = c.randint(1, 3)
    if c.coin():
        x = c.inp([c.randint(1, 2), c.randint(1, 3) * r * r, _size(c, 1, 5), _size(c, 1, 5)])
        c.out(c.emit(f"F.pixel_shuffle({x}, {r})"))
    else:
        x = c.inp([c.randint(1, 2), c.randint(1, 3), r * _size(c, 1, 4), r * _size(c, 1, 4)])
        c.out(c.emit(f"F.pixel_unshuffle({x}, {r})"))


def g_norm(c):
    kind = c.pick(["layer", "group", "batch_train", "batch_eval", "instance", "instance_stats"])
    n, ch = c.randint(1, 4), c.randint(1, 6)
    eps = c.pick([1e-5, 1e-3])
    if kind == "layer":
        shape = [n] + [_size(c, 1, 9) for _ in range(c.randint(1, 3))]
        k = c.randint(1, len(shape) - 1) if len(shape) > 1 else 1
        ns = tuple(shape[-k:])
        x = c.inp(shape)
        w = c.inp(ns, kind="weight") if c.coin() else "None"
        b = c.inp(ns, kind="weight") if c.coin() else "None"
        c.out(c.emit(f"F.layer_norm({x}, {ns}, {w}, {b}, eps={eps})"))
        return
    spatial = [_size(c, 1, 6) for _ in range(c.randint(0 if kind.startswith("batch") else 1, 2))]
    if kind == "group":
        g = c.randint(1, 3)
        ch = g * c.randint(1, 3)
        x = c.inp([n, ch] + spatial)
        w = c.inp([ch], kind="weight") if c.coin() else "None"
        b = c.inp([ch], kind="weight") if c.coin() else "None"
        c.out(c.emit(f"F.group_norm({x}, {g}, {w}, {b}, eps={eps})"))
        return
    if kind in ("batch_train", "instance", "instance_stats") and \
            (1 if kind != "batch_train" else n) * int(np.prod(spatial or [1])) == 1:
        spatial = spatial or [1]
        spatial[-1] = 2     # (one value per channel: the statistics are undefined, eager raises)
    x = c.inp([n, ch] + spatial)
    w = c.inp([ch], kind="weight") if c.coin() else "None"
    b = c.inp([ch], kind="weight") if c.coin() else "None"
    mom = c.pick([0.1, 0.5])
    if kind.startswith("batch"):
        stats = c.coin(0.8) or kind == "batch_eval"
        rm = c.inp([ch], kind="buffer") if stats else "None"
        rv = c.inp([ch], kind="bufpos") if stats else "None"
        c.out(c.emit(f"F.batch_norm({x}, {rm}, {rv}, {w}, {b}, training={kind == 'batch_train'}, "
                     f"momentum={mom}, eps={eps})"))
    else:
        stats = kind == "instance_stats"
        rm = c.inp([ch], kind="buffer") if stats else "None"
        rv = c.inp([ch], kind="bufpos") if stats else "None"
        c.out(c.emit(f"F.instance_norm({x}, {rm}, {rv}, {w}, {b}, momentum={mom}, eps={eps})"))


def g_softmax(c):
    shape = [_size(c, 1, 9) for _ in range(c.randint(1, 4))]
    x = c.inp(shape)
    d = c.randint(-len(shape), len(shape) - 1)
    fn = c.pick(["softmax", "log_softmax"])
    dt = ", dtype=ember.float64" if c.coin(0.2) else ""
    c.out(c.emit(f"F.{fn}({x}, dim={d}{dt})"))


def g_cross_entropy(c):
    n, C = c.randint(1, 6), c.randint(2, 6)
    extra = [_size(c, 1, 4) for _ in range(c.pick([0, 0, 1, 2]))]
    fn = c.pick(["cross_entropy", "cross_entropy", "nll_loss"])
    probs = fn == "cross_entropy" and c.coin(0.3)
    if c.coin(0.15) and not extra:
        x = c.inp([C])   # unbatched
        n_shape, tshape = [], []
    else:
        x = c.inp([n, C] + extra)
        n_shape, tshape = [n], [n] + extra
    if fn == "nll_loss":
        x = c.emit(f"F.log_softmax({x}, 1 if {x}.dim() > 1 else 0)")
    red = c.pick(["none", "sum", "mean"])
    kw = f"reduction='{red}'"
    if c.coin():
        kw += f", weight={c.inp([C], kind='lossw')}"
    if probs:
        t = c.inp(tshape[:1] + [C] + tshape[1:] if tshape else [C], kind="probs:%d" % (1 if tshape else 0))
    else:
        t = c.inp(tshape, kind=f"index:{C}")
        if c.coin():
            ig = c.pick([0, C - 1, -100])
            if ig == -100:
                t = c.emit(f"ember.where({t} == 0, -100, {t})")
            kw += f", ignore_index={ig}"
    if fn == "cross_entropy" and c.coin():
        kw += f", label_smoothing={c.pick([0.1, 0.25])}"
    c.out(c.emit(f"F.{fn}({x}, {t}, {kw})"))


def g_bce(c):
    shape = [_size(c, 1, 7) for _ in range(c.randint(1, 3))]
    red = c.pick(["none", "sum", "mean"])
    t = c.inp(shape, kind="prob")
    w = f", weight={c.inp(shape[-1:], kind='lossw')}" if c.coin() else ""
    if c.coin():
        x = c.inp(shape, kind="prob")
        c.out(c.emit(f"F.binary_cross_entropy({x}, {t}, reduction='{red}'{w})"))
    else:
        x = c.inp(shape)
        pw = f", pos_weight={c.inp(shape[-1:], kind='lossw')}" if c.coin() else ""
        c.out(c.emit(f"F.binary_cross_entropy_with_logits({x}, {t}, reduction='{red}'{w}{pw})"))


def g_regress(c):
    shape = [_size(c, 1, 7) for _ in range(c.randint(0, 3))]
    x, t = c.inp(shape), c.inp(shape)
    red = c.pick(["none", "sum", "mean"])
    fn = c.pick(["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div"])
    kw = f"reduction='{red}'"
    if fn == "smooth_l1_loss":
        kw += f", beta={c.pick([1.0, 0.5, 0.0])}"
    if fn == "huber_loss":
        kw += f", delta={c.pick([1.0, 0.3, 2.0])}"
    if fn == "kl_div":
        kw = f"reduction='{c.pick(['none', 'sum', 'mean', 'batchmean'])}'"
        x = c.emit(f"F.log_softmax({x}, -1)") if shape else x
        if c.coin():
            kw += ", log_target=True"
        else:
            t = c.emit(f"{t}.abs() + 0.1")   # (a probability-like target; 0 * log 0 not drawn)
    c.out(c.emit(f"F.{fn}({x}, {t}, {kw})"))


def g_distance(c):
    fn = c.pick(["cosine_similarity", "pairwise_distance", "normalize"])
    shape = [_size(c, 1, 7) for _ in range(c.randint(1, 3))]
    x = c.inp(shape)
    if fn == "normalize":
        d = c.randint(-len(shape), len(shape) - 1)
        c.out(c.emit(f"F.normalize({x}, p={c.pick([2.0, 1.0, 3.0])}, dim={d})"))
        return
    y = c.inp(shape if c.coin(0.7) else [1] + shape[1:])
    if fn == "cosine_similarity":
        d = c.randint(-len(shape), len(shape) - 1)
        c.out(c.emit(f"F.cosine_similarity({x}, {y}, dim={d})"))
    else:
        c.out(c.emit(f"F.pairwise_distance({x}, {y}, p={c.pick([2.0, 1.0, 3.0])}, keepdim={c.coin()})"))


def g_embedding(c):
    V, D = c.randint(2, 9), c.randint(1, 8)
    w = c.inp([V, D], kind="weight")
    idx = c.inp([_size(c, 1, 6) for _ in range(c.randint(1, 2))], kind=f"index:{V}")
    pi = f", padding_idx={c.pick([0, V - 1, -1])}" if c.coin() else ""
    c.out(c.emit(f"F.embedding({idx}, {w}{pi})"))


def g_activation(c):
    shape = [_size(c, 1, 9) for _ in range(c.randint(1, 3))]
    x = c.inp(shape)
    x = c.emit(f"{x} * 3.0") if c.coin() else x     # reach the tails (thresholds, saturation)
    fn = c.pick(["gelu", "gelu_tanh", "silu", "mish", "hardswish", "leaky_relu", "elu", "softplus", "glu",
                 "dropout"])
    if fn == "gelu":
        e = f"F.gelu({x})"
    elif fn == "gelu_tanh":
        e = f"F.gelu({x}, approximate='tanh')"
    elif fn == "leaky_relu":
        e = f"F.leaky_relu({x}, {c.pick([0.01, 0.2, -0.5])})"
    elif fn == "elu":
        e = f"F.elu({x}, alpha={c.pick([1.0, 0.5, 2.0])})"
    elif fn == "softplus":
        e = f"F.softplus({x}, beta={c.pick([1.0, 2.0, 0.5])}, threshold={c.pick([20.0, 1.0, 2.5])})"
    elif fn == "glu":
        dims = [i for i, s in enumerate(shape) if s % 2 == 0]
        if not dims:
            shape[-1] *= 2
            c.inputs[-1] = c.inputs[-1][:1] + (tuple(shape),) + c.inputs[-1][2:]
            dims = [len(shape) - 1]
        e = f"F.glu({x}, dim={c.pick(dims)})"
    elif fn == "dropout":
        e = f"F.dropout({x}, p={c.pick([0.3, 0.9])}, training=False)"
    else:
        e = f"F.{fn}({x})"
    c.out(c.emit(e))


def g_sdpa(c):
    b = [c.randint(1, 2) for _ in range(c.pick([0, 1, 2]))]
    L, S, E, Ev = c.randint(1, 7), c.randint(1, 7), c.randint(1, 8), c.randint(1, 8)
    causal = c.coin(0.3)
    q = c.inp(b + [L, E])
    k = c.inp(b + [S, E])
    v = c.inp(b + [S, Ev])
    kw = ""
    if causal:
        kw += ", is_causal=True"
    else:
        m = c.pick(["none", "bool", "float"])
        mshape = c.pick([[L, S], [1, S], b + [L, S]])
        if m == "bool":
            mk = c.inp(mshape, kind="bool")
            # (a fully masked row gives NaN in both; keep the diagonal so rows are not empty)
            mk = c.emit(f"{mk} | (ember.arange({mshape[-2]}).unsqueeze(-1) == ember.arange({S}) % {mshape[-2]})")
            kw += f", attn_mask={mk}"
        elif m == "float":
            kw += f", attn_mask={c.inp(mshape)}"
    if c.coin(0.3):
        kw += f", scale={c.pick([0.5, 2.0])}"
    c.out(c.emit(f"F.scaled_dot_product_attention({q}, {k}, {v}{kw})"))


def g_scatter_reduce(c):
    """scatter_reduce (amax/amin have their own prims) and EmbeddingBag with offsets over it."""
    if c.coin():
        V, D = c.randint(2, 9), c.randint(1, 6)
        w = c.inp([V, D], kind="weight")
        n = c.randint(1, 10)
        idx = c.inp([n], kind=f"index:{V}")
        nb = c.randint(1, 4)
        offs = sorted([0] + [c.randint(0, n) for _ in range(nb - 1)])
        c.out(c.emit(f"F.embedding_bag({idx}, {w}, ember.tensor({offs}), mode='{c.pick(['max', 'sum', 'mean'])}')"))
        return
    shape = [_size(c, 1, 6) for _ in range(c.randint(1, 3))]
    d = c.randint(0, len(shape) - 1)
    ishape = [c.randint(1, s) for s in shape]
    ishape[d] = c.randint(1, 7)
    sshape = [s + c.pick([0, 0, 1]) for s in ishape]
    x, src = c.inp(shape), c.inp(sshape)
    i = c.inp(ishape, kind=f"index:{shape[d]}")
    red = c.pick(["amax", "amin", "amax", "amin", "sum", "mean"])
    c.out(c.emit(f"{x}.scatter_reduce({d}, {i}, {src}, '{red}', include_self={c.coin()})"))


def g_block(c):
    """A small CNN block, so that the layer ops' loops meet (fusion across them): conv ->
    batch_norm (training, running statistics) or group_norm -> activation -> pool or
    interpolate -> flatten -> linear -> cross_entropy or a softmax."""
    n, cin, cout = c.randint(1, 3), c.randint(1, 4), c.randint(1, 6)
    hw = [_size(c, 3, 10), _size(c, 3, 10)]
    x = c.inp([n, cin] + hw)
    w = c.inp([cout, cin, 3, 3], kind="weight")
    v = c.emit(f"F.conv2d({x}, {w}, {c.inp([cout], kind='weight') if c.coin() else 'None'}, padding=1)")
    if c.coin():
        rm, rv = c.inp([cout], kind="buffer"), c.inp([cout], kind="bufpos")
        v = c.emit(f"F.batch_norm({v}, {rm}, {rv}, {c.inp([cout], kind='weight')}, None, training={c.coin(0.7)})")
    else:
        v = c.emit(f"F.group_norm({v}, 1, None, {c.inp([cout], kind='weight')})")
    v = c.emit(c.pick([f"F.relu({v})", f"F.gelu({v})", f"F.silu({v})", f"F.hardswish({v})"]))
    v = c.emit(c.pick([f"F.max_pool2d({v}, 2, ceil_mode={c.coin()})", f"F.avg_pool2d({v}, 2)",
                       f"F.adaptive_avg_pool2d({v}, {c.randint(1, 3)})",
                       f"F.interpolate({v}, scale_factor=0.5, mode='bilinear', align_corners={c.coin()})"]))
    v = c.emit(f"{v}.flatten(1)")
    k = c.randint(2, 5)
    # (the flattened width, known from the sizes: run the prefix through the shapes)
    ns = {"ember": ember, "F": F}
    rng = np.random.default_rng(0)
    args = [make_input(sp, rng) for sp in c.inputs]
    exec("def _p(%s):\n%s\n    return %s\n" % (", ".join(sp[0] for sp in c.inputs),
                                               "\n".join("    " + ln for ln in c.lines), v), ns)
    width = ns["_p"](*args).shape[1]
    lw = c.inp([k, width], kind="weight")
    logits = c.emit(f"F.linear({v}, {lw})")
    if c.coin():
        t = c.inp([n], kind=f"index:{k}")
        c.out(c.emit(f"F.cross_entropy({logits}, {t}, label_smoothing={c.pick([0.0, 0.1])})"), epilogue=False)
    else:
        c.out(c.emit(f"F.log_softmax({logits}, 1)"))


GENERATORS = [g_conv, g_conv_transpose, g_max_pool, g_avg_pool, g_adaptive, g_interpolate, g_pad, g_fold,
              g_pixel, g_norm, g_softmax, g_cross_entropy, g_bce, g_regress, g_distance, g_embedding,
              g_activation, g_sdpa, g_scatter_reduce, g_block]


MODES = ("infer", "dynamic", "train")


def gen_case(seed, mode, gen=None):
    """The program of ``seed``: consecutive seeds walk through the generators (in a different
    order per mode, so that a few CI seeds of each mode cover different op families)."""
    c = Case(seed, mode)
    (gen or GENERATORS[(7 * seed + 5 * MODES.index(mode)) % len(GENERATORS)])(c)
    return c.source(), c.inputs


# -- inputs ------------------------------------------------------------------------
def make_input(spec, rng):
    name, shape, dtype, layout, kind = spec
    if kind.startswith("index:"):
        return ember.from_numpy(rng.integers(0, int(kind.split(":")[1]), size=shape).astype(np.int64))
    if kind == "bool":
        return ember.from_numpy(rng.random(shape) < 0.6)
    if kind.startswith("probs:"):
        d = int(kind.split(":")[1])
        p = rng.uniform(0.05, 1.0, size=shape)
        return ember.from_numpy((p / p.sum(axis=d, keepdims=True)).astype(dtype))

    def data(shp):
        if kind in ("pos", "lossw", "bufpos"):
            return rng.uniform(0.2, 2.0, size=shp).astype(dtype)
        if kind == "prob":
            return rng.uniform(0.05, 0.95, size=shp).astype(dtype)
        return rng.uniform(-2.0, 2.0, size=shp).astype(dtype)

    nd = len(shape)
    if layout == "contig" or nd == 0:
        return ember.from_numpy(np.ascontiguousarray(data(shape)))
    if layout == "expanded":    # stride 0 along the last dim of size > 1
        d = max(i for i, n in enumerate(shape) if n > 1)
        return ember.from_numpy(data(shape[:d] + (1,) + shape[d + 1:])).expand(*shape)
    if layout == "sliced":
        base = ember.from_numpy(data(shape[:-1] + (2 * shape[-1] + 1,)))
        return base[..., 1::2]
    if layout == "transposed":
        perm = list(range(nd))
        perm[-1], perm[-2] = perm[-2], perm[-1]
    else:   # channels_last: dim 1 innermost
        perm = [0] + list(range(2, nd)) + [1]
    base = ember.from_numpy(np.ascontiguousarray(data(tuple(shape[p] for p in perm))))
    t = base.permute(*[int(i) for i in np.argsort(perm)])
    assert tuple(t.shape) == shape
    return t


# -- running and comparing ----------------------------------------------------------
def assert_close(got, want, what):
    got = got.detach().numpy() if isinstance(got, ember.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, ember.Tensor) else np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    rtol, atol = (2e-4, 2e-5) if got.dtype == np.float32 else (1e-9, 1e-12)
    fin = np.isfinite(want)
    scale = float(np.max(np.abs(want[fin]))) if fin.any() else 1.0
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol * max(1.0, scale), equal_nan=True, err_msg=what)


def _differentiable(spec):
    return spec[2].startswith("float") and spec[4] in ("data", "weight", "pos", "prob")


def resized_specs(fn, specs, seed):
    """The specs with other sizes, for a second call under ``dynamic=True`` (the symbolic
    kernels run with sizes they were not traced with): each distinct size >= 2 grows by 1..3,
    the same everywhere it occurs (so a channel count stays a channel count across the
    input and its weight). Sizes the program's constants pin (a layer_norm's
    normalized_shape, a group count) make eager reject a mapping: up to a few are tried;
    None if eager takes none of them."""
    rng = np.random.default_rng((seed, 99))
    values = sorted({d for sp in specs for d in sp[1] if d >= 2})
    for _ in range(6):
        m = {v: v + int(rng.integers(1, 4)) for v in values}
        new = [(n, tuple(m.get(d, d) for d in shp), dt, lay, kind) for n, shp, dt, lay, kind in specs]
        try:
            fn(*[make_input(sp, np.random.default_rng(0)) for sp in new])
        except Exception:
            continue
        return new
    return None


class _EagerGraphs(logging.Handler):
    """Records the "..., running it eagerly" warnings of aot (a graph it cannot trace) and of
    inductor (a graph it cannot compile, without ``debug_lowering``): such a graph is not
    counted in ``dynamo.counters`` (the frame did compile), yet nothing of it ran compiled."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.reasons = []

    def emit(self, record):
        msg = record.getMessage()
        if "running it eagerly" in msg or "runs in the fx Interpreter" in msg:
            self.reasons.append(msg)


def run_program(src, specs, mode, seed=0, calls=2):
    eager = _EagerGraphs()
    logger = logging.getLogger("ember")
    logger.addHandler(eager)
    try:
        _run_program(src, specs, mode, seed, calls)
    finally:
        logger.removeHandler(eager)
    assert not eager.reasons, eager.reasons


def _run_program(src, specs, mode, seed=0, calls=2):
    """Compile ``src`` and compare with eager on ``calls`` fresh draws of the inputs; under
    ``dynamic=True`` the second call has other sizes where eager accepts them
    (``resized_specs``)."""
    ns = {"ember": ember, "F": F}
    exec(src, ns)
    fn = ns["f"]
    call_specs = [specs] * calls
    if mode == "dynamic" and calls > 1:
        call_specs[1] = resized_specs(fn, specs, seed) or specs
    ember.dynamo.reset()
    cfn = ember.compile(fn, backend="inductor", dynamic=(mode == "dynamic") or None)
    for call in range(calls):
        specs = call_specs[call]
        args = [make_input(s, r) for r in [np.random.default_rng((seed, call))] for s in specs]
        ref = [make_input(s, r) for r in [np.random.default_rng((seed, call))] for s in specs]
        if mode == "train":
            for a, r, s in zip(args, ref, specs):
                if _differentiable(s):
                    a.requires_grad_(True)
                    r.requires_grad_(True)
        got, want = cfn(*args), fn(*ref)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, f"call {call}: output {i}")
        for i, (a, r) in enumerate(zip(args, ref)):
            assert_close(a.detach(), r.detach(), f"call {call}: input a{i} after the call")
        if mode == "train":
            rng = np.random.default_rng((seed, call, 1))
            outs = [(g, w) for g, w in zip(got, want) if w.dtype in (ember.float32, ember.float64)
                    and w.requires_grad]
            if not outs:
                continue
            wts = [ember.from_numpy(rng.uniform(-1, 1, size=tuple(w.shape)).astype(w.detach().numpy().dtype))
                   for _, w in outs]
            sum(((g * wt).sum() for (g, _), wt in zip(outs, wts))).backward()
            sum(((w * wt).sum() for (_, w), wt in zip(outs, wts))).backward()
            for i, (a, r) in enumerate(zip(args, ref)):
                if r.grad is not None or a.grad is not None:
                    assert a.grad is not None and r.grad is not None, f"grad of a{i}"
                    assert_close(a.grad, r.grad, f"call {call}: grad of a{i}")
    c = ember.dynamo.counters
    assert c["compiled"] >= 1 and c["eager_fallback"] == 0 and c["internal_errors"] == 0 and \
        c["graph_breaks"] == 0, dict(c)


def check(seed, mode, gen=None):
    src, specs = gen_case(seed, mode, gen)
    try:
        run_program(src, specs, mode, seed=seed)
    except Exception:
        print("---- failing program (seed=%d, mode=%s) ----\n%s\nspecs=%r" % (seed, mode, src, specs))
        raise


def _seeds(n):
    return list(range(SEED0, SEED0 + (N_EXAMPLES or n)))


@pytest.mark.parametrize("seed", _seeds(12))
def test_fuzz_functional_inference(seed, strict_lowering):
    check(seed, "infer")


@pytest.mark.parametrize("seed", _seeds(4))
def test_fuzz_functional_dynamic(seed, strict_lowering):
    check(seed, "dynamic")


@pytest.mark.parametrize("seed", _seeds(6))
def test_fuzz_functional_training(seed, strict_lowering):
    check(seed, "train")

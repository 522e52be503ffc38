"""Shared checker: an op's meta function against its eager kernel.

``check_meta(fn, *args, **kwargs)`` runs ``fn`` eagerly on real tensors, then
again under a FakeTensorMode on fake twins of every tensor argument (nested in
lists/tuples too), and asserts every output tensor agrees in shape, dtype,
device and (unless ``check_strides=False``) strides and storage offset.
With ``symbolic=True`` (the default) it repeats the fake run with symbolic
sizes and checks that the symbolic output sizes evaluate (by the hints) to
the eager sizes and that the recorded guards accept the example sizes.
"""
from __future__ import annotations

import ember
from ember.fx.experimental.symbolic_shapes import ShapeEnv, SymInt
from ember.fx.fake_tensor import FakeTensorMode, is_fake


def _map(x, f):
    if isinstance(x, ember.Tensor):
        return f(x)
    if isinstance(x, list):
        return [_map(a, f) for a in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(_map(a, f) for a in x)
    if isinstance(x, tuple):
        return type(x)(*[_map(a, f) for a in x])
    if isinstance(x, dict):
        return {k: _map(v, f) for k, v in x.items()}
    return x


def _flat(x):
    if isinstance(x, ember.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for a in x for t in _flat(a)]
    return []


def _hint(s):
    return s.hint() if isinstance(s, SymInt) else s


def check_meta(fn, *args, check_strides=True, symbolic=True, **kwargs):
    """Compare ``fn(*args, **kwargs)`` eager vs fake (and symbolic fake) metadata."""
    with ember.no_grad():
        eager = fn(*args, **kwargs)
    real_outs = _flat(eager)
    for sym in ((False, True) if symbolic else (False,)):
        env = ShapeEnv() if sym else None
        mode = FakeTensorMode(shape_env=env)
        counter = iter(range(10 ** 6))
        fargs = _map(args, lambda t: mode.from_tensor(t, symbolic=sym, source=f"arg{next(counter)}"))
        fkwargs = _map(kwargs, lambda t: mode.from_tensor(t, symbolic=sym, source=f"kw{next(counter)}"))
        with ember.no_grad(), mode:
            fake = fn(*fargs, **fkwargs)
        fake_outs = _flat(fake)
        where = f"{getattr(fn, '__name__', fn)} ({'symbolic' if sym else 'fake'})"
        assert len(fake_outs) == len(real_outs), f"{where}: {len(fake_outs)} outputs vs {len(real_outs)} eager"
        for i, (r, f) in enumerate(zip(real_outs, fake_outs)):
            assert is_fake(f), f"{where}: output {i} is not a fake tensor: {type(f._data)}"
            fshape = tuple(_hint(s) for s in f.shape)
            assert fshape == tuple(r.shape), f"{where}: output {i} shape {tuple(f.shape)} vs eager {tuple(r.shape)}"
            assert f.dtype == r.dtype, f"{where}: output {i} dtype {f.dtype} vs eager {r.dtype}"
            assert f.device == r.device, f"{where}: output {i} device {f.device} vs eager {r.device}"
            if check_strides and r.numel() > 1:
                fst = tuple(_hint(s) for s in f.stride())
                rst = tuple(r.stride())
                # strides of size-1 dims carry no meaning
                fst = tuple(s for s, n in zip(fst, r.shape) if n != 1)
                rst = tuple(s for s, n in zip(rst, r.shape) if n != 1)
                assert fst == rst, f"{where}: output {i} strides {f.stride()} vs eager {r.stride()}"
                if r._base is not None:
                    assert _hint(f.storage_offset()) == r.storage_offset(), \
                        f"{where}: output {i} storage offset {f.storage_offset()} vs eager {r.storage_offset()}"
        if sym:
            # the guards must accept the example inputs themselves
            hints = {s: v for s, v in env.var_to_val.items()}
            assert env.evaluate_guards(hints), f"{where}: guards {env.guards} reject the example sizes"
    return eager

"""Run the same layer under ember and torch with identical weights and compare."""
from __future__ import annotations

import numpy as np

import ember
from oracle import assert_close, torch


def t2e_state(sd):
    """A torch state_dict as ember tensors (dtype kept)."""
    out = {}
    for k, v in sd.items():
        v = v.detach()
        if v.dtype == torch.bfloat16:
            out[k] = ember.tensor(v.float().numpy()).to(ember.bfloat16)
        else:
            out[k] = ember.tensor(v.numpy().copy())
    return out


def make_both(ctor, dtype="float32"):
    """``ctor(nn)`` builds the layer; ember's copy gets torch's initial weights via load_state_dict."""
    tm = ctor(torch.nn)
    em = ctor(ember.nn)
    if dtype == "float64":
        tm = tm.double()
        em = em.double()
    em.load_state_dict(t2e_state(tm.state_dict()))
    return em, tm


def compare_layer(ctor, inputs, *, dtype="float32", train=True, rtol=None, atol=None, grad=True, extra_inputs=(),
                  call=None, outputs=None):
    """Forward + backward of ``ctor(nn)`` on ``inputs`` (numpy arrays: float ones get gradients).
    ``call(module, *inputs)`` overrides ``module(*inputs)``; ``outputs(out)`` picks the tensors to compare."""
    em, tm = make_both(ctor, dtype)
    em.train(train)
    tm.train(train)
    e_in, t_in = [], []
    for a in inputs:
        if isinstance(a, np.ndarray):
            if a.dtype.kind == "f":
                a = a.astype(dtype)
                e_in.append(ember.tensor(a, requires_grad=grad))
                t_in.append(torch.tensor(a, requires_grad=grad))
            else:
                e_in.append(ember.tensor(a))
                t_in.append(torch.tensor(a))
        else:
            e_in.append(a)
            t_in.append(a)
    call = call or (lambda m, *xs: m(*xs))
    oe, ot = call(em, *e_in), call(tm, *t_in)
    if outputs is not None:
        oe, ot = outputs(oe), outputs(ot)
    oe_l = list(oe) if isinstance(oe, (tuple, list)) else [oe]
    ot_l = list(ot) if isinstance(ot, (tuple, list)) else [ot]
    assert_close(oe_l, ot_l, rtol, atol, msg="forward")
    # buffers (running stats) must follow too
    for (k, be), (k2, bt) in zip(em.named_buffers(), tm.named_buffers()):
        assert k == k2
        assert_close(be, bt, rtol, atol, check_dtype=False, msg=f"buffer {k}")
    if not grad:
        return em, tm
    rng = np.random.default_rng(0)
    le = lt = 0
    for a, b in zip(oe_l, ot_l):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            c = rng.standard_normal(tuple(b.shape)).astype(dtype)
            le = le + (a * ember.tensor(c)).sum()
            lt = lt + (b * torch.tensor(c)).sum()
    le.backward()
    lt.backward()
    for i, (a, b) in enumerate(zip(e_in, t_in)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            assert_close(a.grad, b.grad, rtol, atol, msg=f"input grad {i}")
    for (k, pe), (k2, pt) in zip(em.named_parameters(), tm.named_parameters()):
        assert k == k2
        if pt.grad is None:
            assert pe.grad is None or not np.any(pe.grad.numpy()), k
        else:
            assert_close(pe.grad, pt.grad, rtol, atol, msg=f"grad of {k}")
    return em, tm

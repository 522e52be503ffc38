"""On a real GPU: cupy's kernels and Triton launches, not the stand-in.

Skipped unless cupy imports and sees a CUDA device (CI has neither; a lent GPU
machine runs these with ``.ci/gpu_checks.sh``). Run this file in a pytest
process of its own: the stand-in's fixture swaps ``sys.modules["cupy"]``.

* every case of the eager op sweep (``test_ops_sweep.py``) on cupy against the
  CPU: values, dtypes, devices and gradients;
* every benchmark model compiled (dynamo + AOT + Triton) against ember eager on
  the same GPU, inference and a training step's gradients, with the lowering's
  fallbacks turned into errors (``config.debug_lowering``);
* the GPU path never imports torch (a fresh process that compiles and runs a
  model on the GPU with torch importable);
* streams, events and the memory counters on the device."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs cupy and a CUDA GPU")

from . import test_ops_sweep as sweep  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
# GPU math (exp, log, pow ... and reduction orders) differs from numpy's in the last bits
TOL = {"float64": (1e-9, 1e-11), "float32": (2e-5, 1e-6), "float16": (2e-3, 1e-3), "bfloat16": (1e-2, 1e-2)}


def _cupy_type():
    import cupy
    return cupy.ndarray


def _close(g, w, what):
    assert g.device.type == "cuda" and isinstance(g._data, _cupy_type()), (what, g.device, type(g._data))
    assert g.dtype is w.dtype and tuple(g.shape) == tuple(w.shape), (what, g.dtype, w.dtype, g.shape, w.shape)
    gv, wv = g.cpu().numpy(), w.numpy()
    if wv.dtype.kind in "biu":
        np.testing.assert_array_equal(gv, wv, err_msg=what)
    else:
        rtol, atol = TOL.get(str(w.dtype).replace("ember.", ""), (1e-5, 1e-6))
        np.testing.assert_allclose(gv.astype(np.float64), wv.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=what)


@pytest.mark.parametrize("name, fn, make, grad", sweep.CASES, ids=[c[0] for c in sweep.CASES])
def test_op_on_the_gpu(name, fn, make, grad):
    args = make()
    try:
        want, want_g = sweep._run(fn, sweep._to(args, "cpu"), grad)
    except Exception as e:  # noqa: BLE001 - a case whose eager CPU run raises is not about devices
        pytest.skip(f"raises on the CPU too: {type(e).__name__}")
    if name in sweep.MIXED:
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            sweep._run(fn, sweep._to(args, "cuda"), grad)
        return
    got, got_g = sweep._run(fn, sweep._to(args, "cuda"), grad)
    assert len(got) == len(want) and len(got_g) == len(want_g)
    for k, (g, w) in enumerate(zip(got + got_g, want + want_g)):
        if w is None:
            assert g is None, k
        else:
            _close(g, w, f"{name}: output/gradient {k}")


# ----------------------------------------------------------------------- compiled models
def _models():
    sys.path.insert(0, ROOT)
    from benchmarks.models import BUILDERS
    return list(BUILDERS)


def _grads(params):
    return [p.grad.detach().clone() for p in params]


@pytest.mark.parametrize("model_name", _models())
def test_benchmark_model_compiled_matches_eager_on_the_gpu(model_name, monkeypatch, tmp_path):
    from benchmarks.models import build
    from ember.inductor import config
    monkeypatch.setattr(config, "debug_lowering", True)   # a lowering failure raises, not eager fallback
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    ember.compiler.reset()
    ember.manual_seed(0)
    case = build(model_name, ember, 0.25, "cuda")
    if case.kind == "optimizer":
        # two optimizers over the same values: one steps eagerly twice, the other once
        # eagerly (its state exists) and once compiled
        ember.manual_seed(0)
        ref = build(model_name, ember, 0.25, "cuda").model
        ref.step()
        ref.step()
        case.model.step()
        ember.compile(case.model.step)()
        pairs = zip([p for g in case.model.param_groups for p in g["params"]],
                    [p for g in ref.param_groups for p in g["params"]])
        for k, (p, w) in enumerate(pairs):
            _close(p.detach(), w.detach().cpu(), f"adamw parameter {k}")
        return
    x = case.make_input()
    params = list(case.model.parameters())
    with ember.no_grad():
        want = case.model(x)
    compiled = ember.compile(case.model)
    with ember.no_grad():
        got = compiled(x)
    _close(got, want.cpu(), f"{model_name} inference")
    loss = case.loss(case.model(x), x)
    loss.backward()
    want_g = _grads(params)
    for p in params:
        p.grad = None
    closs = case.loss(compiled(x), x)
    closs.backward()
    _close(closs.detach(), loss.detach().cpu(), f"{model_name} training loss")
    for k, (p, w) in enumerate(zip(params, want_g)):
        _close(p.grad, w.cpu(), f"{model_name} gradient {k}")
    ember.compiler.reset()


# ----------------------------------------------------------------------- no torch
def test_the_gpu_path_never_imports_torch(tmp_path):
    """Triton's own driver asks torch for the device and stream; ember installs one
    that asks cupy (``triton_driver.use_cupy_driver``). A fresh process compiles and
    runs a small model and a training step on the GPU; torch is installed there but
    must not be imported."""
    code = (
        "import sys, ember, ember.nn as nn\n"
        "m = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64)).cuda()\n"
        "c = ember.compile(m)\n"
        "x = ember.randn(32, 64, device='cuda')\n"
        "c(x).pow(2).mean().backward()\n"
        "ember.cuda.synchronize()\n"
        "assert m[0].weight.grad is not None and m[0].weight.grad.device.type == 'cuda'\n"
        "print('torch' in sys.modules)\n")
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "False", r.stdout


# ----------------------------------------------------------------------- device semantics
def test_streams_events_and_memory_on_the_gpu():
    import cupy
    before = ember.cuda.memory_allocated()
    x = ember.randn(1024, 1024, device="cuda")
    assert ember.cuda.memory_allocated() >= before + 4 * 1024 * 1024
    s = ember.cuda.Stream()
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    with ember.cuda.stream(s):
        assert cupy.cuda.get_current_stream().ptr == s.cuda_stream
        start.record()
        y = x @ x
        end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0.0
    s.synchronize()
    np.testing.assert_allclose(y.cpu().numpy(), x.cpu().numpy() @ x.cpu().numpy(), rtol=1e-3, atol=1e-2)
    del y
    ember.cuda.synchronize()
    assert ember.cuda.get_device_name()
    assert ember.cuda.get_device_capability()[0] >= 7


def test_compiled_kernels_run_on_the_current_stream_and_cache_their_tuning(tmp_path, monkeypatch):
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.inductor.codegen.triton_wrapper import compile_graph_triton
    import ember.prims as P
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    x = ember.randn(300, 700)
    gm = make_fx(lambda x: (P.sum(P.exp(x), [1]), P.cumsum(x, 1), P.mul(P.tanh(x), 2.0)))(x)
    xd = x.cuda()
    cg = compile_graph_triton(gm, [xd], mode="cuda")
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        got = cg(xd)
    s.synchronize()
    s_got, c_got, t_got = got
    s_want, c_want, t_want = gm(x)
    _close(s_got, s_want, "sum of exp on a side stream")
    _close(t_got, t_want, "tanh on a side stream")
    # a 700-long float32 running sum: the GPU's scan adds in another order than numpy's loop;
    # its error grows with the partial sums (|sum| ~ 60), not with each element
    np.testing.assert_allclose(c_got.cpu().numpy(), c_want.numpy(), rtol=1e-5, atol=1e-4)
    tuned = [f for d, _, fs in os.walk(tmp_path) for f in fs if f == "autotune.json"]
    assert tuned, "autotuning results are cached next to the kernels"

"""The Triton backend's cuda mode, without a GPU.

Verified against the numpy-backed cupy stand-in (``fake_cupy.py``) only:

* ``compile_graph_triton(mode="cuda")`` and ``compile_fx``'s backend switch
  (cuda inputs -> Triton): buffers allocated with ``xp = cupy``, externs on the
  device (matmul as ``cupy.matmul``, a prim fallback as the prim's kernel with
  ``xp = cupy``), outputs returned as ember tensors on the inputs' cuda device,
  ``ember.compile`` end to end (dynamo + AOT + inductor) on cuda tensors. The
  kernels themselves run under Triton's interpreter, through a test double of the
  GPU launcher that hands the stand-in's buffers to the interpreter;
* the real GPU launcher (``triton_driver.CudaLauncher``) up to the driver call:
  ``triton.compile`` is replaced by a recorder, so what is checked is what it
  passes to the compiled kernel's ``run`` (grid, cupy's *current* stream, device
  pointers ``a.data.ptr``, constexprs in signature order), the autotuning loop
  over the configs (timed with cupy events), the cached choice, and that a
  kernel accumulating into its output (scatter-add) runs exactly once.

Not verified: Triton compiling and launching on a real GPU (the PTX test
compiles every kernel for sm_90 ahead of time; launching needs a lent GPU)."""
import numpy as np
import pytest

from inductor._triton import import_triton_interpreted

import_triton_interpreted()

import ember  # noqa: E402
import ember.nn as nn  # noqa: E402
import ember.nn.functional as F  # noqa: E402
import ember.prims as P  # noqa: E402
from ember.fx.experimental.proxy_tensor import make_fx  # noqa: E402
from ember.inductor.codegen.triton_wrapper import compile_graph_triton  # noqa: E402
from ember.runtime import triton_driver as drv  # noqa: E402

RNG = np.random.default_rng(3)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.fixture
def interpreted_gpu(fake_cupy, monkeypatch, tmp_path):
    """The stand-in as cupy, and GPU launches interpreted: the double takes the
    stand-in's device buffers (numpy underneath) and runs the kernel's interpreted
    twin on them in place."""
    launches = []

    class InterpretingLauncher:
        def __init__(self, jitfn, spec, module):
            self.spec = spec
            self.inner = drv.InterpretedLauncher(module.namespace("interpret")[spec.name], spec)

        def __call__(self, xnumel, *args):
            for a in args:
                assert isinstance(a, (fake_cupy.ndarray, int)), type(a)   # only device arrays reach a launch
            launches.append((self.spec.name, fake_cupy.cuda.get_current_stream().ptr))
            self.inner(xnumel, *[a._a if isinstance(a, fake_cupy.ndarray) else a for a in args])

    monkeypatch.setattr(drv, "CudaLauncher", InterpretingLauncher)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    fake_cupy.launches = launches
    return fake_cupy


def _on_device(t, fc):
    return t.device.type == "cuda" and isinstance(t._data, fc.ndarray)


def test_cuda_mode_returns_device_tensors(interpreted_gpu):
    fc = interpreted_gpu
    a, b, h = randn(6, 9), randn(9, 5), randn(4, 4).astype(np.float16)

    def fn(a, b, h):
        m = P.mm(a, b)                                   # the matmul extern
        s = P.amax(P.exp(m), [1])                         # a fused reduction
        hm = P.mm(h, h)                                   # float16 matmul: the prim's fallback
        return P.add(m, 1.0), s, P.cumsum(a, 1), hm

    cpu = [ember.tensor(v) for v in (a, b, h)]
    gm = make_fx(fn)(*cpu)
    dev = [t.cuda() for t in cpu]
    cg = compile_graph_triton(gm, dev, mode="cuda")
    assert any(f.startswith("prims.mm") for f in cg.fallbacks)
    got = cg(*dev)
    want = gm(*cpu)
    for g, w in zip(got, want):
        assert _on_device(g, fc)
        np.testing.assert_allclose(g.cpu().numpy().astype(np.float64), w.numpy().astype(np.float64),
                                   rtol=2e-3 if w.dtype is ember.float16 else 1e-5, atol=1e-5)
    assert fc.launches and {n for n, _ in fc.launches} >= set(cg.specs)


def test_launches_go_to_the_current_stream(interpreted_gpu):
    fc = interpreted_gpu
    x = ember.tensor(randn(5, 7)).cuda()
    gm = make_fx(lambda x: P.sum(P.mul(x, x), [1]))(x.cpu())
    cg = compile_graph_triton(gm, [x], mode="cuda")
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        cg(x)
    assert fc.launches[-1][1] == s.cuda_stream


def test_compile_fx_switches_to_triton_for_cuda_inputs(interpreted_gpu):
    from ember.inductor import compile_fx
    fc = interpreted_gpu
    x, w = ember.tensor(randn(8, 16)), ember.tensor(randn(16, 4))
    gm = make_fx(lambda x, w: (P.tanh(P.mm(x, w)), P.var(x, [0], 1)))(x, w)
    cf = compile_fx(gm, [x.cuda(), w.cuda()])
    assert cf.compiled is not None, cf.eager_reason
    assert "@_jit" in cf.compiled.source                  # Triton source, not C++
    got = cf(x.cuda(), w.cuda())
    for g, e in zip(got, gm(x, w)):
        assert _on_device(g, fc)
        np.testing.assert_allclose(g.cpu().numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
    # CPU inputs still get the C++ backend
    cpu = compile_fx(gm, [x, w])
    assert "@_jit" not in cpu.compiled.source


def test_ember_compile_end_to_end_on_cuda(interpreted_gpu):
    """dynamo + AOT + inductor on a model whose parameters and inputs are cuda
    tensors: forward and backward graphs are Triton; values and gradients match
    eager on the CPU."""
    fc = interpreted_gpu
    ember.manual_seed(0)
    ref = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 5))
    model = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 5))
    model.load_state_dict(ref.state_dict())
    model.cuda()
    x, y = randn(6, 12), RNG.integers(0, 5, 6)
    compiled = ember.compile(lambda x, y: F.cross_entropy(model(x), y))
    loss = compiled(ember.tensor(x).cuda(), ember.tensor(y).cuda())
    loss.backward()
    want = F.cross_entropy(ref(ember.tensor(x)), ember.tensor(y))
    want.backward()
    assert _on_device(loss, fc)
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert _on_device(p.grad, fc)
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert len(fc.launches) >= 4                          # forward and backward kernels ran
    ember.compiler.reset()


# ----------------------------------------------------------------------- the real launcher, up to the driver
class _Recorder:
    """Stands in for the ``CompiledKernel`` ``triton.compile`` returns."""

    def __init__(self, config, log):
        self.config, self.log = config, log
        self.function, self.packed_metadata = object(), object()

    def _init_handles(self):
        pass

    def run(self, *args):
        self.log.append((self.config, args))


@pytest.fixture
def recorded_launches(fake_cupy, monkeypatch, tmp_path):
    log, compiled = [], []

    def fake_compile(jitfn, spec, config, target=None):
        compiled.append((spec.name, dict(config), target))
        return _Recorder(dict(config), log)

    monkeypatch.setattr(drv, "compile_for_target", fake_compile)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    return fake_cupy, log, compiled


def test_cuda_launcher_arguments(recorded_launches):
    fc, log, compiled = recorded_launches
    x = ember.tensor(randn(3, 700)).cuda()
    gm = make_fx(lambda x: P.sum(P.exp(x), [1]))(x.cpu())
    cg = compile_graph_triton(gm, [x], mode="cuda")
    spec, = cg.specs.values()
    assert spec.kind == "persistent" and len(spec.configs) > 1
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        out = cg(x)
    # autotuning: every config compiled for the device's target (sm_90 from cupy) and timed
    assert {c[1]["XBLOCK"] for c in compiled} == {c["XBLOCK"] for c in spec.configs}
    assert all((t.backend, t.arch, t.warp_size) == ("cuda", 90, 32) for _, _, t in compiled)
    assert len(log) == 6 * len(spec.configs) + 1        # warm-up + 5 timed per config, then the launch
    cfg, args = log[-1]
    xb = cfg["XBLOCK"]
    grid, gy, gz, stream, fn, meta, *rest = args
    assert (grid, gy, gz) == (-(-3 // xb), 1, 1)
    assert stream == s.cuda_stream                       # cupy's current stream
    ptrs = rest[3:3 + len(spec.params)]
    assert ptrs[0] == x._data.data.ptr and ptrs[1] == out._data.data.ptr
    assert rest[3 + len(spec.params)] == 3               # xnumel
    assert rest[4 + len(spec.params):] == [cfg[c] for c in spec.constexpr_names()]
    # later launches (the bound fast path) pass the same arguments, on the stream current then
    out2 = cg(x)
    cfg2, args2 = log[-1]
    assert cfg2 == cfg and args2[3] == fc.cuda.get_current_stream().ptr != s.cuda_stream
    assert list(args2[:3]) == [grid, gy, gz]
    assert list(args2[9:11]) == [x._data.data.ptr, out2._data.data.ptr] and list(args2[11:]) == list(args[11:])
    # the choice is cached next to the kernels: a new launcher does not tune again
    n = len(log)
    cg2 = compile_graph_triton(gm, [x], mode="cuda")
    cg2(x)
    assert len(log) == n + 1


def test_scatter_add_is_launched_once(recorded_launches):
    """A kernel that accumulates into its output is not autotuned (its timing runs
    would add several times): the default config, one launch per call."""
    fc, log, compiled = recorded_launches
    x = ember.tensor(randn(4, 6)).cuda()
    idx = ember.tensor(RNG.integers(0, 6, (4, 6))).cuda()
    gm = make_fx(lambda x, i: P.scatter_add(x, 1, i, x))(x.cpu(), idx.cpu())
    cg = compile_graph_triton(gm, [x, idx], mode="cuda")
    add = [s for s in cg.specs.values() if not s.idempotent]
    assert len(add) == 1 and len(add[0].configs) > 1
    cg(x, idx)
    runs = [a for a in log if a[0] == add[0].configs[0]]
    names = [c[0] for c in compiled]
    assert names.count(add[0].name) == 1                 # only the default config was compiled
    assert len([1 for c in compiled if c[0] == add[0].name]) == 1 and runs


def test_convolution_extern_runs_on_the_device(interpreted_gpu):
    """The convolution lowering's native C++ extern works on host arrays only; its
    ``xp_fn`` runs the prim's kernel with the device's array module, so graphs with
    a convolution (ResNet) compile to Triton on cuda instead of running eagerly."""
    from ember.inductor import compile_fx
    fc = interpreted_gpu
    x, w, b = ember.tensor(randn(2, 3, 8, 8)), ember.tensor(randn(4, 3, 3, 3)), ember.tensor(randn(4))
    gm = make_fx(lambda x, w, b: P.maximum(P.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), 0.0))(x, w, b)
    cf = compile_fx(gm, [x.cuda(), w.cuda(), b.cuda()])
    assert cf.compiled is not None, cf.eager_reason
    assert "@_jit" in cf.compiled.source
    got = cf(x.cuda(), w.cuda(), b.cuda())
    got = got[0] if isinstance(got, (tuple, list)) else got
    want = gm(x, w, b)
    want = want[0] if isinstance(want, (tuple, list)) else want
    assert _on_device(got, fc)
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_identical_kernels_share_one_compiled_launcher(recorded_launches):
    """Kernels equal up to their names (one per unrolled step or layer) are compiled,
    autotuned and loaded once: every launch of the three steps' tanh kernels goes to the
    first one's compiled configs, each launch with its own step's buffers."""
    fc, log, compiled = recorded_launches
    h0 = ember.tensor(randn(6, 8)).cuda()
    w = ember.tensor(randn(8, 8)).cuda()

    def steps(h, w):
        outs = []
        for _ in range(3):
            h = P.tanh(P.mm(h, w))
            outs.append(h)
        return outs

    gm = make_fx(steps)(h0.cpu(), w.cpu())
    cg = compile_graph_triton(gm, [h0, w], mode="cuda")
    assert len(cg.specs) == 3
    assert len({drv.kernel_key(s) for s in cg.specs.values()}) == 1
    outs = cg(h0, w)
    first = sorted(cg.specs)[0]
    assert {c[0] for c in compiled} == {first}               # compiled for one kernel name only
    n_cfg = len(cg.specs[first].configs)
    assert len(compiled) == n_cfg                             # each config once
    assert len(log) == 6 * n_cfg + 3                          # one autotuning, then a launch per step
    # (grid x, y, z, stream, function, metadata, 3 hooks, then the kernel's arguments)
    for (_, args), out in zip(log[-3:], outs):
        assert out._data.data.ptr in args[9:]                 # each step writes its own output


def test_shared_kernels_compute_each_step(interpreted_gpu):
    """The shared kernel (the first step's) run with each step's arguments by position:
    values against the eager graph."""
    fc = interpreted_gpu
    h0, w = ember.tensor(randn(6, 8)), ember.tensor(randn(8, 8))

    def steps(h, w):
        outs = []
        for _ in range(3):
            h = P.add(P.tanh(P.mm(h, w)), 1.0)
            outs.append(P.mul(h, 0.5))
        return outs

    gm = make_fx(steps)(h0, w)
    cg = compile_graph_triton(gm, [h0.cuda(), w.cuda()], mode="cuda")
    got = cg(h0.cuda(), w.cuda())
    assert len({n for n, _ in fc.launches}) < len(cg.specs)  # fewer distinct kernels than names
    for g, e in zip(got, gm(h0, w)):
        np.testing.assert_allclose(g.cpu().numpy(), e.numpy(), rtol=1e-5, atol=1e-6)


def test_compiled_adamw_step_reads_its_cpu_step_counts_on_the_device(interpreted_gpu):
    """AdamW keeps each parameter's step count as a 0-d CPU tensor (as torch does); the
    compiled step's kernels read it through a device pointer, so the wrapper copies it over.
    (On an H200 the count reached the launch as the integer 2 used as an address:
    CUDA_ERROR_MISALIGNED_ADDRESS.) The interpreting launcher asserts that only device
    arrays reach a launch."""
    fc = interpreted_gpu
    ember.compiler.reset()

    def make():
        ember.manual_seed(1)
        ps = [ember.randn(7, 5, requires_grad=True) for _ in range(3)]
        for p in ps:
            p.grad = ember.randn(7, 5)
        cuda_ps = [p.detach().cuda().requires_grad_() for p in ps]
        for p, q in zip(cuda_ps, ps):
            p.grad = q.grad.cuda()
        return cuda_ps

    ref_params, params = make(), make()
    ref, opt = ember.optim.AdamW(ref_params, lr=1e-2), ember.optim.AdamW(params, lr=1e-2)
    for _ in range(3):
        ref.step()
    opt.step()                                              # the state exists, step counts on the CPU
    assert opt.state[params[0]]["step"].device.type == "cpu"
    step = ember.compile(opt.step)
    step()
    step()
    assert fc.launches                                      # the update ran as Triton kernels
    for p, q in zip(params, ref_params):
        assert _on_device(p, fc)
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(), rtol=1e-5, atol=1e-6)
    assert float(opt.state[params[0]]["step"]) == 3.0
    ember.compiler.reset()


def test_a_host_array_never_becomes_a_kernel_pointer():
    with pytest.raises(TypeError, match="host .numpy. array of shape \\(\\) reached a GPU kernel"):
        drv._pointer(np.array(2.0, dtype=np.float32))
    assert drv._pointer(7) == 7

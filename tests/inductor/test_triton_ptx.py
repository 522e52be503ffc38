"""Every Triton kernel generated for the benchmark models' graphs compiles ahead
of time to PTX -- and, with the ptxas Triton ships, to a cubin -- for sm_90
(``GPUTarget("cuda", 90, 32)``), without a GPU. A kernel that Triton cannot
compile fails here even though the interpreter (which never compiles) ran it.

Graphs (small scale): forward and training step of the MLP, the nanoGPT
transformer and the LSTM (traced with the decomposition table); the ResNet's
forward and backward graphs as ``ember.compile`` + AOT produce them (convolutions
stay externs, so they are the only fallbacks); the AdamW update of the
benchmark's optimizer compiled as a function of its tensors (``opt.step()``
itself is not captured yet: ``_run_step`` returns None); and the op families of
the interpreter tests (scans, split reductions, scatters, random numbers ...).

The compiles run in one fresh process (``triton_driver.aot_compile``): the first
(default) config of every kernel plus every autotuning config of the first kernel
of each kind. Kernels equal up to their names (a transformer's layers, one AdamW
update per parameter) are compiled once (``aot_job``'s key), the graphs are
traced once per test module, and Triton's compile cache persists across runs
(``$EMBER_TEST_TRITON_CACHE``, default ``~/.cache/ember-tests/triton``).
Measured on the shared 2-core machine: 95-125 s cold, 34 s warm (the tracing and
code generation of all graphs in this process, plus the worker's start)."""
import numpy as np
import pytest

from ._triton import import_triton_interpreted

import_triton_interpreted()

import ember  # noqa: E402
import ember.prims as P  # noqa: E402
from ember.fx.experimental.proxy_tensor import make_fx  # noqa: E402
from ember.inductor.codegen import triton as tg  # noqa: E402
from ember.inductor.codegen.triton_wrapper import compile_graph_triton  # noqa: E402
from ember.runtime import triton_driver as drv  # noqa: E402
from ember.tensor import _make  # noqa: E402

from ._helpers import RNG, rand, randint  # noqa: E402

from ember.prims.table import decompose  # noqa: E402


def _model_graphs():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from benchmarks.models import BUILDERS
    graphs = {}
    for name in ("mlp", "nanogpt", "lstm"):
        ember.manual_seed(0)
        case = BUILDERS[name](ember, scale=0.05)
        x = case.make_input()
        params = list(case.model.parameters())

        def step(x, case=case, params=params):
            loss = case.loss(case.model(x), x)
            return (loss, *ember.autograd.grad(loss, params))

        graphs[f"{name}_forward"] = (decompose(lambda x, case=case: case.model(x))(x), [x])
        graphs[f"{name}_train"] = (decompose(step)(x), [x])
    graphs.update(_resnet_graphs())
    graphs.update(_adamw_graphs())
    return graphs


def _capture(kind, into):
    def compiler(gm, example_inputs):
        into[kind] = (gm, list(example_inputs))
        return gm
    return compiler


def _resnet_graphs():
    """The forward and backward graphs ``ember.compile`` (dynamo + AOT, decomposed to
    prims) hands to its graph compiler for a ResNet training step."""
    from benchmarks.models import BUILDERS
    from ember.aot.backends import aot_autograd
    ember.manual_seed(0)
    case = BUILDERS["resnet"](ember, scale=0.05)
    x = case.make_input()
    got = {}
    model = ember.compile(case.model, backend=aot_autograd(fw_compiler=_capture("resnet_forward", got),
                                                           bw_compiler=_capture("resnet_backward", got)))
    case.loss(model(x), x).backward()
    return got


def _adamw_graphs():
    """The AdamW update of the benchmark's optimizer (6 of its parameters) as a
    function of the tensors it reads and writes (params, grads, both moments, step
    counters), captured by ``ember.compile`` + AOT like any other function."""
    from benchmarks.models import BUILDERS
    from ember.aot.backends import aot_autograd
    from ember.optim.adam import _adam
    ember.manual_seed(0)
    opt = BUILDERS["adamw"](ember, scale=0.05).model
    opt.step()  # creates the state
    group = opt.param_groups[0]
    params = group["params"][:6]
    states = [opt.state[p] for p in params]

    def update(params, grads, exp_avgs, exp_avg_sqs, steps):
        _adam(params, grads, exp_avgs, exp_avg_sqs, [], steps, group)

    got = {}
    fn = ember.compile(update, backend=aot_autograd(fw_compiler=_capture("adamw_step", got)), fullgraph=True)
    with ember.no_grad():
        fn([p.detach() for p in params], [p.grad for p in params], [s["exp_avg"] for s in states],
           [s["exp_avg_sq"] for s in states], [s["step"] for s in states])
    return got


def _op_graphs():
    x = rand(6, 45)
    xl = rand(4, 1500)  # rows longer than a persistent block: looped
    ints = randint(6, 45, dtype=np.int32)
    seed = _make(np.array(123456789, dtype=np.int64))
    idx = randint(6, 45, dtype=np.int64, lo=0, hi=45)

    def ops(x, xl, ints, seed, idx):
        return (P.erfinv(P.tanh(x)), P.floor_divide(x, P.add(x, 3.0)), P.remainder(ints, P.add(P.abs(ints), 7)),
                P.pow(ints, P.remainder(ints, 3)), P.shift_right(ints, P.remainder(ints, 40)),
                P.argmax(x, 1), P.var(xl, [1], 1), P.argmin(xl, 1), P.prod(xl, [1]), P.amax(xl, [1]),
                P.philox_randn([6, 45], seed, seed, ember.float32, None),
                P.convert_element_type(P.exp(x), ember.bfloat16), P.scatter(x, 1, idx, x),
                P.scatter_add(x, 1, idx, x), P.cumsum(x, 1), P.cumprod(ints, 0), P.cumsum(xl, 1),
                P.cumprod(xl, 1), P.cumsum(P.convert_element_type(x, ember.float16), 0),
                P.cumsum(P.convert_element_type(xl, ember.int8), 1))

    big = rand(1 << 16)
    bigi = randint(40, 2048, dtype=np.int8)
    bn = rand(8, 8, 32, 32)

    def split(big, bigi, bn):
        # split reductions: sibling partials, an epilogue, int8 and bool partials; BatchNorm's
        # statistics (sum, var -> rstd) with a row-wise output written by the first pass
        y = P.exp(bn)
        rstd = P.rsqrt(P.add(P.var(bn, [0, 2, 3], 0), 1e-5))
        return (P.div(P.sum(big, [0]), 65536.0), P.amax(big, [0]), P.sum(bigi, [0, 1]),
                P.any(P.gt(bigi, 40), [0, 1]), P.sum(bn, [0, 2, 3]), rstd, y, P.sum(y, [0, 2, 3]),
                P.argmax(big, 0), P.argmin(P.reshape(bigi, [40 * 2048]), 0))

    return {"ops": (make_fx(ops)(x, xl, ints, seed, idx), [x, xl, ints, seed, idx]),
            "split": (make_fx(split)(big, bigi, bn), [big, bigi, bn])}


@pytest.fixture(scope="module")
def aot_results():
    graphs = {**_model_graphs(), **_op_graphs()}
    jobs, per_graph, seen_kinds = [], {}, set()
    for name, (gm, inputs) in graphs.items():
        cg = compile_graph_triton(gm, inputs, mode="source")
        allowed = "prims.convolution:" if name.startswith("resnet") else None
        assert all(allowed and f.startswith(allowed) for f in cg.fallbacks), (name, cg.fallbacks)
        specs = list(cg.specs.values())
        per_graph[name] = [s.name for s in specs]
        for s in specs:
            # every config of the first kernel of each kind, the default config of the rest
            all_cfgs = s.kind not in seen_kinds
            seen_kinds.add(s.kind)
            jobs += drv.aot_job(cg.module, [s], all_configs=all_cfgs)
    # Triton's own compile cache (keyed by kernel source, options, target and Triton's
    # version; only successful compiles are stored) persists across test runs, outside the
    # session's fresh kernel cache: a kernel unchanged since the last run is a cache hit
    import os
    old = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = os.environ.get("EMBER_TEST_TRITON_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "ember-tests", "triton")
    try:
        results = drv.aot_compile(jobs, target=("cuda", 90, 32))
    finally:
        if old is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = old
    assert len(results) == sum(len(j["configs"]) for j in jobs)
    return graphs, per_graph, results, seen_kinds


def test_every_kernel_compiles_for_sm90(aot_results):
    graphs, per_graph, results, kinds = aot_results
    failed = [f"{r['name']} {r['config']}: {r['error'][:400]}" for r in results if not r["ok"]]
    assert not failed, "\n".join(failed)
    assert kinds == {"pointwise", "persistent", "looped"}
    assert sum(len(v) for v in per_graph.values()) >= 150
    compiled = [r for r in results if "same_as" not in r]
    assert len(compiled) >= 60  # distinct kernels (the transformer's layers share theirs)


def test_ptx_targets_sm90(aot_results):
    _, _, results, _ = aot_results
    r = results[0]
    with open(r["ptx_path"]) as f:
        ptx = f.read()
    assert ".target sm_90" in ptx and ".entry " + r["name"] in ptx
    assert all(r["cubin_bytes"] > 0 for r in results)


def test_model_graphs_generate(aot_results):
    _, per_graph, _, _ = aot_results
    for name in ("mlp_forward", "mlp_train", "nanogpt_forward", "nanogpt_train", "lstm_forward", "lstm_train",
                 "resnet_forward", "resnet_backward", "adamw_step", "split"):
        assert per_graph[name], name
    assert any(n.endswith("_split") for n in per_graph["split"])


def test_resnet_convolutions_stay_externs(aot_results):
    """Every convolution of the ResNet graphs is an extern call (the lowering's
    convolution extern, or the prim's fallback), never a generated kernel."""
    from ember.inductor import ir
    graphs, _, _, _ = aot_results
    for name in ("resnet_forward", "resnet_backward"):
        gm, inputs = graphs[name]
        n_conv = sum(1 for n in gm.graph.nodes if n.op == "call_function" and "convolution" in str(n.target))
        cg = compile_graph_triton(gm, inputs, mode="source")
        kinds = [b.kind for b in cg.graph.buffers if isinstance(b, ir.ExternKernel)]
        assert n_conv and sum(1 for k in kinds if "convolution" in k) == n_conv, (n_conv, kinds)
        assert "convolution" not in cg.source


def test_autotune_choice_is_cached_next_to_the_kernels(tmp_path, monkeypatch):
    """The GPU launcher remembers the winning config in autotune.json in the kernel
    module's directory, so a new process launches without re-tuning (the timing
    itself needs a GPU)."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    x = rand(4, 40)
    gm = make_fx(lambda x: P.sum(P.exp(x), [1]))(x)
    cg = compile_graph_triton(gm, [x], mode="source")
    spec = next(iter(cg.specs.values()))
    assert len(spec.configs) > 1
    assert cg.module.path.startswith(str(tmp_path))
    la = drv.CudaLauncher(None, spec, cg.module)
    assert la._best is None
    la._best = len(spec.configs) - 1
    la._save_tuning()
    lb = drv.CudaLauncher(None, spec, cg.module)
    assert lb._best == len(spec.configs) - 1

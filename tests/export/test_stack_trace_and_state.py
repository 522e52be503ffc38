"""Node stack traces (``node.meta["stack_trace"]``) and how ``ep.module()`` shares state with the
exported model, both as torch.export 2.13."""
import re

import numpy as np
import pytest

import ember
from ember.export import export


def _make(lib):
    """The same model in ember or torch (one source, so the user's lines are the same)."""
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = lib.nn.Linear(4, 4)

        def forward(self, x):
            y = self.l(x)
            return y.relu() + 1
    return M()


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\w+)\n    (.+)')


def _frames(trace):
    """[(file, line, function, code)] of a stack trace in torch's format (the first frame
    unindented, the next ones after two spaces, no trailing newline)."""
    parts = trace.split("\n  File ")
    assert not trace.endswith("\n") and trace.startswith("File ")
    out = []
    for i, p in enumerate(parts):
        m = _FRAME.fullmatch(p if i == 0 else "File " + p)
        assert m, (p, trace)
        out.append((m.group(1), int(m.group(2)), m.group(3), m.group(4)))
    return out


def _user_frames(gm_graph):
    out = set()
    for n in gm_graph.nodes:
        if n.op == "call_function":
            out.add(_frames(n.meta["stack_trace"])[0])
    return out


def test_operator_nodes_carry_the_users_lines_like_torch():
    torch = pytest.importorskip("torch")
    ep = export(_make(ember), (ember.randn(3, 4),))
    tep = torch.export.export(_make(torch), (torch.randn(3, 4),))
    mine, theirs = _user_frames(ep.graph), _user_frames(tep.graph)
    assert mine == theirs
    assert {f[3] for f in mine} == {"y = self.l(x)", "return y.relu() + 1"}
    for n in ep.graph.nodes:
        if n.op != "call_function":
            assert n.meta.get("stack_trace") is None
    # the linear's nodes also name the frame inside nn.Linear.forward, as torch's do
    lin = [n for n in ep.graph.nodes if n.op == "call_function" and "self.l(x)" in n.meta["stack_trace"]]
    assert lin and all(len(_frames(n.meta["stack_trace"])) == 2 for n in lin)
    assert all(_frames(n.meta["stack_trace"])[1][2] == "forward" for n in lin)


def test_stack_trace_survives_run_decompositions_and_nn_module_stack_is_kept():
    ep = export(_make(ember), (ember.randn(3, 4),))
    dec = ep.run_decompositions()
    ops = [n for n in dec.graph.nodes if n.op == "call_function"]
    assert ops and all(n.meta.get("stack_trace") for n in ops)
    lin = [n for n in ep.graph.nodes if n.op == "call_function" and "self.l(x)" in n.meta["stack_trace"]]
    assert all("L__self__l" in n.meta["nn_module_stack"] for n in lin)


def test_plain_compile_records_no_stack_trace():
    seen = []

    def backend(gm, ex):
        seen.extend(n.meta.get("stack_trace") for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward
    f = ember.compile(lambda x: x.sin() + 1, backend=backend)
    f(ember.randn(3))
    assert seen and all(s is None for s in seen)


# ---------------------------------------------------------------------- module() and state
def _bn(lib):
    m = lib.nn.Sequential(lib.nn.BatchNorm1d(3))
    m.train()
    return m


def test_module_shares_buffer_updates_with_the_model_as_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng()
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3)]
    results = {}
    for lib in (ember, torch):
        m = _bn(lib)
        ep = (export if lib is ember else torch.export.export)(m, (lib.tensor(xs[0]),))
        rec = {"after_export": m[0].running_mean.detach().numpy().copy()}
        mod = ep.module()
        rec["shares"] = (mod.get_buffer("0.running_mean") is m[0].running_mean,
                         mod.get_parameter("0.weight") is m[0].weight,
                         ep.state_dict["0.running_mean"] is m[0].running_mean)
        mod(lib.tensor(xs[1]))
        rec["orig_after_module_call"] = m[0].running_mean.detach().numpy().copy()
        rec["count"] = int(m[0].num_batches_tracked)
        m(lib.tensor(xs[2]))
        rec["module_after_orig_call"] = mod.get_buffer("0.running_mean").detach().numpy().copy()
        rec["second_module"] = ep.module().get_buffer("0.running_var").detach().numpy().copy()
        results[lib.__name__] = rec
    e, t = results["ember"], results["torch"]
    assert e["shares"] == t["shares"] == (True, True, True)
    assert e["count"] == t["count"] == 1
    for k in ("after_export", "orig_after_module_call", "module_after_orig_call", "second_module"):
        np.testing.assert_allclose(e[k], t[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("method", ["train", "eval"])
def test_module_refuses_train_and_eval_like_torch(method):
    torch = pytest.importorskip("torch")
    mod = export(_bn(ember), (ember.randn(4, 3),)).module()
    tmod = torch.export.export(_bn(torch), (torch.randn(4, 3),)).module()
    with pytest.raises(NotImplementedError) as theirs:
        getattr(tmod, method)()
    with pytest.raises(NotImplementedError, match=re.escape(str(theirs.value))):
        getattr(mod, method)()


def test_unflatten_owns_copies_of_the_state_as_torch():
    """torch's unflatten deep-copies the program's state: running it updates its own buffers,
    not the model's (nor ep.module()'s, which share the model's)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng()
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(2)]
    w, b = rng.standard_normal((3, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    results = {}
    for lib in (ember, torch):
        m = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.BatchNorm1d(3))
        m.train()
        with lib.no_grad():
            m[0].weight.copy_(lib.tensor(w))
            m[0].bias.copy_(lib.tensor(b))
        ep = (export if lib is ember else torch.export.export)(m, (lib.tensor(xs[0]),))
        u = (ember.export.unflatten if lib is ember else torch.export.unflatten)(ep)
        rec = {"shares": (u.get_buffer("1.running_mean") is m[1].running_mean,
                          u.get_parameter("0.weight") is m[0].weight),
               "weight_equal": bool(np.array_equal(u.get_parameter("0.weight").detach().numpy(),
                                                   m[0].weight.detach().numpy())),
               "requires_grad": u.get_parameter("0.weight").requires_grad}
        u(lib.tensor(xs[1]))
        rec["model_after_u"] = m[1].running_mean.detach().numpy().copy()
        rec["u_after_u"] = u.get_buffer("1.running_mean").detach().numpy().copy()
        ep.module()(lib.tensor(xs[0]))
        rec["u_after_module"] = u.get_buffer("1.running_mean").detach().numpy().copy()
        results[lib.__name__] = rec
    e, t = results["ember"], results["torch"]
    assert e["shares"] == t["shares"] == (False, False)
    assert e["weight_equal"] and t["weight_equal"] and e["requires_grad"] == t["requires_grad"]
    for k in ("model_after_u", "u_after_u", "u_after_module"):
        np.testing.assert_allclose(e[k], t[k], rtol=1e-5, atol=1e-6, err_msg=k)

"""Grad mode and dispatch modes are per thread, as in PyTorch.

They were process-wide: a thread under ``no_grad`` (an inference thread, or ``ember.compile``
tracing a graph under its own grad and fake-tensor modes) switched autograd off for every other
thread, and a training thread's ``backward()`` failed with "does not require grad"."""
import threading

import numpy as np

import ember


def _in_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported to the test
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_no_grad_in_one_thread_leaves_another_recording():
    started, release = threading.Event(), threading.Event()

    def inference():
        with ember.no_grad():
            started.set()
            release.wait(5)

    t = threading.Thread(target=inference)
    t.start()
    started.wait(5)
    try:
        x = ember.ones(3, requires_grad=True)
        y = (x * 2).sum()
        assert ember.is_grad_enabled() and y.requires_grad
        y.backward()
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    finally:
        release.set()
        t.join(60)


def test_a_new_thread_starts_with_the_defaults():
    with ember.no_grad():
        assert _in_thread(ember.is_grad_enabled) is True
    ember.set_grad_enabled(False)
    try:
        assert _in_thread(lambda: (ember.ones(2, requires_grad=True) * 2).requires_grad) is True
    finally:
        ember.set_grad_enabled(True)


def test_eager_backward_while_another_thread_compiles():
    stop, errors, steps = threading.Event(), [], [0]

    def eager_training():
        rng = np.random.default_rng(0)
        while not stop.is_set():
            a = rng.standard_normal((6, 6)).astype(np.float32)
            x = ember.tensor(a, requires_grad=True)
            try:
                (x.sin() * 2).sum().backward()
                if not np.allclose(x.grad.numpy(), 2 * np.cos(a), rtol=1e-5, atol=1e-6):
                    errors.append("wrong gradient")
            except Exception as e:  # noqa: BLE001 - collected
                errors.append(repr(e))
            steps[0] += 1

    t = threading.Thread(target=eager_training)
    t.start()
    try:
        for k in range(2):
            ember.manual_seed(k)
            m = ember.nn.Sequential(ember.nn.Linear(8, 8), ember.nn.GELU(), ember.nn.LayerNorm(8))
            ember.compile(m, backend="aot_eager")(ember.randn(3, 8)).sum().backward()
    finally:
        stop.set()
        t.join(60)
    assert steps[0] > 0 and errors == [], errors[:3]

"""ember.compiler.set_stance: PyTorch's stances, as a call, a with block and a decorator."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import dynamo
from ember.compiler import set_stance

_RNG = np.random.default_rng(31)


def random_tensor(*shape, dtype=ember.float32, requires_grad=False):
    return ember.tensor(_RNG.standard_normal(shape), dtype=dtype, requires_grad=requires_grad)


@pytest.fixture(autouse=True)
def _fresh():
    dynamo.reset()
    yield
    set_stance("default")
    dynamo.reset()


def _compiled():
    @ember.compile
    def f(x):
        return x.sin() * 2 + 1
    return f


def _expect(x):
    return x.sin() * 2 + 1


def test_force_eager_ignores_compile_and_restores():
    f, x = _compiled(), random_tensor(4)
    with set_stance("force_eager"):
        assert ember.allclose(f(x), _expect(x))
        assert dynamo.counters["compiled"] == 0
    assert ember.allclose(f(x), _expect(x))
    assert dynamo.counters["compiled"] == 1


def test_eager_on_recompile_uses_cached_code_and_never_compiles():
    f, x = _compiled(), random_tensor(4)
    f(x)
    with set_stance("eager_on_recompile"):
        y = random_tensor(4, 2, dtype=ember.float64)      # would need a new entry
        assert ember.allclose(f(y), _expect(y))
        assert ember.allclose(f(x), _expect(x))
        assert dynamo.counters["compiled"] == 1
    f(y)
    assert dynamo.counters["compiled"] == 2


def test_fail_on_recompile_names_the_function_and_failed_guard():
    f, x = _compiled(), random_tensor(4)
    f(x)
    with set_stance("fail_on_recompile"):
        assert ember.allclose(f(x), _expect(x))            # cached: fine
        with pytest.raises(RuntimeError, match=r"Detected recompile when ember.compile stance is "
                                               r"'fail_on_recompile'. filename: .*function name: 'f'") as info:
            f(random_tensor(2, 3))
        assert "guard failure" in str(info.value) and "shape=(4,)" in str(info.value)

        @ember.compile
        def no_tensors(n):
            return n + 1
        assert no_tensors(3) == 4                          # a frame without tensors is not a recompile


def test_eager_then_compile_runs_the_first_call_eagerly():
    f, x = _compiled(), random_tensor(4)

    @set_stance("eager_then_compile")
    def two_calls():
        a = f(x)
        first = dynamo.counters["compiled"]
        b = f(x)
        return a, b, first, dynamo.counters["compiled"]
    assert set_stance is not None and dynamo.counters["compiled"] == 0
    a, b, first, then = two_calls()
    assert (first, then) == (0, 1)
    assert ember.allclose(a, _expect(x)) and ember.allclose(b, _expect(x))


def test_aot_eager_then_compile_first_call_is_not_cached():
    f, x = _compiled(), random_tensor(4, requires_grad=True)
    with set_stance("aot_eager_then_compile"):
        out = f(x)
        out.sum().backward()
        g = x.grad.clone()
        x.grad = None
        f(x).sum().backward()
        assert ember.allclose(x.grad, g)
        f(x)
    assert dynamo.counters["compiled"] == 2      # the aot_eager one and the real one, used from then on


def test_force_backend_compiles_with_that_backend_in_entries_of_its_own():
    seen = []

    def spy(gm, example_inputs):
        seen.append(len(list(gm.graph.nodes)))
        return gm.forward
    f, x = _compiled(), random_tensor(4)
    with set_stance(force_backend=spy):
        assert ember.allclose(f(x), _expect(x))
    assert len(seen) == 1
    assert ember.allclose(f(x), _expect(x))          # the default backend: compiled anew
    assert dynamo.counters["compiled"] == 2 and len(seen) == 1


def test_called_as_a_function_sets_it_until_changed():
    f, x = _compiled(), random_tensor(4)
    set_stance("force_eager")
    f(x)
    assert dynamo.counters["compiled"] == 0
    set_stance("default")
    f(x)
    assert dynamo.counters["compiled"] == 1


def test_bad_stances_and_use_inside_a_compiled_region_raise():
    with pytest.raises(ValueError, match="invalid ember.compile stance 'bogus'; expected one of default"):
        set_stance("bogus")
    with pytest.raises(RuntimeError, match="non-default stance cannot have force_backend set"):
        set_stance("force_eager", force_backend="eager")
    with pytest.raises(ValueError, match="unknown backend"):
        set_stance(force_backend="nope")

    @ember.compile
    def g(x):
        set_stance("force_eager")
        return x + 1
    with pytest.raises(RuntimeError, match="attempted to set_stance in an ember.compile region"):
        g(random_tensor(3))
    assert dynamo.counters["compiled"] == 0


def test_torch_dynamo_alias():
    import ember._dynamo as td
    assert td.set_stance is set_stance

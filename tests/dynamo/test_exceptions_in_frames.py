"""Exceptions raised and caught while tracing (Python semantics known at trace time: raise
statements, dict/list/attribute misses, failing conversions of constants, exhausted iterators,
imports of missing modules) are simulated by the translator through the frames' exception
tables: one graph, no break, results equal to eager. An exception no traced frame handles
still reaches the user for real."""
import contextlib
from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import assert_one_graph, assert_same, check, random_tensor

RNG = np.random.default_rng(7)


def _x(*shape):
    return random_tensor(RNG, *(shape or (4,)))


def _eager_vs_compiled(fn, *args):
    expected = fn(*args)
    got = ember.compile(fn, backend="eager")(*args)
    assert_same(expected, got)
    return got


# ---------------------------------------------------------------- dict misses
def dict_scale(x, d):
    try:
        s = d["scale"]
    except KeyError:
        s = 2.0
    return x * s


def test_dict_miss_outside_dict_and_guard():
    x = _x()
    d = {"shift": 1.0}
    assert_one_graph(dict_scale, x, d)
    cf = ember.compile(dict_scale, backend="eager")
    assert_same(dict_scale(x, d), cf(x, d))
    d["scale"] = 5.0                       # the key now present: recompiles, new eager answer
    assert_same(dict_scale(x, d), cf(x, d))
    np.testing.assert_allclose(cf(x, d).numpy(), (x * 5.0).numpy(), rtol=1e-6)
    del d["scale"]
    assert_same(dict_scale(x, d), cf(x, d))


def test_dict_miss_in_frame_dict_and_message():
    def f(x):
        d = {"a": 1}
        try:
            v = d["b"]
        except KeyError as e:
            v = len(str(e)) + len(e.args)      # str(KeyError('b')) == "'b'"
        return x + v
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


def test_pop_and_del_misses():
    def f(x):
        d = OrderedDict(a=1)
        n = 0
        try:
            d.pop("zz")
        except KeyError:
            n += 1
        try:
            del d["yy"]
        except LookupError:
            n += 10
        return x * n
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


# ---------------------------------------------------------------- raise statements
def helper(n):
    if n < 0:
        raise ValueError("neg")
    return n


def caught_value_error(x):
    try:
        k = helper(-1)
    except ValueError as e:
        k = len(str(e)) + len(e.args[0]) + (10 if isinstance(e, ValueError) else 0)
    return x + k


def test_inlined_raise_caught_by_caller():
    assert_one_graph(caught_value_error, _x())
    check(caught_value_error, lambda: (_x(),))


def _level3(x):
    raise KeyError("deep")


def _level2(x):
    return _level3(x) + 1


def _level1(x):
    y = x * 2
    return _level2(y) * 3


def test_propagates_out_of_several_inlined_frames():
    def f(x):
        try:
            out = _level1(x)
        except KeyError as e:
            out = x - 1 if e.args == ("deep",) else x
        return out
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


def test_nested_try_tuple_bare_exception_else_finally():
    def f(x):
        log = []
        try:
            try:
                helper(-5)
            except (KeyError, TypeError):
                log.append(1)
            else:
                log.append(2)
            finally:
                log.append(3)
        except Exception as e:
            log.append(4 if type(e) is ValueError else 5)
        try:
            helper(2)
        except ValueError:
            log.append(6)
        else:
            log.append(7)
        finally:
            log.append(8)
        return x * sum(log), log
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))
    assert f(_x())[1] == [3, 4, 7, 8]


def test_reraise_caught_further_up():
    def middle(x):
        try:
            return helper(-1)
        except ValueError:
            x.add(1)            # (a tensor op in the handler)
            raise

    def f(x):
        try:
            middle(x)
        except ValueError as e:
            return x * 3, str(e)
        return x, ""
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


class MyErr(ValueError):
    pass


class CodedError(RuntimeError):
    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code

    def __str__(self):
        return f"[{self.code}] {self.args[0]}"


def test_user_exception_classes_and_raise_from():
    def g(x):
        try:
            raise MyErr("mine")
        except ValueError as e:
            raise CodedError("wrapped", 7) from e

    def f(x):
        try:
            g(x)
        except CodedError as e:
            c = e.__cause__
            ok = isinstance(c, MyErr) and isinstance(c, ValueError) and e.__suppress_context__
            return x + e.code + (100 if ok else 0), str(e), f"{e}", repr(c), type(c).__name__
        return x, "", "", "", ""
    assert_one_graph(f, _x())
    out = check(f, lambda: (_x(),))
    assert out is not None
    assert f(_x())[1:] == ("[7] wrapped", "[7] wrapped", "MyErr('mine')", "MyErr")


def test_implicit_context_and_exception_returned():
    def f(x):
        try:
            try:
                {}["k"]
            except KeyError:
                raise MyErr("during")
        except MyErr as e:
            err = e
        return x * 2, err

    expected = f(_x())
    got = ember.compile(f, backend="eager")(_x())
    e1, e2 = expected[1], got[1]
    assert type(e2) is MyErr and e2.args == e1.args
    assert type(e2.__context__) is KeyError and e2.__context__.args == ("k",)
    assert e2.__cause__ is None and not e2.__suppress_context__
    assert_one_graph(f, _x())


def test_constant_conversions_raise():
    def f(x, s):
        n = 0
        try:
            n += int(s)
        except ValueError:
            n += 1
        try:
            n += 1 // (len(s) - len(s))
        except ZeroDivisionError:
            n += 10
        try:
            n += [1, 2][5]
        except IndexError:
            n += 100
        try:
            n += "abc".index("z")
        except ValueError as e:
            n += 1000 if "substring" in str(e) else 0
        return x * n
    assert_one_graph(f, _x(), "notanint")
    check(f, lambda: (_x(), "notanint"))


_ASSERT_SRC = '''
def f(x, n):
    try:
        assert n > 3, "small"
        y = x + 1
    except AssertionError as e:
        y = x - len(str(e))
    return y
'''


def test_assert_caught():
    # (built with exec: pytest rewrites the assert statements of test modules)
    ns = {"__name__": "assert_probe"}
    exec(compile(_ASSERT_SRC, __file__ + ":assert_probe", "exec"), ns)
    f = ns["f"]
    assert_one_graph(f, _x(), 2)
    check(f, lambda: (_x(), 2))


# ---------------------------------------------------------------- imports
def import_missing(x):
    try:
        import ember_no_such_module_xyz  # noqa: F401
        y = 1
    except ImportError as e:
        y = 3 if e.name == "ember_no_such_module_xyz" else 4
    return x * y


def from_import_missing(x):
    try:
        from ember import no_such_name_xyz  # noqa: F401
        y = 1
    except ImportError:
        y = 5
    return x * y


def test_import_of_missing_module():
    assert_one_graph(import_missing, _x())
    check(import_missing, lambda: (_x(),))
    assert_one_graph(from_import_missing, _x())
    check(from_import_missing, lambda: (_x(),))


# ---------------------------------------------------------------- attributes
class Obj:
    def __init__(self):
        self.present = 2.0


def attr_probe(x, obj):
    v = getattr(obj, "missing", None)
    has = hasattr(obj, "missing2")
    try:
        w = obj.missing2
    except AttributeError as e:
        w = 5 if "missing2" in str(e) else 6
    return x + w + (0 if v is None else v) + (100 if has else 0) + obj.present


def test_missing_attributes_and_guard():
    o = Obj()
    x = _x()
    assert_one_graph(attr_probe, x, o)
    cf = ember.compile(attr_probe, backend="eager")
    assert_same(attr_probe(x, o), cf(x, o))
    o.missing = 7.0                     # set later: recompiles
    assert_same(attr_probe(x, o), cf(x, o))
    o.missing2 = 1.0
    assert_same(attr_probe(x, o), cf(x, o))
    del o.missing, o.missing2
    Obj.missing2 = 3.0                  # on the class
    try:
        assert_same(attr_probe(x, o), cf(x, o))
    finally:
        del Obj.missing2
    assert_same(attr_probe(x, o), cf(x, o))


def test_getattr_default_on_in_frame_object_and_module():
    import math

    def f(x):
        o = Obj()
        a = getattr(o, "nope", 3)
        b = getattr(math, "no_such_fn_xyz", None)
        return x * a + (0 if b is None else 1)
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


# ---------------------------------------------------------------- iterators
def test_next_default_and_stop_iteration():
    def f(x):
        it = iter([x, x + 1])
        a = next(it)
        b = next(it)
        c = next(it, None)
        try:
            next(it)
            d = 1
        except StopIteration:
            d = 2
        return a + b + d + (0 if c is None else 1)
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


# ---------------------------------------------------------------- with blocks
def test_exception_through_no_grad_block_restores_mode():
    def f(x):
        try:
            with ember.no_grad():
                y = x * 2
                helper(-1)
        except ValueError:
            pass
        return y + x * 3

    x = _x().requires_grad_()
    assert_one_graph(f, x)
    out = ember.compile(f, backend="eager")(x)
    ref = f(x)
    assert out.requires_grad and ref.requires_grad
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)


@contextlib.contextmanager
def _tracking(log):
    log.append("enter")
    try:
        yield
    finally:
        log.append("exit")


@contextlib.contextmanager
def _swallow():
    try:
        yield
    except ValueError:
        pass


class _Suppress:
    def __enter__(self):
        return self

    def __exit__(self, typ, val, tb):
        return typ is not None and issubclass(typ, KeyError)


def test_exceptions_through_user_context_managers():
    def f(x):
        log = []
        try:
            with _tracking(log):
                helper(-1)
        except ValueError:
            log.append("caught")
        with _swallow():
            helper(-2)
        with _Suppress():
            {}["missing"]
        return x * len(log), log
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


# ---------------------------------------------------------------- uncaught / fallbacks
def raises_uncaught(x):
    y = x + 1
    helper(-1)
    return y


def test_uncaught_exception_reaches_the_user():
    cf = ember.compile(raises_uncaught, backend="eager")
    with pytest.raises(ValueError, match="neg"):
        cf(_x())
    with pytest.raises(ValueError, match="neg"):
        cf(_x())

    def g(x):
        try:
            helper(-1)
        except KeyError:
            pass
        return x
    with pytest.raises(ValueError, match="neg"):
        ember.compile(g, backend="eager")(_x())

    def h(x, d):
        return x * d["missing"]
    with pytest.raises(KeyError, match="missing"):
        ember.compile(h, backend="eager")(_x(), {})


def test_break_inside_handler_runs_correctly():
    def f(x):
        try:
            k = helper(-1)
        except ValueError:
            dynamo.graph_break()
            k = 4
        return x * k
    _eager_vs_compiled(f, _x())
    _eager_vs_compiled(f, _x())


def test_generator_raising_is_not_materialised_early():
    def gen(x):
        yield x
        raise KeyError("k")

    def f(x):
        out = []
        try:
            for t in gen(x):
                out.append(t * 2)
        except KeyError:
            out.append(x)
        return out
    _eager_vs_compiled(f, _x())


def test_tensor_op_in_try_keeps_handling():
    def f(x, y):
        try:
            z = x + y
        except RuntimeError:
            z = x
        return z
    _eager_vs_compiled(f, _x(3), _x(3))
    assert_same(f(_x(3), _x(4)), ember.compile(f, backend="eager")(_x(3), _x(4))) if False else None
    x, y = _x(3), _x(4)
    expected = f(x, y)
    got = ember.compile(f, backend="eager")(x, y)
    assert_same(expected, got)


# ---------------------------------------------------------------- more control flow
def test_exception_carrying_a_tensor_and_loops():
    def f(x):
        total = x * 0
        for i in range(4):
            try:
                if i % 2:
                    raise ValueError(x * i)
                total = total + i
            except ValueError as e:
                total = total + e.args[0]
                continue
            finally:
                total = total - 1
        return total
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


def test_while_next_stop_iteration_pattern():
    def f(xs):
        it = iter(xs)
        acc = xs[0] * 0
        while True:
            try:
                v = next(it)
            except StopIteration:
                break
            acc = acc + v
        return acc
    assert_one_graph(f, [_x(), _x(), _x()])
    check(f, lambda: ([_x(), _x(), _x()],))


def test_return_in_finally_and_bare_raise_in_helper():
    def rethrow():
        raise                     # the exception the caller handles

    def swallow(x):
        try:
            raise KeyError("a")
        finally:
            return x + 1          # noqa: B012 -- discards the exception

    def f(x):
        try:
            try:
                helper(-3)
            except ValueError:
                rethrow()
        except ValueError as e:
            y = swallow(x) + len(str(e))
        return y
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


def test_exception_after_a_graph_break_in_the_try_body():
    def f(x):
        try:
            y = x + 1
            dynamo.graph_break()
            z = {}["k"]
        except KeyError:
            z = 2
        return y * z
    for _ in range(2):
        _eager_vs_compiled(f, _x())


def test_module_missing_attribute():
    class Net(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(4, 4)

        def forward(self, x):
            scale = getattr(self, "scale", None)
            try:
                shift = self.shift
            except AttributeError:
                shift = 1.0
            y = self.lin(x) + shift
            return y * scale if scale is not None else y

    net = Net()
    x = _x(2, 4)
    assert_one_graph(net, x)
    cnet = ember.compile(net, backend="eager")
    assert_same(net(x), cnet(x))
    net.scale = 3.0
    assert_same(net(x), cnet(x))
    net.shift = -2.0
    assert_same(net(x), cnet(x))


def test_import_guard_on_sys_modules():
    import sys
    import types
    cf = ember.compile(import_missing, backend="eager")
    x = _x()
    assert_same(import_missing(x), cf(x))
    sys.modules["ember_no_such_module_xyz"] = types.ModuleType("ember_no_such_module_xyz")
    try:
        assert_same(import_missing(x), cf(x))
        np.testing.assert_allclose(cf(x).numpy(), x.numpy())      # y == 1: imported now
    finally:
        del sys.modules["ember_no_such_module_xyz"]
    np.testing.assert_allclose(cf(x).numpy(), (x * 3).numpy())


def test_exit_raising_and_exception_in_exit():
    class Boom:
        def __enter__(self):
            return self

        def __exit__(self, typ, val, tb):
            if typ is not None:
                raise RuntimeError("from exit") from val
            return False

    def f(x):
        try:
            with Boom():
                helper(-1)
        except RuntimeError as e:
            return x * 2 if isinstance(e.__cause__, ValueError) else x
        return x
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


def test_getattr_hasattr_on_containers():
    def f(x):
        xs = [x, x + 1]
        d = {"a": x}
        n = (10 if hasattr(xs, "shape") else 1) + (2 if hasattr(xs, "append") else 0)
        n += 3 if getattr(d, "shape", None) is None else 0
        try:
            xs.shape
        except AttributeError:
            n += 100
        return x * n
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


@ember.no_grad()
def _raising_no_grad(x):
    y = x * 2
    raise ValueError("inside no_grad")


def test_exception_out_of_no_grad_decorated_function():
    def f(x):
        try:
            _raising_no_grad(x)
        except ValueError:
            pass
        return x * 3

    x = _x().requires_grad_()
    assert_one_graph(f, x)
    out = ember.compile(f, backend="eager")(x)
    assert out.requires_grad and ember.is_grad_enabled()
    np.testing.assert_allclose(out.detach().numpy(), f(x).detach().numpy(), rtol=1e-6)

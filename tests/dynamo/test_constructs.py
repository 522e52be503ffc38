"""Python constructs the translator does not model must run eagerly with identical results
(or raise the same exception), never crash and never change the answer."""
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend, assert_same


def _try(x):
    try:
        return x / 0 if False else x.relu()
    except ZeroDivisionError:
        return x


def _raise(x):
    if x.dim() == 2:
        raise ValueError("two dims")
    return x


def _match(x):
    match x.dim():
        case 1:
            return x + 1
        case 2:
            return x * 2
        case _:
            return x


def _walrus(x):
    if (n := x.shape[0]) > 1:
        return x * n
    return x


def _class_inside(x):
    class Local:
        k = 3
    return x * Local.k


def _set_literal(x):
    s = {1, 2, 3}
    return x * len(s)


def _nested_gen(x):
    def gen():
        yield x + 1
        yield x + 2
    return sum(gen())


def _yield_from_list(x):
    return [t * 2 for t in (x, x + 1)]


def _dict_comp_filter(x):
    return {k: x * v for k, v in {"a": 1, "b": 2}.items() if v > 1}


def _kwargs_only(x, *, scale=2, **extra):
    return x * scale + len(extra)


def _chained_compare(x):
    n = x.shape[0]
    if 0 < n < 10 and n != 7:
        return x - 1
    return x


def _ternary_tensor_dep(x):
    return x * 2 if x.sum() > -1e9 else x


def _slice_assign_list(x):
    lst = [1, 2, 3, 4]
    lst[1:3] = [x, x]
    return lst[1] + lst[2]


def _string_format(x):
    s = "%d-%s" % (3, "a") + "{}".format(4)
    return x + len(s)


def _lambda_sort(x):
    pairs = sorted([(2, "b"), (1, "a")], key=lambda p: p[0])
    return x * pairs[0][0]


def _exception_in_op(x):
    return x @ ember.randn(7, 7)   # shape error in eager too


def _assert_fails(x):
    assert x.dim() == 3, "not 3d"
    return x


CASES = [_try, _raise, _match, _walrus, _class_inside, _set_literal, _nested_gen, _yield_from_list,
         _dict_comp_filter, _kwargs_only, _chained_compare, _ternary_tensor_dep, _slice_assign_list,
         _string_format, _lambda_sort, _exception_in_op, _assert_fails]


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__ for f in CASES])
def test_construct_matches_eager(fn):
    cnt = CountingBackend()
    cf = ember.compile(fn, backend=cnt)
    for _ in range(2):
        x = ember.randn(3, 4)
        try:
            expected = fn(x)
        except Exception as e:  # noqa: BLE001
            with pytest.raises(type(e)):
                cf(x)
            continue
        assert_same(expected, cf(x))
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons

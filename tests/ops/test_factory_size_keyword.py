"""``zeros(size=...)`` and the other factories' keyword spelling of the sizes, as torch's."""
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
@pytest.mark.parametrize("size", [(2, 3), [4], (), (0, 5)])
def test_size_keyword(name, size):
    e = getattr(ember, name)(size=size, dtype=ember.float64)
    t = getattr(torch, name)(size=size, dtype=torch.float64)
    assert tuple(e.shape) == tuple(t.shape) and e.dtype == ember.float64


def test_size_keyword_with_positional_sizes_is_refused():
    with pytest.raises(TypeError, match="both positional sizes"):
        ember.zeros(2, size=(3,))
    with pytest.raises(TypeError):
        torch.zeros(2, size=(3,))


def test_modes_see_the_keyword():
    from ember.overrides import TorchFunctionMode
    seen = []

    class Log(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append((func.__name__, args, dict(kwargs or {})))
            return func(*args, **(kwargs or {}))
    with Log():
        ember.ones(size=(2,))
    assert seen[0][0] == "ones" and seen[0][2].get("size") == (2,)

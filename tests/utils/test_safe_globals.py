"""``ember.serialization.add_safe_globals`` / ``safe_globals`` / ``get_unsafe_globals_in_checkpoint``:
torch's allowlist extension of the weights-only loader (ember/_torch_pickle.py)."""
import io
import pickle

import numpy as np
import pytest

import ember
import ember.serialization as S


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


def _saved(obj):
    buf = io.BytesIO()
    ember.save(obj, buf)
    return buf.getvalue()


@pytest.fixture(autouse=True)
def _clean():
    S.clear_safe_globals()
    yield
    S.clear_safe_globals()


def test_unknown_class_refused_with_the_names_to_allow():
    raw = _saved({"p": Point(1, 2), "w": ember.randn(3)})
    assert S.get_unsafe_globals_in_checkpoint(io.BytesIO(raw)) == [f"{Point.__module__}.Point"]
    with pytest.raises(pickle.UnpicklingError, match=r"Unsupported global: GLOBAL .*Point.*add_safe_globals"):
        ember.load(io.BytesIO(raw))


def test_add_safe_globals_allows_the_class():
    w = ember.randn(3)
    raw = _saved({"p": Point(1, 2.5), "w": w})
    S.add_safe_globals([Point])
    assert S.get_safe_globals() == [Point]
    assert S.get_unsafe_globals_in_checkpoint(io.BytesIO(raw)) == []
    got = ember.load(io.BytesIO(raw))
    assert (got["p"].x, got["p"].y) == (1, 2.5)
    np.testing.assert_array_equal(got["w"].numpy(), w.numpy())
    S.clear_safe_globals()
    assert S.get_safe_globals() == []
    with pytest.raises(pickle.UnpicklingError):
        ember.load(io.BytesIO(raw))


def test_safe_globals_context_is_scoped_and_renamed_entries_work():
    raw = _saved([Point(3, 4)])
    with S.safe_globals([(Point, f"{Point.__module__}.Point")]):
        assert ember.load(io.BytesIO(raw))[0].y == 4
    assert S.get_safe_globals() == []
    with pytest.raises(pickle.UnpicklingError):
        ember.load(io.BytesIO(raw))
    with pytest.raises(ValueError, match="module.name"):
        S.add_safe_globals([(Point, "nodots")])
    with pytest.raises(TypeError, match="list"):
        S.add_safe_globals(Point)


def test_torch_written_checkpoint_with_a_custom_class():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save({"p": Point(7, 8), "w": torch.arange(4.0)}, buf)
    raw = buf.getvalue()
    assert S.get_unsafe_globals_in_checkpoint(io.BytesIO(raw)) == [f"{Point.__module__}.Point"]
    assert torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(raw)) == \
        S.get_unsafe_globals_in_checkpoint(io.BytesIO(raw))
    with S.safe_globals([Point]):
        got = ember.load(io.BytesIO(raw))
    assert got["p"].x == 7 and got["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_default_checkpoint_names_no_unsafe_globals():
    raw = _saved({"sd": ember.nn.Linear(3, 2).state_dict(), "n": 3})
    assert S.get_unsafe_globals_in_checkpoint(io.BytesIO(raw)) == []

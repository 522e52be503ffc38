"""``pin_memory=True`` on the factories: torch's CPU build raises (no pinned allocator), and so
does ember without an accelerator -- the argument used to be accepted and ignored."""
import numpy as np
import pytest

import ember

_FACTORIES = {
    "zeros": lambda m, pin: m.zeros(2, 3, pin_memory=pin),
    "ones": lambda m, pin: m.ones(4, pin_memory=pin),
    "empty": lambda m, pin: m.empty(2, pin_memory=pin),
    "full": lambda m, pin: m.full((2,), 1.5, pin_memory=pin),
    "tensor": lambda m, pin: m.tensor([1.0, 2.0], pin_memory=pin),
    "empty_strided": lambda m, pin: m.empty_strided((2, 2), (1, 2), pin_memory=pin),
    "empty_permuted": lambda m, pin: m.empty_permuted((2, 3), (1, 0), pin_memory=pin),
    "tril_indices": lambda m, pin: m.tril_indices(3, 3, pin_memory=pin),
    "triu_indices": lambda m, pin: m.triu_indices(3, 3, pin_memory=pin),
    "hann_window": lambda m, pin: m.hann_window(5, pin_memory=pin),
    "kaiser_window": lambda m, pin: m.kaiser_window(5, pin_memory=pin),
}


@pytest.mark.parametrize("name", sorted(_FACTORIES))
def test_pin_memory_true_raises_without_an_accelerator(name):
    if ember.accelerator.is_available():
        pytest.skip("an accelerator is present: the factory pins (see the cuda_device tests)")
    make = _FACTORIES[name]
    with pytest.raises(RuntimeError, match="pin_memory=True requires a CUDA or other accelerator backend"):
        make(ember, True)
    out = make(ember, False)
    assert isinstance(out, ember.Tensor) and not out.is_pinned()


@pytest.mark.parametrize("name", sorted(_FACTORIES))
def test_same_error_as_torch(name):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available() or ember.accelerator.is_available():
        pytest.skip("CPU-only comparison")
    make = _FACTORIES[name]
    with pytest.raises(RuntimeError) as theirs:
        make(torch, True)
    with pytest.raises(RuntimeError) as ours:
        make(ember, True)
    assert str(ours.value) == str(theirs.value)


def test_requires_grad_factories_still_work_unpinned():
    t = ember.zeros(3, requires_grad=True, pin_memory=False)
    assert t.requires_grad and t.is_leaf
    np.testing.assert_array_equal(t.detach().numpy(), np.zeros(3, np.float32))

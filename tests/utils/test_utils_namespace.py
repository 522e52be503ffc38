"""ember.utils resolves its submodules lazily; a missing name must be an AttributeError
(hasattr() and getattr(..., default) rely on it), and utils.hooks is where PyTorch code
imports RemovableHandle from."""
import numpy as np

import ember


def test_missing_attribute_is_attribute_error():
    assert not hasattr(ember.utils, "no_such_thing")
    assert getattr(ember.utils, "no_such_thing", 7) == 7


def test_hooks_removable_handle_removes_a_module_hook():
    from ember.utils.hooks import RemovableHandle
    lin = ember.nn.Linear(3, 2)
    calls = []
    h = lin.register_forward_hook(lambda m, i, o: calls.append(o.shape))
    assert isinstance(h, RemovableHandle)
    x = ember.tensor(np.random.default_rng().standard_normal((4, 3)), dtype=ember.float32)
    lin(x)
    h.remove()
    lin(x)
    assert calls == [(4, 2)]

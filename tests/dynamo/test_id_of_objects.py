"""``id(obj)`` inside a compiled frame for objects with a stable identity (inputs, modules,
outside objects): a constant guarded on the object's id, so another object recompiles."""
import numpy as np

import ember
from ember import dynamo

from ._util import assert_one_graph, random_tensor

RNG = np.random.default_rng(3)


class Holder:
    pass


def test_id_of_tensor_input_and_outside_objects():
    h = Holder()
    lin = ember.nn.Linear(3, 3)

    def f(x, obj):
        seen = {id(x): 1, id(obj): 2, id(lin): 3, id(lin.weight): 4}
        return x * seen[id(x)] + seen[id(obj)] + seen[id(lin.weight)], id(x) == id(obj), id(obj)

    x = random_tensor(RNG, 3)
    assert_one_graph(f, x, h)
    cf = ember.compile(f, backend="eager")
    for args in [(x, h), (x, h), (random_tensor(RNG, 3), h), (x, Holder())]:
        out, same, oid = cf(*args)
        ref = f(*args)
        np.testing.assert_allclose(out.numpy(), ref[0].numpy())
        assert same == ref[1] and oid == ref[2] == id(args[1])


def test_id_of_object_made_in_frame_runs_correctly():
    def f(x):
        o = Holder()
        return x + (1 if id(o) else 0)
    x = random_tensor(RNG, 3)
    np.testing.assert_allclose(ember.compile(f, backend="eager")(x).numpy(), f(x).numpy())
    # bool(id(o)) is always True: traced without a break (see test_id_in_frame_objects.py)
    assert dynamo.explain(f)(x).graph_break_count == 0

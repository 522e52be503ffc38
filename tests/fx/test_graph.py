"""Graph/Node construction, naming, printing and editing (torch-free)."""

import copy
import operator

import pytest

from ember.fx import Graph, GraphLintError, Node, map_arg
from ember.fx.node import immutable_dict, immutable_list


def simple_graph():
    g = Graph()
    x = g.placeholder("x")
    mul = g.call_function(operator.mul, (x, 2))
    add = g.call_function(operator.add, (mul, 3))
    out = g.output(add)
    return g, x, mul, add, out


SEED_STR = """graph():
    %x : [num_users=1] = placeholder[target=x]
    %mul : [num_users=1] = call_function[target=operator.mul](args = (%x, 2), kwargs = {})
    %add : [num_users=1] = call_function[target=operator.add](args = (%mul, 3), kwargs = {})
    return add"""


def test_print_matches_torch_format():
    g, *_ = simple_graph()
    assert str(g) == SEED_STR
    g.lint()


def test_users_and_inputs():
    g, x, mul, add, out = simple_graph()
    assert list(x.users) == [mul]
    assert mul.all_input_nodes == [x]
    assert isinstance(x.users, dict)
    assert add.prev is mul and mul.next is add
    assert out.next is g._root
    assert len(g.nodes) == 4 == len(g)
    assert [n.name for n in reversed(g.nodes)] == ["output", "add", "mul", "x"]


def test_unique_names_follow_torch_rule():
    g = Graph()
    x = g.placeholder("x")
    names = [g.call_function(operator.mul, (x, 2)).name for _ in range(3)]
    assert names == ["mul", "mul_1", "mul_2"]
    # builtins / keywords are never used as-is
    assert g.call_function(abs, (x,)).name == "abs_1"
    assert g.call_function(sum, ([x],)).name == "sum_1"
    assert g.call_method("relu", (x,)).name == "relu"
    assert g.call_method("__add__", (x, 1)).name == "add"
    assert g.call_module("layer1.0.conv", (x,)).name == "layer1_0_conv"
    assert g.get_attr("sub.weight").name == "sub_weight"
    assert g.placeholder("*args").name == "_args"
    assert g.create_node("call_function", operator.add, (x, 1), name="add_7").name == "add_7"
    assert g.create_node("call_function", operator.add, (x, 1), name="add_7").name == "add_8"
    assert g.create_node("call_function", operator.add, (x, 1), name="for").name == "for_1"
    assert g.create_node("call_function", operator.add, (x, 1), name="0abc").name == "_0abc"


def test_class_target_snake_case():
    class MyThing:
        def __call__(self, *a):
            return a

    g = Graph()
    x = g.placeholder("x")
    assert g.call_function(MyThing, (x,)).name == "my_thing"


def test_args_are_immutable_and_tracked():
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    cat = g.call_function(list, ([x, y],), {"k": {"a": x}})
    assert isinstance(cat.args[0], immutable_list)
    assert isinstance(cat.kwargs["k"], immutable_dict)
    with pytest.raises(TypeError):
        cat.args[0].append(x)
    with pytest.raises(TypeError):
        cat.kwargs["z"] = 1
    assert cat.all_input_nodes == [x, y]
    cat.args = ([y],)
    assert cat.all_input_nodes == [y, x]  # kwargs still read x
    cat.kwargs = {}
    assert cat.all_input_nodes == [y]
    assert cat not in x.users


def test_update_arg_kwarg_and_replace_input():
    g, x, mul, add, out = simple_graph()
    y = g.placeholder("y")
    mul.update_arg(1, y)
    assert mul.args == (x, y) and mul in y.users
    mul.update_kwarg("k", x)
    assert mul.kwargs == {"k": x}
    mul.replace_input_with(x, y)
    assert mul.args == (y, y) and mul.kwargs == {"k": y}
    assert mul not in x.users
    mul.insert_arg(0, 5)
    assert mul.args == (5, y, y)


def test_replace_all_uses_with():
    g, x, mul, add, out = simple_graph()
    with g.inserting_after(mul):
        neg = g.call_function(operator.neg, (mul,))
    changed = mul.replace_all_uses_with(neg)
    assert changed == [add]
    assert list(mul.users) == [neg]  # the replacement itself keeps its input
    assert add.args[0] is neg
    g.lint()
    # delete_user_cb can veto users
    sub = g.placeholder("z")
    assert neg.replace_all_uses_with(sub, delete_user_cb=lambda u: False) == []


def test_erase_node_requires_no_users():
    g, x, mul, add, out = simple_graph()
    with pytest.raises(RuntimeError, match="still has users"):
        g.erase_node(mul)
    add.replace_all_uses_with(mul)
    g.erase_node(add)
    assert [n.name for n in g.nodes] == ["x", "mul", "output"]
    assert mul.users == {out: None}
    with pytest.raises(RuntimeError, match="already erased"):
        g.erase_node(add)
    g.lint()


def test_erase_while_iterating_both_directions():
    g = Graph()
    x = g.placeholder("x")
    dead = [g.call_function(operator.neg, (x,)) for _ in range(4)]
    g.output(x)
    for n in g.nodes:
        if n in dead[:2]:
            g.erase_node(n)
    for n in reversed(g.nodes):
        if n in dead[2:]:
            g.erase_node(n)
    assert [n.name for n in g.nodes] == ["x", "output"]
    g.lint()


def test_inserting_before_after():
    g, x, mul, add, out = simple_graph()
    with g.inserting_before(add):
        a = g.call_function(operator.neg, (mul,))
        b = g.call_function(operator.pos, (a,))
    with g.inserting_after(x):
        c = g.call_function(operator.neg, (x,))
        d = g.call_function(operator.pos, (c,))
    with g.inserting_before():
        p = g.placeholder("first")
    assert [n.name for n in g.nodes] == ["first", "x", "neg_1", "pos_1", "mul", "neg", "pos", "add", "output"]
    g.lint()
    # default insertion point is restored: appends at the end
    e = g.call_function(operator.neg, (x,))
    assert e.prev is out


def test_prepend_append_move_nodes():
    g, x, mul, add, out = simple_graph()
    y = g.placeholder("y")  # lands after output
    x.append(y)
    assert [n.name for n in g.nodes] == ["x", "y", "mul", "add", "output"]
    mul.prepend(y)
    assert [n.name for n in g.nodes] == ["x", "y", "mul", "add", "output"]
    g.lint()


def test_node_copy_and_graph_copy():
    g, x, mul, add, out = simple_graph()
    mul.meta["note"] = 1
    g2 = Graph()
    y = g2.placeholder("y")
    val_map = {x: y}
    res = g2.graph_copy(g, val_map)
    g2.output(res)
    assert [n.name for n in g2.nodes] == ["y", "mul", "add", "output"]
    assert val_map[mul].meta == {"note": 1} and val_map[mul].meta is not mul.meta
    g2.lint()
    g3 = copy.deepcopy(g)
    assert str(g3) == str(g)
    assert all(a is not b for a, b in zip(g3.nodes, g.nodes))
    g3.lint()


def test_node_from_other_graph_rejected_on_create():
    g, x, *_ = simple_graph()
    g2 = Graph()
    with pytest.raises(RuntimeError, match="another graph"):
        g2.call_function(operator.neg, (x,))


def test_lint_catches_broken_graphs():
    # missing output
    g = Graph()
    g.placeholder("x")
    with pytest.raises(GraphLintError, match="no output"):
        g.lint()
    # use before definition
    g, x, mul, add, out = simple_graph()
    add.append(mul)  # move mul after its user
    with pytest.raises(GraphLintError, match="before its definition"):
        g.lint()
    # duplicate names
    g, x, mul, add, out = simple_graph()
    add.name = "mul"
    with pytest.raises(GraphLintError, match="duplicate"):
        g.lint()
    # node from another graph smuggled in through the back door
    g, x, mul, add, out = simple_graph()
    g2, x2, *_ = simple_graph()
    add._set_args_kwargs((x2, 3), {})
    with pytest.raises(GraphLintError, match="another graph"):
        g.lint()
    # dangling user
    g, x, mul, add, out = simple_graph()
    x.users[add] = None
    with pytest.raises(GraphLintError, match="does not read it"):
        g.lint()
    # two outputs
    g, x, mul, add, out = simple_graph()
    g.output(mul)
    with pytest.raises(GraphLintError, match="2 output"):
        g.lint()


def test_lint_checks_owning_module_targets():
    import types

    g = Graph(owning_module=types.SimpleNamespace(sub=types.SimpleNamespace(w=1)))
    x = g.placeholder("x")
    w = g.get_attr("sub.w")
    g.output((x, w))
    g.lint()
    g.get_attr("sub.nope")
    with pytest.raises(GraphLintError, match="sub.nope"):
        g.lint()


def test_bad_ops_and_targets():
    g = Graph()
    with pytest.raises(ValueError):
        g.create_node("call_thing", operator.add)
    with pytest.raises(ValueError):
        g.create_node("call_function", "not callable")
    with pytest.raises(ValueError):
        g.create_node("call_method", operator.add)


def test_format_node_variants():
    g = Graph()
    x = g.placeholder("x", default_value=3)
    w = g.get_attr("w")
    m = g.call_method("clamp", (x,), {"min": 0.0})
    lst = g.call_function(operator.getitem, (m, (slice(None, 2), Ellipsis, None)))
    out = g.output({"a": lst, "t": (w,)})
    assert x.format_node() == "%x : [num_users=1] = placeholder[target=x](default=3)"
    assert w.format_node() == "%w : [num_users=1] = get_attr[target=w]"
    assert m.format_node() == "%clamp : [num_users=1] = call_method[target=clamp](args = (%x,), kwargs = {min: 0.0})"
    assert lst.format_node() == (
        "%getitem : [num_users=1] = call_function[target=operator.getitem]"
        "(args = (%clamp, (slice(None, 2, None), Ellipsis, None)), kwargs = {})"
    )
    assert out.format_node() == "return {'a': getitem, 't': (w,)}"
    x.type = int
    assert x.format_node() == "%x : int [num_users=1] = placeholder[target=x](default=3)"


def test_map_arg_handles_nesting():
    g, x, mul, add, out = simple_graph()
    seen = []
    r = map_arg({"a": [x, (mul, slice(add, None))], "b": 3}, lambda n: seen.append(n) or n.name)
    assert r == {"a": ["x", ("mul", slice("add", None))], "b": 3}
    assert seen == [x, mul, add]


def test_find_nodes_and_output_node():
    g, x, mul, add, out = simple_graph()
    assert g.find_nodes(op="call_function", target=operator.add) == [add]
    assert g.find_nodes(op="placeholder") == [x]
    assert g.output_node is out

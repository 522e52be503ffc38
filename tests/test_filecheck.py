"""ember.testing.FileCheck against torch.testing.FileCheck: same pass/fail and same messages."""
import random

import pytest

from ember.testing import FileCheck

torch = pytest.importorskip("torch")


def _outcome(cls, chain, args):
    f = cls()
    try:
        for name, a, kw in chain:
            getattr(f, name)(*a, **kw)
        f.run(*args)
        return ("OK",)
    except Exception as e:  # noqa: BLE001 - the exception is what is compared
        msg = str(e)
        if "Count == 0" in msg:          # torch's assert names its source file and line
            msg = "count-0"
        return (type(e).__name__, msg)
    finally:
        if cls is FileCheck:
            f._has_run = True            # keep the not-run report out of the test output


def _same(chain, *args):
    expected = _outcome(torch.testing.FileCheck, chain, args)
    got = _outcome(FileCheck, chain, args)
    assert got == expected
    return got


def C(name, *a, **kw):
    return (name, a, kw)


TEXT = "l1\nl2\nl3\nl4\nl5\nl6 abc\nl7xx\nl8\nl9\nl10\nl11\nl12"


@pytest.mark.parametrize("chain,text", [
    ([C("check", "foo")], "bar baz"),
    ([C("check", "a"), C("check_not", "b"), C("check", "c")], "a\nb\nc"),
    ([C("check", "a"), C("check_not", "b"), C("check", "c")], "a\nx\nc"),
    ([C("check_count", "a", 2, exactly=True)], "a a a"),
    ([C("check_count", "a", 2, exactly=True)], "a a"),
    ([C("check_count", "a", 3)], "a a"),
    ([C("check_count", "a", 0, exactly=True)], "bab"),
    ([C("check_count", "a", 0)], "bab"),
    ([C("check", "a"), C("check_next", "b")], "a\nx\nb"),
    ([C("check", "a"), C("check_next", "b")], "a\nb"),
    ([C("check", "a"), C("check_same", "b")], "a\nb"),
    ([C("check", "a"), C("check_same", "b")], "a b"),
    ([C("check_dag", "b"), C("check_dag", "a"), C("check", "c")], "a b c"),
    ([C("check_dag", "b"), C("check_dag", "z")], "a b c"),
    ([C("check_regex", "a+b")], "xxaaab"),
    ([C("check_regex", "a+c")], "xxaaab"),
    ([C("check", "foo"), C("check_regex", "b.r"), C("check_next", "x")], "xxaaab\nfoo\nbar\nx"),
    ([C("check", "zz")], TEXT),
    ([C("check", "l6"), C("check", "zz")], TEXT),
    ([C("check_not", "l7")], TEXT),
    ([C("check_not", "l2\nl3")], TEXT),
    ([C("check_not", "12")], TEXT + "\n"),
    ([C("check", '"q"\t\\\a\x01')], "x"),
    ([C("check", "x")], ""),
    ([], "x"),
    ([C("check_source_highlighted", "x + y")], "foo\n  x + y\n  ~~~~~ <--- HERE\n"),
    ([C("check_source_highlighted", "x + y")], "foo\n  x + y\n  ~~~~~~ <--- HERE\n"),
    ([C("check_source_highlighted", "x + y")], "foo\n  x + y\n ~~~~~ <--- HERE\n"),
    ([C("check_source_highlighted", "x + y")], "foo\n  x + y\n"),
    ([C("check_source_highlighted", "q")], "foo\n  x + y\n  ~~~~~"),
    ([C("check", "é"), C("check_same", "x")], "é\nx"),
])
def test_chains_match_torch(chain, text):
    _same(chain, text)


def test_non_ascii_highlight_widths_match_torch():
    # offsets are UTF-8 bytes as torch's (two tildes under "ü"); torch prints the quoted
    # non-ASCII search string as octal garbage, ember as the text: only that line differs
    chain, text = [C("check", "é"), C("check_not", "ü")], "é ab\nü x"
    expected = _outcome(torch.testing.FileCheck, chain, (text,))
    got = _outcome(FileCheck, chain, (text,))
    assert got[1].splitlines()[1:] == expected[1].splitlines()[1:]
    assert got[1].splitlines()[0] == 'Expected to not find "ü" but found it'


@pytest.mark.parametrize("checks,text", [
    ("# CHECK: x\n# CHECK-NOT: y\n", "x y"),
    ("# CHECK: x\n#CHECK-COUNT-EXACTLY-2: y\n", "x y y y"),
    ("# CHECK: x\n#CHECK-COUNT-EXACTLY-2: y\n", "x y y"),
    ("# CHECK: x\n#  CHECK-FOO: y\n", "x y y y"),
    ("# CHECK: x\n#CHECK-SOURCE-HIGHLIGHTED: y\n", "x y y y"),
    ("#CHECK-REGEX: a+\n# CHECK-COUNT-2: b\n", "aaa b"),
    ("#CHECK-COUNT-x: a\n", "aaa b"),
    ("#CHECK-COUNT-2 a\n", "aaa b"),
    ("#CHECK: a", "aaa b"),
    ("#CHECK: a\n#CHECK-NOT: a", "aaa b"),
    ("no checks", "aaa b"),
    ("#\tCHECK-DAG: b\n# CHECK-DAG: a\n# CHECK-NEXT: c", "b a\nc"),
])
def test_directives_match_torch(checks, text):
    _same([], checks, text)


def test_random_chains_match_torch():
    rng = random.Random(1234)
    alpha = ["a", "b", "ab", " ", "\n", "~", "x + y", "c"]
    toks = ["a", "b", "ab", "c", "\n", "a\nb", "~", "", "x", "ba", " a"]
    names = ["check", "check_not", "check_same", "check_next", "check_dag", "check_count",
             "check_source_highlighted", "check_regex"]
    failures = 0
    for _ in range(400):
        text = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 25)))
        chain = []
        for _ in range(rng.randint(1, 5)):
            name = rng.choice(names)
            if name == "check_count":
                chain.append(C(name, rng.choice(toks), rng.randint(0, 3), exactly=rng.random() < .5))
            elif name == "check_regex":
                chain.append(C(name, rng.choice(["a+", "b.", "[ab]c", "x", "a\\s"])))
            else:
                chain.append(C(name, rng.choice(toks)))
        failures += _same(chain, text) != ("OK",)
    assert 50 < failures < 390          # both outcomes exercised


def test_chaining_returns_self_and_passes():
    f = FileCheck()
    assert f.check("def") is f
    f.check_next("return").check_not("aten").run("def forward(x):\nreturn x")


def test_not_run_is_reported(capsys):
    f = FileCheck().check("a")
    del f
    import gc
    gc.collect()
    assert capsys.readouterr().out == "You have not run this instance of FileCheck!\nFileCheck checks:\n\tCHECK: a\n"


def test_bad_arguments():
    with pytest.raises(TypeError, match="'str' must be str"):
        FileCheck().check(5)
    with pytest.raises(TypeError, match="'count' must be a non-negative int"):
        FileCheck().check_count("a", -1)
    f = FileCheck().check("a")
    with pytest.raises(TypeError, match="text to check as a str"):
        f.run(5)


def test_runs_on_fx_graph_module():
    import ember
    import ember.fx

    class M(ember.nn.Module):
        def forward(self, x):
            return ember.relu(x) + 1

    gm = ember.fx.symbolic_trace(M())
    FileCheck().check("def forward").check("relu").check_next("add").run(gm)
    FileCheck().check("call_function").run(gm.graph)

"""ember.package against torch.package: round trips of packaged models, actions and their
errors, the archive layout, and archives crossing between the two implementations."""
import importlib
import inspect
import io
import random
import sys
import textwrap
import zipfile

import numpy as np
import pytest

import ember
from ember.package import (EmptyMatchError, GlobGroup, OrderedImporter, PackageExporter, PackageImporter,
                           PackagingError, is_from_package, sys_importer)
from ember.package.importer import ObjMismatchError


_counter = [0]


def _unique(prefix):
    _counter[0] += 1
    return f"{prefix}_{_counter[0]}_{random.randrange(10 ** 9)}"


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    """Write modules to a fresh directory on sys.path; yield a writer; forget them afterwards."""
    src = tmp_path / "src"
    src.mkdir()
    monkeypatch.syspath_prepend(str(src))
    written = []

    def write(name, code, package=False):
        path = src.joinpath(*name.split("."))
        if package:
            path.mkdir(parents=True, exist_ok=True)
            path = path / "__init__.py"
        else:
            path = path.with_suffix(".py")
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(code))
        written.append(name)
        importlib.invalidate_caches()
        return path

    write.dir = src
    yield write
    for name in written:
        sys.modules.pop(name, None)


def _forget(*names):
    for n in names:
        sys.modules.pop(n, None)


MODEL_SRC = """
import ember
import json
from {helper} import act, SCALE

class Net(ember.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc1 = ember.nn.Linear(n_in, 8)
        self.fc2 = ember.nn.Linear(8, n_out)
        self.register_buffer("shift", ember.randn(n_out))
        self.config = json.dumps({{"n_in": n_in}})

    def forward(self, x):
        return self.fc2(act(self.fc1(x))) * SCALE + self.shift
"""

HELPER_SRC = """
import ember
SCALE = 1.5
def act(x):
    return ember.nn.functional.gelu(x)
"""


def test_model_roundtrip_with_source_deleted(user_modules, tmp_path):
    mod, helper = _unique("models"), _unique("helpers")
    user_modules(helper, HELPER_SRC)
    path = user_modules(mod, MODEL_SRC.format(helper=helper))
    m = importlib.import_module(mod).Net(5, 3)
    x = ember.randn(4, 5)
    expected = m(x).detach().numpy().copy()
    pkg = tmp_path / "model.pt"
    act = importlib.import_module(helper).act
    with PackageExporter(pkg) as e:
        e.intern([mod, helper])
        e.save_pickle("model", "model.pkl", m)
        e.save_pickle("model", "fn.pkl", {"act": act})     # functions pickle by reference too
        assert e.interned_modules() == sorted([mod, helper])
        assert "json" in e.externed_modules() and "ember" in e.externed_modules()
    # the user code is gone from the host: the class must come from the package
    path.unlink()
    (user_modules.dir / f"{helper}.py").unlink()
    _forget(mod, helper)
    importlib.invalidate_caches()
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(mod)
    imp = PackageImporter(pkg)
    m2 = imp.load_pickle("model", "model.pkl")
    assert type(m2).__name__ == "Net"
    assert type(m2).__module__ == f"{imp.id()}.{mod}"
    assert is_from_package(m2) and not is_from_package(m)
    np.testing.assert_array_equal(m2(x).detach().numpy(), expected)
    act2 = imp.load_pickle("model", "fn.pkl")["act"]
    assert act2 is imp.import_module(helper).act and act2.__module__ == f"{imp.id()}.{helper}"
    np.testing.assert_array_equal(act2(x).numpy(), ember.nn.functional.gelu(x).numpy())
    assert isinstance(m2.fc1.weight, ember.nn.Parameter) and m2.fc1.weight.requires_grad
    assert m2.config == '{"n_in": 5}'
    # packaged code's source is reachable (tracebacks, inspect, ember.compile)
    assert "class Net" in inspect.getsource(type(m2))
    out = ember.compile(m2, backend="eager")(x)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-6, atol=1e-6)


def test_tensors_of_many_dtypes_and_sharing(tmp_path):
    rng = np.random.default_rng()
    objs = {
        "f32": ember.tensor(rng.standard_normal((3, 4)).astype(np.float32)),
        "f64": ember.tensor(rng.standard_normal(5)),
        "i64": ember.tensor(rng.integers(-100, 100, (2, 3))),
        "bool": ember.tensor(rng.random(6) > 0.5),
        "f16": ember.tensor(rng.standard_normal(4).astype(np.float16)),
        "bf16": ember.randn(3, dtype=ember.bfloat16),
        "scalar": ember.tensor(float(rng.standard_normal())),
        "grad": ember.randn(2, 2).requires_grad_(),
        "strided": ember.randn(4, 6).t()[1:3],
    }
    objs["again"] = objs["f32"]
    buf = io.BytesIO()
    with PackageExporter(buf) as e:
        e.save_pickle("data", "d.pkl", objs)
        e.save_pickle("data", "d4.pkl", objs, pickle_protocol=4)
    for res in ("d.pkl", "d4.pkl"):
        buf.seek(0)
        got = PackageImporter(buf).load_pickle("data", res)
        assert got["again"] is got["f32"]
        for k, v in objs.items():
            assert got[k].dtype == v.dtype and got[k].shape == v.shape
            assert got[k].requires_grad == v.requires_grad
            np.testing.assert_array_equal(got[k].detach().float().numpy(), v.detach().float().numpy())


def test_same_object_twice_and_resources(tmp_path):
    m = ember.nn.Linear(3, 2)
    buf = io.BytesIO()
    with PackageExporter(buf) as e:
        e.save_pickle("a", "m.pkl", m)
        e.save_pickle("b", "m.pkl", m)
        e.save_text("res", "notes.txt", "héllo\nworld")
        e.save_binary("res", "blob.bin", bytes(range(256)))
    buf.seek(0)
    imp = PackageImporter(buf)
    a, b = imp.load_pickle("a", "m.pkl"), imp.load_pickle("b", "m.pkl")
    for got in (a, b):
        np.testing.assert_array_equal(got.weight.detach().numpy(), m.weight.detach().numpy())
    assert imp.load_text("res", "notes.txt") == "héllo\nworld"
    assert imp.load_binary("res", "blob.bin") == bytes(range(256))
    # one storage record per tensor, written once
    buf.seek(0)
    names = zipfile.ZipFile(buf).namelist()
    assert sorted(n for n in names if n.startswith("archive/.data/") and n.endswith(".storage")) == \
        ["archive/.data/0.storage", "archive/.data/1.storage"]


def test_map_location_callable(tmp_path):
    t = ember.randn(3)
    buf = io.BytesIO()
    with PackageExporter(buf) as e:
        e.save_pickle("p", "t.pkl", t)
    buf.seek(0)
    seen = []
    got = PackageImporter(buf).load_pickle("p", "t.pkl", map_location=lambda s, loc: seen.append(loc))
    assert seen == ["cpu"]
    np.testing.assert_array_equal(got.numpy(), t.numpy())


def test_extern_modules_come_from_the_host(user_modules, tmp_path):
    ext, user = _unique("ext"), _unique("user")
    user_modules(ext, "VALUE = [1, 2]\n")
    user_modules(user, f"import {ext}\ndef get():\n    return {ext}.VALUE\n")
    pkg = tmp_path / "p.pt"
    with PackageExporter(pkg) as e:
        e.extern(ext)
        e.intern(user)
        e.save_module(user)
    imp = PackageImporter(pkg)
    host = importlib.import_module(ext)
    assert imp.import_module(user).get() is host.VALUE
    assert imp.extern_modules == [ext]
    with pytest.raises(ImportError, match="has been disallowed"):
        PackageImporter(pkg, module_allowed=lambda name: name != ext)


def test_mocked_module_raises_torch_error(user_modules, tmp_path):
    torch = pytest.importorskip("torch")
    dep, user = _unique("heavy"), _unique("light")
    user_modules(dep, "def train(x):\n    return x\nCONST = 3\n")
    user_modules(user, f"import {dep}\ndef f(x):\n    return x + 1\ndef g():\n    return {dep}.train(1)\n"
                       f"def h():\n    return {dep}.CONST + 1\n")
    msgs = []
    for P, PI in ((PackageExporter, PackageImporter),
                  (torch.package.PackageExporter, torch.package.PackageImporter)):
        buf = io.BytesIO()
        with P(buf) as e:
            e.mock(dep)
            e.intern(user)
            e.save_module(user)
        buf.seek(0)
        imp = PI(buf)
        mod = imp.import_module(user)
        assert mod.f(2) == 3
        with pytest.raises(NotImplementedError) as e1:
            mod.g()
        with pytest.raises(NotImplementedError) as e2:
            mod.h()
        msgs.append([str(e1.value).replace(imp.id(), "<ID>"), str(e2.value).replace(imp.id(), "<ID>")])
        buf.seek(0)
        assert f"archive/{dep}.py" in zipfile.ZipFile(buf).namelist()
        assert "archive/_mock.py" in zipfile.ZipFile(buf).namelist()
    assert msgs[0] == msgs[1]
    assert "was mocked out during packaging but it is being used in __call__" in msgs[0][0]


def _packaging_error(P, setup):
    buf = io.BytesIO()
    with pytest.raises(Exception) as info:
        with P(buf, **setup.get("kw", {})) as e:
            setup["run"](e)
    return info.value


def test_packaging_errors_match_torch(user_modules):
    torch = pytest.importorskip("torch")
    a, b, c, d = (_unique(n) for n in ("mod_a", "mod_b", "mod_c", "mod_d"))
    user_modules(d, "X = 1\n")
    user_modules(c, "Y = 2\n")
    user_modules(b, f"import {c}\nimport {d}\n")
    user_modules(a, f"import {b}\nimport sys\n")

    def run(e):
        e.deny(d)
        e.intern([a, b])
        e.save_module(a)

    for debug in (False, True):
        ours = _packaging_error(PackageExporter, {"run": run, "kw": {"debug": debug}})
        theirs = _packaging_error(torch.package.PackageExporter, {"run": run, "kw": {"debug": debug}})
        assert type(ours) is PackagingError and type(theirs).__name__ == "PackagingError"
        assert str(ours) == str(theirs)
        assert c in str(ours) and d in str(ours)

    def run_empty(e):
        e.extern("nothing_matches_this.**", allow_empty=False)
        e.save_source_string("m", "x = 1\n")

    ours = _packaging_error(PackageExporter, {"run": run_empty})
    theirs = _packaging_error(torch.package.PackageExporter, {"run": run_empty})
    assert type(ours) is EmptyMatchError and str(ours) == str(theirs)


def test_mocked_object_used_in_pickle_is_an_error(user_modules):
    torch = pytest.importorskip("torch")
    dep = _unique("mockdep")
    user_modules(dep, "class Thing:\n    pass\n")
    mod = importlib.import_module(dep)

    def run(e):
        e.mock(dep)
        e.save_pickle("p", "x.pkl", {"thing": mod.Thing()})

    ours = _packaging_error(PackageExporter, {"run": run})
    theirs = _packaging_error(torch.package.PackageExporter, {"run": run})
    assert isinstance(ours, PackagingError) and str(ours) == str(theirs)
    assert "was mocked out during packaging but is being used in resource - `x.pkl`" in str(ours)


def test_source_strings_files_and_relative_imports(user_modules, tmp_path):
    pkgname = _unique("pkgdir")
    d = tmp_path / "tree" / "whatever"
    (d / "sub").mkdir(parents=True)
    (d / "__init__.py").write_text("from .sub import leaf\nTOP = leaf.VALUE * 2\n")
    (d / "sub" / "__init__.py").write_text("")
    (d / "sub" / "leaf.py").write_text("from .. import sub\nVALUE = 21\n")
    buf = io.BytesIO()
    with PackageExporter(buf) as e:
        e.save_source_file(pkgname, str(d))
        e.save_source_string("single", f"import {pkgname}\nimport math\nR = math.floor({pkgname}.TOP / 2)\n"
                                       f"import {pkgname}.sub.leaf as L2\nimport torch_package_importer as me\n")
    buf.seek(0)
    imp = PackageImporter(buf)
    assert imp.import_module(pkgname).TOP == 42
    assert imp.import_module("single").R == 21
    assert imp.import_module(f"{pkgname}.sub.leaf").VALUE == 21
    assert imp.import_module("single").L2 is imp.import_module(f"{pkgname}.sub.leaf")
    assert imp.import_module("single").me is imp       # packaged code can reach its importer
    assert imp.import_module(pkgname).__name__ == f"{imp.id()}.{pkgname}"
    assert imp.import_module(pkgname) is imp.import_module(pkgname)
    fs = imp.file_structure()
    assert fs.has_file(f"{pkgname}/sub/leaf.py") and fs.has_file("single.py")
    assert not fs.has_file(f"{pkgname}/missing.py")
    only = imp.file_structure(include=f"{pkgname}/**", exclude="**/__init__.py")
    assert only.has_file(f"{pkgname}/sub/leaf.py") and not only.has_file(f"{pkgname}/__init__.py")
    with pytest.raises(ModuleNotFoundError, match="self-contained archive"):
        imp.import_module("not_in_the_archive")


def test_importers_have_distinct_ids(tmp_path):
    buf = io.BytesIO()
    with PackageExporter(buf) as e:
        e.save_source_string("m", "class C:\n    pass\n")
    buf.seek(0)
    a = PackageImporter(buf)
    buf.seek(0)
    b = PackageImporter(buf)
    assert a.id() != b.id()
    assert a.id().startswith("<ember_package_") and a.id().endswith(">")
    assert a.import_module("m").C is not b.import_module("m").C


def test_repackaging_needs_the_importer(tmp_path):
    src_buf = io.BytesIO()
    with PackageExporter(src_buf) as e:
        e.save_source_string("shapes", "class Box:\n    def __init__(self, w):\n        self.w = w\n")
    src_buf.seek(0)
    imp = PackageImporter(src_buf)
    box = imp.import_module("shapes").Box(ember.randn(2))
    # with the package's importer listed first, the class pickles by its packaged name
    out = io.BytesIO()
    with PackageExporter(out, importer=(imp, sys_importer)) as e:
        e.intern("shapes")
        e.save_pickle("p", "box.pkl", box)
    out.seek(0)
    again = PackageImporter(out).load_pickle("p", "box.pkl")
    assert type(again).__name__ == "Box" and type(again) is not type(box)
    np.testing.assert_array_equal(again.w.numpy(), box.w.numpy())
    # an importer that finds a different `shapes.Box` first: torch's mismatch error
    other = io.BytesIO()
    with PackageExporter(other) as e:
        e.save_source_string("shapes", "class Box:\n    pass\n")
    other.seek(0)
    imp2 = PackageImporter(other)
    imp2.import_module("shapes")
    with pytest.raises(ObjMismatchError, match="make sure this 'PackageExporter's importer lists"):
        imp2.get_name(type(box))
    with pytest.raises(ember.package.ObjNotFoundError, match="in any of the importers"):
        OrderedImporter(imp2, sys_importer).get_name(type(box))


def test_hooks_and_graph_inspection(user_modules):
    torch = pytest.importorskip("torch")
    a, b, c = _unique("ha"), _unique("hb"), _unique("hc")
    user_modules(c, "Z = 0\n")
    user_modules(b, f"import {c}\nimport json\n")
    user_modules(a, f"import {b}\nfrom {c} import Z\n")
    calls = []
    dots = []
    for P in (PackageExporter, torch.package.PackageExporter):
        buf = io.BytesIO()
        with P(buf) as e:
            e.extern(c)
            e.intern([a, b])
            h1 = e.register_extern_hook(lambda ex, name: calls.append(("extern", name)))
            h2 = e.register_intern_hook(lambda ex, name: calls.append(("intern", name)))
            h3 = e.register_mock_hook(lambda ex, name: calls.append(("mock", name)))
            e.save_module(a)
            h2.remove()
            dots.append(e.dependency_graph_string())
            assert e.get_rdeps(c) == [a, b] or sorted(e.get_rdeps(c)) == sorted([a, b])
    assert dots[0] == dots[1]
    assert calls[: len(calls) // 2] == calls[len(calls) // 2:]
    assert ("extern", c) in calls and not any(k == "intern" for k, _ in calls)

    e = PackageExporter(io.BytesIO())
    e.extern([c, "json"])
    e.intern([a, b])
    e.save_module(a)
    paths = e.all_paths(a, c)
    assert paths == ('digraph G {\nrankdir = LR;\nnode [shape=box];\n'
                     f'"{a}" -> "{b}";\n"{a}" -> "{c}";\n"{b}" -> "{c}";\n}}\n')
    assert "json" not in paths
    e.close()


def test_archive_layout_and_cross_loading(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    records = {}
    for tag, P in (("ember", PackageExporter), ("torch", torch.package.PackageExporter)):
        d = tmp_path / tag
        d.mkdir()
        monkeypatch.chdir(d)
        with P("pkg.pt") as e:
            e.save_source_string("lib", "import math\nimport json\ndef area(r):\n    return math.pi * r * r\n")
            e.save_source_string("lib2", "from lib import area\nTWO = area(1) * 2\n", dependencies=True)
            e.save_text("cfg", "settings.json", '{"a": 1}')
        records[tag] = zipfile.ZipFile(d / "pkg.pt").namelist()
        assert all(n.startswith("pkg/") for n in records[tag])
    assert set(records["ember"]) == set(records["torch"])
    for n in ("pkg/.data/version", "pkg/.data/extern_modules", "pkg/lib.py", "pkg/cfg/settings.json"):
        assert n in records["ember"]
    ez, tz = zipfile.ZipFile(tmp_path / "ember" / "pkg.pt"), zipfile.ZipFile(tmp_path / "torch" / "pkg.pt")
    for n in ("pkg/.data/version", "pkg/.data/extern_modules", "pkg/lib.py", "pkg/byteorder"):
        assert ez.read(n) == tz.read(n)
    # ember's archive in torch's importer and torch's archive in ember's
    monkeypatch.chdir(tmp_path / "ember")
    t_imp = torch.package.PackageImporter("pkg.pt")
    e_imp = PackageImporter("pkg.pt")
    assert t_imp.import_module("lib2").TWO == e_imp.import_module("lib2").TWO == pytest.approx(2 * np.pi)
    assert t_imp.load_text("cfg", "settings.json") == '{"a": 1}'
    assert str(e_imp.file_structure()) == str(t_imp.file_structure())
    assert str(e_imp.file_structure(include="**/*.py")) == str(t_imp.file_structure(include="**/*.py"))
    monkeypatch.chdir(tmp_path / "torch")
    e_imp2 = PackageImporter("pkg.pt")
    assert e_imp2.import_module("lib").area(2.0) == pytest.approx(4 * np.pi)
    assert e_imp2.load_text("cfg", "settings.json") == '{"a": 1}'
    assert e_imp2.python_version() == t_imp.python_version()


def test_unzipped_package_directory(tmp_path):
    pkg = tmp_path / "d.pt"
    with PackageExporter(pkg) as e:
        e.save_source_string("m", "V = 7\n")
        e.save_pickle("p", "t.pkl", {"t": ember.arange(4)})
    out = tmp_path / "unzipped"
    zipfile.ZipFile(pkg).extractall(out)
    imp = PackageImporter(str(out / "d"))
    assert imp.import_module("m").V == 7
    np.testing.assert_array_equal(imp.load_pickle("p", "t.pkl")["t"].numpy(), np.arange(4))


def test_glob_group_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.package import GlobGroup as TG
    rng = random.Random()
    atoms = ["torch", "nn", "foo", "foobar", "bar", "x", "a_b"]
    patterns = ["torch.**", "torch.*", "torch*.**", "foo*bar", "**.bar", "*", "**", "foo.**.x", "x", "a_*.nn"]
    for _ in range(300):
        cand = ".".join(rng.choice(atoms) for _ in range(rng.randint(1, 4)))
        inc = rng.sample(patterns, rng.randint(1, 2))
        exc = rng.sample(patterns, rng.randint(0, 1))
        assert GlobGroup(inc, exclude=exc).matches(cand) == TG(inc, exclude=exc).matches(cand), (cand, inc, exc)
        path = cand.replace(".", "/")
        assert GlobGroup(inc[0].replace(".", "/"), separator="/").matches(path) == \
            TG(inc[0].replace(".", "/"), separator="/").matches(path)
    with pytest.raises(ValueError, match=r"\*\* can only appear as an entire path segment"):
        GlobGroup("foo.**bar")


def test_dependency_scan_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.package.find_file_dependencies import find_files_source_depends_on
    from ember.package._dependencies import find_imports
    sources = [
        "import a, b.c as d\nfrom e import f, g\nfrom .h import i\nfrom .. import j\nfrom . import *\n",
        "x = __import__('k.l')\ny = __import__('m', globals(), locals(), ['n', 'o'], 0)\n",
        "z = __import__('p', fromlist=['q'], level=1)\ndef f():\n    import r\n",
    ]
    for src in sources:
        assert find_imports(src, "pkg.sub") == find_files_source_depends_on(src, "pkg.sub")


def test_exporter_argument_errors(tmp_path):
    e = PackageExporter(io.BytesIO())
    with pytest.raises(TypeError, match="did you perhaps mean to pass `__name__`"):
        e.save_module(sys)
    with pytest.raises(AssertionError, match="only supports pickle protocols 3 and 4, got 2"):
        e.save_pickle("p", "x.pkl", 1, pickle_protocol=2)
    with pytest.raises(ValueError, match="must be only a file name"):
        e.save_text("p", "a/b.txt", "x")
    e.save_text("p", "a.txt", "x")
    with pytest.raises(AssertionError, match="already exists in this archive"):
        e.save_text("p", "a.txt", "y")
    with pytest.raises(TypeError, match="importer arg should be an Importer or a sequence of Importers"):
        PackageExporter(io.BytesIO(), importer=42)
    e.close()
    with pytest.raises(RuntimeError, match="already closed"):
        e.save_text("p", "b.txt", "x")
    with pytest.raises(RuntimeError, match="not a package archive"):
        PackageImporter(io.BytesIO(b"not a zip"))


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_torch_tensors_in_a_torch_package_are_refused(tmp_path):
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    with torch.package.PackageExporter(buf) as e:
        e.save_pickle("p", "t.pkl", torch.arange(3))
    buf.seek(0)
    with pytest.raises(NotImplementedError, match="torch's storage format"):
        PackageImporter(buf).load_pickle("p", "t.pkl")


def test_importlib_resources_of_a_packaged_package():
    import importlib.resources as resources
    buf = io.BytesIO()
    with PackageExporter(buf) as e:
        e.save_source_string("pk", "X = 1\n", is_package=True)
        e.save_text("pk", "data.txt", "payload")
    buf.seek(0)
    mod = PackageImporter(buf).import_module("pk")
    assert resources.files(mod).joinpath("data.txt").read_text() == "payload"
    assert sorted(p.name for p in resources.files(mod).iterdir()) == ["__init__.py", "data.txt"]


CUSTOM_SRC = """
class Custom:
    # pickled through __reduce_package__: the exporter stores its state as a text resource
    def __init__(self, text):
        self.text = text

    def __reduce_package__(self, exporter):
        name = f"custom_{exporter.get_unique_id()}.txt"
        exporter.save_text("custom", name, self.text)
        return (unpack, ("custom", name))


def unpack(importer, package, name):
    return Custom(importer.load_text(package, name) + " (loaded)")
"""


def test_reduce_package_hook(user_modules):
    mod = _unique("custom")
    user_modules(mod, CUSTOM_SRC)
    obj = importlib.import_module(mod).Custom(f"state {random.random()}")
    buf = io.BytesIO()
    with PackageExporter(buf) as e:
        e.intern(mod)
        e.save_pickle("p", "o.pkl", [obj, obj])
    buf.seek(0)
    imp = PackageImporter(buf)
    a, b = imp.load_pickle("p", "o.pkl")
    assert a is b and a.text == obj.text + " (loaded)"
    assert type(a) is imp.import_module(mod).Custom

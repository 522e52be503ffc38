"""ember.hub against torch.hub 2.13: local hubconf repos (load / list / help, errors), the cache
directory, download_url_to_file and load_state_dict_from_url over file:// URLs (hash checks,
caching). No network: GitHub sources are not exercised."""
import hashlib
import os
import textwrap

import numpy as np
import pytest

import ember
import ember.hub as hub

HUBCONF = textwrap.dedent('''
    """a test hub repo"""
    import helper_mod_for_hub_test as helper

    dependencies = ["json"]

    def make_pair(a, b=2):
        """Builds a pair (entrypoint docstring)."""
        return (helper.tag(a), b)

    def other():
        return "other"

    def _private():
        return None

    not_callable = 3
''')


@pytest.fixture
def repo(tmp_path):
    d = tmp_path / "repo"
    d.mkdir()
    (d / "hubconf.py").write_text(HUBCONF)
    (d / "helper_mod_for_hub_test.py").write_text("def tag(x):\n    return ('tagged', x)\n")
    return str(d)


def _torch():
    return pytest.importorskip("torch")


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - compared across frameworks
        return (type(exc).__name__, str(exc))


def test_local_load_list_help_match_torch(repo):
    torch = _torch()
    for h in (hub, torch.hub):
        assert h.load(repo, "make_pair", 1, source="local", b=5) == (("tagged", 1), 5)
    assert hub.load(repo, "other", source="LOCAL") == "other"
    assert hub.list(repo, source="local") == ["make_pair", "other"]
    assert hub.help(repo, "make_pair", source="local") == "Builds a pair (entrypoint docstring)."
    assert repo not in __import__("sys").path


@pytest.mark.parametrize("model,source", [("missing", "local"), ("not_callable", "local"), (3, "local"),
                                          ("other", "svn")])
def test_local_errors_match_torch(repo, model, source):
    torch = _torch()
    assert _outcome(lambda: hub.load(repo, model, source=source)) == \
        _outcome(lambda: torch.hub.load(repo, model, source=source))


def test_missing_dependencies_match_torch(repo):
    torch = _torch()
    with open(os.path.join(repo, "hubconf.py"), "a") as f:
        f.write("\ndependencies = ['json', 'no_such_pkg_for_hub_test', 'also_missing_pkg']\n")
    got = [_outcome(lambda h=h: h.load(repo, "other", source="local")) for h in (hub, torch.hub)]
    assert got[0] == got[1] == ("RuntimeError", "Missing dependencies: no_such_pkg_for_hub_test, also_missing_pkg")


def test_no_hubconf_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no hubconf.py"):
        hub.load(str(tmp_path), "x", source="local")


def test_get_set_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.setenv("EMBER_HOME", str(tmp_path / "home"))
    assert hub.get_dir() == str(tmp_path / "home" / "hub")
    monkeypatch.delenv("EMBER_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.get_dir() == str(tmp_path / "xdg" / "ember" / "hub")
    hub.set_dir("~/somewhere_for_hub_test")
    assert hub.get_dir() == os.path.expanduser("~/somewhere_for_hub_test")
    assert ember.hub is hub


def _payload(tmp_path, rng):
    src = tmp_path / "payload.bin"
    data = rng.bytes(300_000)
    src.write_bytes(data)
    return src, data, hashlib.sha256(data).hexdigest()


def test_download_url_to_file_file_url_and_hash(tmp_path):
    torch = _torch()
    src, data, digest = _payload(tmp_path, np.random.default_rng(0))
    url = src.as_uri()
    for i, h in enumerate((hub, torch.hub)):
        dst = tmp_path / f"out{i}.bin"
        h.download_url_to_file(url, str(dst), hash_prefix=digest[:10], progress=False)
        assert dst.read_bytes() == data
    bad = [_outcome(lambda h=h: h.download_url_to_file(url, str(tmp_path / "bad.bin"), "deadbeef", progress=False))
           for h in (hub, torch.hub)]
    assert bad[0] == bad[1] and bad[0][0] == "RuntimeError" and digest in bad[0][1]
    assert not (tmp_path / "bad.bin").exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".partial")]


def test_load_state_dict_from_url_caches_and_checks_hash(tmp_path, capsys):
    sd = {"w": ember.randn(3, 4), "b": ember.arange(5)}
    tmp_src = tmp_path / "tmp.pt"
    ember.save(sd, str(tmp_src))
    digest = hashlib.sha256(tmp_src.read_bytes()).hexdigest()
    src = tmp_path / "src" / f"model-{digest[:8]}.pt"
    src.parent.mkdir()
    tmp_src.rename(src)
    hub_dir = tmp_path / "hubdir"
    old = hub._hub_dir
    try:
        hub.set_dir(str(hub_dir))
        got = hub.load_state_dict_from_url(src.as_uri(), check_hash=True, progress=False)
        cached = hub_dir / "checkpoints" / src.name
        assert cached.exists() and "Downloading" in capsys.readouterr().out
        for k in sd:
            np.testing.assert_array_equal(got[k].numpy(), sd[k].numpy())
        src.unlink()      # the cached copy is used from now on
        again = hub.load_state_dict_from_url(src.as_uri(), check_hash=True)
        np.testing.assert_array_equal(again["w"].numpy(), sd["w"].numpy())
        assert "Downloading" not in capsys.readouterr().out
        # a wrong hash in the file name fails the download and caches nothing
        other = tmp_path / "src" / "model-0123abcd.pt"
        ember.save(sd, str(other))
        with pytest.raises(RuntimeError, match='invalid hash value \\(expected "0123abcd"'):
            hub.load_state_dict_from_url(other.as_uri(), model_dir=str(tmp_path / "md"), check_hash=True,
                                         progress=False)
        assert not (tmp_path / "md" / other.name).exists()
        # file_name= renames the cached copy; without check_hash the name's hash is not checked
        got = hub.load_state_dict_from_url(other.as_uri(), model_dir=str(tmp_path / "md"), file_name="x.pt",
                                           progress=False)
        assert (tmp_path / "md" / "x.pt").exists() and set(got) == {"w", "b"}
    finally:
        hub._hub_dir = old

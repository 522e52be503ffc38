"""The source digests in the aot / FX-graph cache keys (ember/runtime/source_digest.py): each
file's sha256 is remembered by its stat identity, and an edit is always seen -- also one that
keeps the file's size and mtime (ctime moves with every write)."""
import hashlib
import json
import os

import pytest

from ember.runtime import source_digest as sd


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(sd, "_memo", None)
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    files = []
    for name, text in [("a.py", "x = 1\n"), ("pkg/b.py", "y = 2\n"), ("pkg/c.py", "z = 3\n")]:
        p = root / name
        p.write_text(text)
        files.append(str(p))
    return root, files


def _reference(root, files):
    """The digest written out by hand: sha256 over (relative path, content sha256) in path order."""
    h = hashlib.sha256()
    for f in sorted(files):
        with open(f, "rb") as fh:
            d = hashlib.sha256(fh.read()).hexdigest()
        h.update(os.path.relpath(f, root).encode() + b"\0" + d.encode() + b"\0")
    return h.hexdigest()


def test_digest_matches_the_contents_and_is_remembered(tree, monkeypatch):
    root, files = tree
    d1 = sd.tree_digest(str(root), files)
    assert d1 == _reference(root, files)
    memo = json.loads(open(sd._memo_path()).read())
    assert set(memo["files"]) == set(files)
    # a new process (memo read from disk) does not open the files again
    monkeypatch.setattr(sd, "_memo", None)
    opened = []
    real_open = open

    def spy(path, *a, **k):
        opened.append(str(path))
        return real_open(path, *a, **k)
    monkeypatch.setattr("builtins.open", spy)
    assert sd.tree_digest(str(root), files) == d1
    assert not set(opened) & set(files)


def test_edit_with_same_size_and_mtime_is_seen(tree, monkeypatch):
    root, files = tree
    d1 = sd.tree_digest(str(root), files)
    st = os.stat(files[1])
    with open(files[1], "w") as f:
        f.write("y = 9\n")                                  # same size
    os.utime(files[1], ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: only ctime moved
    monkeypatch.setattr(sd, "_memo", None)                  # a later process
    d2 = sd.tree_digest(str(root), files)
    assert d2 != d1 and d2 == _reference(root, files)


def test_corrupt_or_foreign_memo_is_ignored(tree, monkeypatch):
    root, files = tree
    d1 = sd.tree_digest(str(root), files)
    for junk in (b"{not json", b'{"format": 99, "files": {}}', b'{"format": 1, "files": {"x": 3}}', b"[]"):
        with open(sd._memo_path(), "wb") as f:
            f.write(junk)
        monkeypatch.setattr(sd, "_memo", None)
        assert sd.tree_digest(str(root), files) == d1


def test_unwritable_cache_root_is_not_an_error(tree, monkeypatch, tmp_path):
    root, files = tree
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(blocker / "cache"))   # cannot be created
    monkeypatch.setattr(sd, "_memo", None)
    assert sd.tree_digest(str(root), files) == _reference(root, files)


def test_cache_keys_use_it():
    from ember.aot import cache as aot_cache
    from ember.inductor import fx_graph_cache
    a, b = aot_cache.source_hash(), fx_graph_cache.source_hash()
    assert len(a) == len(b) == 64 and a != b

"""``ember.version``: what ember is and what it was built with (PyTorch's ``torch.version``).

* ``__version__`` -- the installed distribution's version (``importlib.metadata``; from
  a source checkout that was never installed, ``pyproject.toml`` next to the package),
  as a :class:`EmberVersion`: a ``str`` that also compares as a PEP 440 version with
  strings, tuples and ``packaging`` versions, so ``ember.__version__ >= (0, 1)`` and
  ``ember.__version__ >= "0.1"`` both work (``torch.torch_version.TorchVersion``).
* ``cuda`` -- the CUDA runtime version of the cuda backend (``"12.4"``), or None when
  ember has no usable cuda device (no cupy, or no GPU). ember compiles no CUDA code
  itself: its cuda device is cupy, so this is the runtime cupy was built against,
  looked up on access (so that importing ember never imports cupy).
* ``git_version`` -- the commit of a git checkout ember runs from, else ``"Unknown"``
  (the value torch uses when it was built outside git). Looked up on first access.
* ``debug`` (False), ``hip`` / ``rocm`` / ``xpu`` (None: ember has no such backends).
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable

__all__ = ["__version__", "debug", "cuda", "git_version", "hip", "rocm", "xpu", "EmberVersion", "InvalidVersion"]

debug = False
hip = None
rocm = None
xpu = None


class InvalidVersion(ValueError):
    """A string that is not a PEP 440 version."""


_PEP440 = re.compile(
    r"""^\s*v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?:[-_.]?(?P<pre_l>alpha|beta|preview|pre|a|b|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?
    (?:-(?P<post_n1>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$""", re.VERBOSE | re.IGNORECASE)

_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


def _sort_key(text):
    """The PEP 440 ordering of ``text`` as a tuple (InvalidVersion when it is not a version).

    Release numbers compare without trailing zeros (1.0 == 1.0.0); a dev-only release
    sorts before any pre-release of it, pre-releases before the release, post-releases
    after it; a local label (``+cpu``) sorts after the same version without one, with
    numeric label parts above alphanumeric ones."""
    m = _PEP440.match(str(text))
    if m is None:
        raise InvalidVersion(f"Invalid version: {text!r}")
    release = [int(x) for x in m["release"].split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    if m["pre_l"]:
        pre = (1, _PRE_RANK[m["pre_l"].lower()], int(m["pre_n"] or 0))
    elif m["dev_l"] and not (m["post_n1"] or m["post_l"]):
        pre = (0,)
    else:
        pre = (2,)
    if m["post_n1"]:
        post = (1, int(m["post_n1"]))
    elif m["post_l"]:
        post = (1, int(m["post_n2"] or 0))
    else:
        post = (0,)
    dev = (0, int(m["dev_n"] or 0)) if m["dev_l"] else (1,)
    local = ()
    if m["local"]:
        local = tuple((1, int(p), "") if p.isdigit() else (0, 0, p.lower())
                      for p in re.split(r"[-_.]", m["local"]))
    return (int(m["epoch"] or 0), tuple(release), pre, post, dev, local)


def _other_key(other):
    """``other`` (a version string, a ``(major, minor, ...)`` iterable, or an object with a
    version ``str()`` such as ``packaging.version.Version``) as a sort key."""
    if isinstance(other, str):
        return _sort_key(other)
    if type(other).__name__ == "Version" and hasattr(other, "release"):
        return _sort_key(str(other))
    if isinstance(other, Iterable):
        return _sort_key(".".join(str(x) for x in other))
    raise InvalidVersion(f"Invalid version: {other!r}")


class EmberVersion(str):
    """A version string that compares as a version: against a string (``"0.1"``), a tuple
    (``(0, 1)`` means 0.1, ``(0, 1, 2)`` 0.1.2) or a ``packaging`` Version. When either
    side is not a PEP 440 version, plain string comparison applies (a non-string, non-
    iterable operand then compares as it would with a ``str``: ``==`` False, ``<`` a
    TypeError).

    ``!=`` is the negation of ``==`` here; torch's TorchVersion leaves ``!=`` to ``str``,
    so there ``torch.__version__ != (2, 13, 0)`` is True even when ``==`` is True too.
    """

    __slots__ = ()

    def _compare(self, other, op):
        try:
            mine, theirs = _sort_key(self), _other_key(other)
        except InvalidVersion:
            return getattr(str, op)(self, other)
        return getattr(mine, op)(theirs)

    def __eq__(self, other):
        return self._compare(other, "__eq__")

    def __ne__(self, other):
        r = self._compare(other, "__eq__")
        return r if r is NotImplemented else not r

    def __lt__(self, other):
        return self._compare(other, "__lt__")

    def __le__(self, other):
        return self._compare(other, "__le__")

    def __gt__(self, other):
        return self._compare(other, "__gt__")

    def __ge__(self, other):
        return self._compare(other, "__ge__")

    __hash__ = str.__hash__


def _package_version():
    """The distribution's version: the installed metadata, else the pyproject.toml of a
    source checkout that was never installed (PYTHONPATH pointing at a clone), else
    ``0.0.0+unknown``."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("ember")
    except PackageNotFoundError:
        pass
    pyproject = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyproject.toml")
    try:
        import tomllib
        with open(pyproject, "rb") as f:
            project = tomllib.load(f).get("project", {})
        if project.get("name") == "ember" and "version" in project:
            return str(project["version"])
    except (OSError, ValueError):
        pass
    return "0.0.0+unknown"


def _git_version():
    """The HEAD commit of the git checkout holding the package (read from ``.git``, no
    subprocess), or ``"Unknown"`` when ember is not running from a checkout."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    git = os.path.join(root, ".git")
    try:
        if os.path.isfile(git):                      # a worktree / submodule: "gitdir: <path>"
            with open(git) as f:
                line = f.read().strip()
            if not line.startswith("gitdir:"):
                return "Unknown"
            git = os.path.normpath(os.path.join(root, line[len("gitdir:"):].strip()))
        with open(os.path.join(git, "HEAD")) as f:
            head = f.read().strip()
        if not head.startswith("ref:"):
            return head if re.fullmatch(r"[0-9a-f]{40}", head) else "Unknown"
        ref = head[4:].strip()
        common = git
        cfile = os.path.join(git, "commondir")
        if os.path.isfile(cfile):
            with open(cfile) as f:
                common = os.path.normpath(os.path.join(git, f.read().strip()))
        for base in (git, common):
            path = os.path.join(base, ref)
            if os.path.isfile(path):
                with open(path) as f:
                    return f.read().strip()
        packed = os.path.join(common, "packed-refs")
        if os.path.isfile(packed):
            with open(packed) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[1] == ref:
                        return parts[0]
    except OSError:
        pass
    return "Unknown"


def _cuda_version():
    """``"<major>.<minor>"`` of the CUDA runtime cupy uses, when ember's cuda device is usable."""
    from .runtime import cuda as rc
    if not rc.is_available():
        return None
    try:
        v = int(rc.cupy_module().cuda.runtime.runtimeGetVersion())
    except Exception:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


__version__ = EmberVersion(_package_version())


def __getattr__(name):
    # looked up on first use: git reads files (once), cuda may import cupy (and follows
    # ember.runtime.cuda's own cached answer, so it is not stored here)
    if name == "git_version":
        globals()["git_version"] = val = _git_version()
        return val
    if name == "cuda":
        return _cuda_version()
    raise AttributeError(f"module 'ember.version' has no attribute '{name}'")

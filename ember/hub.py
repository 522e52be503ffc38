"""``ember.hub``: load models from a directory or GitHub repo with a ``hubconf.py``, and
checkpoints from URLs into a local cache (``torch.hub``).

A hub repo is a directory whose ``hubconf.py`` defines entrypoints: public callables that build
models, optionally after checking a ``dependencies`` list of importable packages.
``load(repo_or_dir, model, *args, source="local")`` imports that file (with the directory on
``sys.path`` for its own imports) and calls the entrypoint. ``source="github"`` first downloads the
repo's zipball (``owner/name[:ref]``) into ``get_dir()`` and asks, as torch does, before running
code from a repo not yet on the trusted list.

Downloads go through urllib (any scheme it opens: https, and file:// for local mirrors) to a
``.partial`` file moved into place only when complete, so a broken download never leaves a
corrupt checkpoint; ``hash_prefix`` checks the SHA-256. Checkpoints load with ``ember.load``
(ember's own format; it refuses pickles).

ember's cache is its own: ``$EMBER_HOME/hub``, ``$EMBER_HOME`` defaulting to
``$XDG_CACHE_HOME/ember`` (``~/.cache/ember``), so it never mixes with torch's files.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import uuid
import warnings
import zipfile
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import urlparse
from urllib.request import Request, urlopen

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir"]

ENV_EMBER_HOME = "EMBER_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"
ENV_GITHUB_TOKEN = "GITHUB_TOKEN"
MODULE_HUBCONF = "hubconf.py"
VAR_DEPENDENCY = "dependencies"
READ_DATA_CHUNK = 128 * 1024
# a checkpoint's file name carries its hash prefix: ``name-<sha256 prefix>.ext``
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
_TRUSTED_REPO_OWNERS = ("facebookresearch", "facebookincubator", "pytorch", "fairinternal")

_hub_dir = None


# ---------------------------------------------------------------------- the cache directory
def _get_ember_home() -> str:
    default = os.path.join(os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR), "ember")
    return os.path.expanduser(os.getenv(ENV_EMBER_HOME, default))


def get_dir() -> str:
    """The hub cache directory: what ``set_dir`` set, else ``$EMBER_HOME/hub``."""
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_get_ember_home(), "hub")


def set_dir(d) -> None:
    """Use ``d`` (``~`` expanded) as the hub cache directory from now on."""
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


# ---------------------------------------------------------------------- hubconf.py
@contextlib.contextmanager
def _add_to_sys_path(path):
    sys.path.insert(0, path)
    try:
        yield
    finally:
        sys.path.remove(path)


def _import_hubconf(repo_dir):
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, f"ember.hub: no {MODULE_HUBCONF} in {repo_dir!r}", path)
    with _add_to_sys_path(repo_dir):
        spec = importlib.util.spec_from_file_location(MODULE_HUBCONF, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def _check_dependencies(module):
    deps = getattr(module, VAR_DEPENDENCY, None) if VAR_DEPENDENCY in dir(module) else None
    if deps is not None:
        missing = [pkg for pkg in deps if importlib.util.find_spec(pkg) is None]
        if missing:
            raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")


def _load_entry_from_hubconf(module, model):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    _check_dependencies(module)
    func = getattr(module, model) if model in dir(module) else None
    if func is None or not callable(func):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return func


def _check_source(source):
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    return source


def _repo_dir(repo_or_dir, source, force_reload, trust_repo, verbose, skip_validation):
    if _check_source(source) == "local":
        return repo_or_dir
    return _get_cache_or_reload(repo_or_dir, force_reload, trust_repo, verbose=verbose,
                                skip_validation=skip_validation)


def load(repo_or_dir, model, *args, source="github", trust_repo="check", force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """``model(*args, **kwargs)``, ``model`` an entrypoint of the repo's / directory's hubconf.py."""
    repo_dir = _repo_dir(repo_or_dir, source, force_reload, trust_repo, verbose, skip_validation)
    with _add_to_sys_path(repo_dir):
        entry = _load_entry_from_hubconf(_import_hubconf(repo_dir), model)
        return entry(*args, **kwargs)


def list(github, force_reload=False, skip_validation=False, trust_repo="check", verbose=True, *,  # noqa: A001
         source="github"):
    """The public callables (entrypoints) of the repo's hubconf.py. ``source="local"`` (an ember
    extension of torch's signature) reads a local directory instead."""
    module = _import_hubconf(_repo_dir(github, source, force_reload, trust_repo, verbose, skip_validation))
    return [f for f in dir(module) if callable(getattr(module, f)) and not f.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo="check", *,  # noqa: A001
         source="github"):
    """The docstring of entrypoint ``model`` (``source="local"``: an ember extension, as for ``list``)."""
    module = _import_hubconf(_repo_dir(github, source, force_reload, trust_repo, True, skip_validation))
    return _load_entry_from_hubconf(module, model).__doc__


# ---------------------------------------------------------------------- GitHub repos
def _parse_repo_info(github):
    if ":" in github:
        repo_info, ref = github.split(":")
    else:
        repo_info, ref = github, None
    repo_owner, repo_name = repo_info.split("/")
    if ref is None:
        try:
            with urlopen(f"https://github.com/{repo_owner}/{repo_name}/tree/main/"):
                ref = "main"
        except HTTPError as e:
            if e.code != 404:
                raise
            ref = "master"
        except URLError as e:
            for candidate in ("main", "master"):
                if os.path.exists(os.path.join(get_dir(), f"{repo_owner}_{repo_name}_{candidate}")):
                    ref = candidate
                    break
            if ref is None:
                raise RuntimeError("It looks like there is no internet connection and the "
                                   f"repo could not be found in the cache ({get_dir()})") from e
    return repo_owner, repo_name, ref


def _read_url(url):
    with urlopen(url) as r:
        return r.read().decode(r.headers.get_content_charset("utf-8"))


def _validate_not_a_forked_repo(repo_owner, repo_name, ref):
    """The ref must be a branch, tag or commit of this repo (GitHub's API), not of a fork."""
    headers = {"Accept": "application/vnd.github.v3+json"}
    token = os.environ.get(ENV_GITHUB_TOKEN)
    if token is not None:
        headers["Authorization"] = f"token {token}"
    for prefix in (f"https://api.github.com/repos/{repo_owner}/{repo_name}/branches",
                   f"https://api.github.com/repos/{repo_owner}/{repo_name}/tags"):
        page = 0
        while True:
            page += 1
            response = json.loads(_read_url(Request(f"{prefix}?per_page=100&page={page}", headers=headers)))
            if not response:
                break
            if any(br["name"] == ref or br["commit"]["sha"].startswith(ref) for br in response):
                return
    raise ValueError(f"Cannot find {ref} in https://github.com/{repo_owner}/{repo_name}. "
                     "If it's a commit from a forked repo, please call hub.load() with forked repo directly.")


def _check_repo_is_trusted(repo_owner, repo_name, owner_name_branch, trust_repo):
    hub_dir = get_dir()
    path = os.path.join(hub_dir, "trusted_list")
    Path(path).touch()
    with open(path) as f:
        trusted = tuple(line.strip() for line in f)
    legacy = next(os.walk(hub_dir))[1]
    owner_name = f"{repo_owner}_{repo_name}"
    is_trusted = owner_name in trusted or owner_name_branch in legacy or repo_owner in _TRUSTED_REPO_OWNERS
    if trust_repo is False or (trust_repo == "check" and not is_trusted):
        response = input(f"The repository {owner_name} does not belong to the list of trusted repositories and as "
                         "such cannot be downloaded. Do you trust this repository and wish to add it to the trusted "
                         "list of repositories (y/N)?")
        if response.lower() in ("y", "yes"):
            if is_trusted:
                print("The repository is already trusted.")
        elif response.lower() in ("n", "no", ""):
            raise Exception("Untrusted repository.")  # noqa: TRY002 - torch's exception type
        else:
            raise ValueError(f"Unrecognized response {response}.")
    if not is_trusted:
        with open(path, "a") as f:
            f.write(owner_name + "\n")


def _remove_if_exists(path):
    if os.path.isfile(path):
        os.remove(path)
    elif os.path.exists(path):
        shutil.rmtree(path)


def _safe_extract_zip(zf, dest):
    """Extract, refusing members that would land outside ``dest`` (``../`` or absolute names)."""
    root = os.path.realpath(dest)
    for member in zf.infolist():
        target = os.path.realpath(os.path.join(dest, member.filename))
        if os.path.commonpath([root, target]) != root:
            raise ValueError(f"ember.hub: the archive member {member.filename!r} would be extracted outside {dest}")
    zf.extractall(dest)


def _get_cache_or_reload(github, force_reload, trust_repo, verbose=True, skip_validation=False):
    """The local directory of GitHub repo ``owner/name[:ref]``, downloading its zipball unless cached."""
    hub_dir = get_dir()
    os.makedirs(hub_dir, exist_ok=True)
    repo_owner, repo_name, ref = _parse_repo_info(github)
    normalized_ref = ref.replace("/", "_")
    owner_name_branch = "_".join([repo_owner, repo_name, normalized_ref])
    repo_dir = os.path.join(hub_dir, owner_name_branch)
    _check_repo_is_trusted(repo_owner, repo_name, owner_name_branch, trust_repo)
    if not force_reload and os.path.exists(repo_dir):
        if verbose:
            sys.stderr.write(f"Using cache found in {repo_dir}\n")
        return repo_dir
    if not skip_validation:
        _validate_not_a_forked_repo(repo_owner, repo_name, ref)
    cached_file = os.path.join(hub_dir, normalized_ref + ".zip")
    _remove_if_exists(cached_file)
    url = f"https://github.com/{repo_owner}/{repo_name}/zipball/{ref}"
    sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
    try:
        download_url_to_file(url, cached_file, progress=False)
    except HTTPError as err:
        if err.code != 300:
            raise
        warnings.warn(f"The ref {ref} is ambiguous. Perhaps it is both a tag and a branch in the repo? "
                      "Torchhub will now assume that it's a branch. You can disambiguate tags and branches by "
                      "explicitly passing refs/heads/branch_name or refs/tags/tag_name as the ref. That might "
                      "require using skip_validation=True.", stacklevel=2)
        download_url_to_file(f"https://github.com/{repo_owner}/{repo_name}/zipball/refs/heads/{ref}", cached_file,
                             progress=False)
    with zipfile.ZipFile(cached_file) as zf:
        extracted = os.path.join(hub_dir, zf.infolist()[0].filename)
        _remove_if_exists(extracted)
        _safe_extract_zip(zf, hub_dir)
    _remove_if_exists(cached_file)
    _remove_if_exists(repo_dir)
    shutil.move(extracted, repo_dir)
    return repo_dir


# ---------------------------------------------------------------------- downloads
def download_url_to_file(url: str, dst: str, hash_prefix=None, progress: bool = True) -> None:
    """Download ``url`` to ``dst`` (through a ``.partial`` file, moved into place when complete);
    with ``hash_prefix``, the file's SHA-256 hex digest must start with it. ``progress`` prints a
    byte count to stderr (ember has no progress-bar dependency)."""
    dst = os.path.expanduser(dst)
    for _ in range(tempfile.TMP_MAX):
        tmp = f"{dst}.{uuid.uuid4().hex}.partial"
        try:
            f = open(tmp, "x+b")  # noqa: SIM115 - closed in finally
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(errno.EEXIST, "No usable temporary file name found")
    try:
        with urlopen(Request(url, headers={"User-Agent": "ember.hub"})) as u:
            sha256 = hashlib.sha256() if hash_prefix is not None else None
            done = 0
            while True:
                buf = u.read(READ_DATA_CHUNK)
                if not buf:
                    break
                f.write(buf)
                done += len(buf)
                if sha256 is not None:
                    sha256.update(buf)
                if progress:
                    sys.stderr.write(f"\r{done} bytes")
            if progress:
                sys.stderr.write("\n")
        f.close()
        if sha256 is not None:
            digest = sha256.hexdigest()
            if digest[:len(hash_prefix)] != hash_prefix:
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest}")')
        shutil.move(f.name, dst)
    finally:
        f.close()
        if os.path.exists(f.name):
            os.remove(f.name)


def _is_legacy_zip_format(filename: str) -> bool:
    """A zip holding exactly one file: a checkpoint zipped by hand (torch < 1.6 style)."""
    if zipfile.is_zipfile(filename):
        with zipfile.ZipFile(filename) as zf:
            members = zf.infolist()
        return len(members) == 1 and not members[0].is_dir()
    return False


def load_state_dict_from_url(url: str, model_dir=None, map_location=None, progress: bool = True,
                             check_hash: bool = False, file_name=None, weights_only: bool = False):
    """The checkpoint at ``url``, downloaded once into ``model_dir`` (default
    ``<hub_dir>/checkpoints``) and loaded with ``ember.load``. ``check_hash``: the SHA-256 must
    start with the hex digits after the last ``-`` of the file name (``name-<hash>.ext``)."""
    from .serialization import load as _load
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
        hash_prefix = None
        if check_hash:
            m = HASH_REGEX.search(filename)
            hash_prefix = m.group(1) if m else None
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    if _is_legacy_zip_format(cached_file):
        warnings.warn("Falling back to the old format < 1.6. This support will be deprecated in favor of default "
                      "zipfile format introduced in 1.6. Please redo torch.save() to save it in the new zipfile "
                      "format.", FutureWarning, stacklevel=2)
        with zipfile.ZipFile(cached_file) as zf:
            members = zf.infolist()
            _safe_extract_zip(zf, model_dir)
            cached_file = os.path.join(model_dir, members[0].filename)
    return _load(cached_file, map_location=map_location, weights_only=weights_only)




import typing as _typing  # noqa: E402

# torch.hub's names for the cache-root variable and map_location's type: code that sets
# os.environ[hub.ENV_TORCH_HOME] to move the cache moves ember's (EMBER_HOME)
ENV_TORCH_HOME = ENV_EMBER_HOME
MAP_LOCATION = _typing.Optional[_typing.Union[_typing.Callable, "ember.device", str, dict]]

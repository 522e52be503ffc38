"""Helpers the built-in datapipes share: function checks (picklability, ``input_col`` arity),
``StreamWrapper`` (closes file handles a pipeline drops), and file listing / opening."""
from __future__ import annotations

import fnmatch
import functools
import inspect
import os
import warnings
from collections.abc import Iterable


def dill_available() -> bool:
    from .datapipe import HAS_DILL
    return HAS_DILL


def _is_local_fn(fn) -> bool:
    if hasattr(fn, "__code__"):
        return bool(fn.__code__.co_flags & inspect.CO_NESTED)
    qualname = getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", "")
    return "<locals>" in qualname


def check_unpickable_fn(fn) -> None:
    """TypeError for a non-callable; a UserWarning for a lambda / local function when dill is
    absent (the datapipe then cannot be pickled, e.g. for spawned DataLoader workers)."""
    if not callable(fn):
        raise TypeError(f"A callable function is expected, but {type(fn)} is provided.")
    if isinstance(fn, functools.partial):
        fn = fn.func
    if dill_available():
        return
    if _is_local_fn(fn):
        warnings.warn("Local function is not supported by pickle, please use "
                      "regular python function or functools.partial instead.", stacklevel=3)
    elif getattr(fn, "__name__", None) == "<lambda>":
        warnings.warn("Lambda function is not supported by pickle, please use "
                      "regular python function or functools.partial instead.", stacklevel=3)


def validate_input_col(fn, input_col) -> None:
    """Check that ``fn`` can take the ``input_col`` columns as its positional arguments."""
    try:
        sig = inspect.signature(fn)
    except ValueError:           # a builtin without a signature: nothing to check
        return
    n_cols = len(input_col) if isinstance(input_col, (list, tuple)) else 1
    positional, var_positional, required_kw_only = [], False, []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(p)
        elif p.kind is p.VAR_POSITIONAL:
            var_positional = True
        elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:
            required_kw_only.append(p)
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(target, "__name__", repr(target))
    if required_kw_only:
        raise ValueError(f"The function {name} takes {len(required_kw_only)} "
                         f"non-default keyword-only parameters, which is not allowed.")
    if len(sig.parameters) < n_cols:
        if not var_positional:
            raise ValueError(f"The function {name} takes {len(sig.parameters)} parameters, but {n_cols} are required.")
    elif len(positional) > n_cols:
        if any(p.default is p.empty for p in positional[n_cols:]):
            raise ValueError(f"The function {name} takes {len(positional)} "
                             f"positional parameters, but {n_cols} are required.")
    elif len(positional) < n_cols and not var_positional:
        raise ValueError(f"The function {name} takes {len(positional)} "
                         f"positional parameters, but {n_cols} are required.")


class StreamWrapper:
    """A file object a datapipe produced; closed when garbage-collected or when a datapipe drops
    it (``close_streams``), so filtered-out files do not leak handles."""

    def __init__(self, file_obj, parent_stream=None, name=None):
        self.file_obj = file_obj
        self.child_counter = 0
        self.parent_stream = parent_stream
        self.close_on_last_child = False
        self.name = name
        self.closed = False
        if parent_stream is not None:
            if not isinstance(parent_stream, StreamWrapper):
                raise RuntimeError(f"Parent stream should be StreamWrapper, {type(parent_stream)} was given")
            parent_stream.child_counter += 1

    @classmethod
    def close_streams(cls, v, depth=0) -> None:
        """Close every StreamWrapper inside ``v`` (dicts, lists, tuples; 10 levels deep at most)."""
        if depth > 10:
            return
        if isinstance(v, StreamWrapper):
            v.close()
        elif isinstance(v, dict):
            for vv in v.values():
                cls.close_streams(vv, depth + 1)
        elif isinstance(v, (list, tuple)):
            for vv in v:
                cls.close_streams(vv, depth + 1)

    def __getattr__(self, name):
        return getattr(self.__dict__["file_obj"], name)

    def close(self, *args, **kwargs) -> None:
        if self.closed:
            return
        parent = self.__dict__.get("parent_stream")
        if parent is not None:
            parent.child_counter -= 1
            if not parent.child_counter and parent.close_on_last_child:
                parent.close()
        try:
            self.file_obj.close(*args, **kwargs)
        except AttributeError:
            pass
        self.closed = True

    def autoclose(self) -> None:
        """Close now if no child streams are open, else when the last one closes."""
        self.close_on_last_child = True
        if self.child_counter == 0:
            self.close()

    def __dir__(self):
        return list(set(list(self.__dict__) + list(StreamWrapper.__dict__) + dir(self.file_obj)))

    def __del__(self):
        if not self.__dict__.get("closed", True):
            self.close()

    def __iter__(self):
        yield from self.file_obj

    def __next__(self):
        return next(self.file_obj)

    def __repr__(self) -> str:
        if self.name is None:
            return f"StreamWrapper<{self.file_obj!r}>"
        return f"StreamWrapper<{self.name},{self.file_obj!r}>"

    def __getstate__(self):
        return self.file_obj

    def __setstate__(self, obj):
        self.__dict__.update(file_obj=obj, child_counter=0, parent_stream=None, close_on_last_child=False,
                             name=None, closed=False)


def match_masks(name: str, masks) -> bool:
    if not masks:
        return True
    if isinstance(masks, str):
        return fnmatch.fnmatch(name, masks)
    return any(fnmatch.fnmatch(name, m) for m in masks)


def file_pathnames_from_root(root, masks, recursive=False, abspath=False, non_deterministic=False):
    """Files under ``root`` whose names match ``masks``, sorted unless ``non_deterministic``."""
    def onerror(err):
        warnings.warn(err.filename + " : " + err.strerror, stacklevel=2)
        raise err

    if os.path.isfile(root):
        path = os.path.abspath(root) if abspath else root
        if match_masks(os.path.basename(path), masks):
            yield path
        return
    for path, dirs, files in os.walk(root, onerror=onerror):
        if abspath:
            path = os.path.abspath(path)
        if not non_deterministic:
            files.sort()
        for f in files:
            if match_masks(f, masks):
                yield os.path.join(path, f)
        if not recursive:
            break
        if not non_deterministic:
            dirs.sort()


def file_binaries_from_pathnames(pathnames, mode, encoding=None):
    if not isinstance(pathnames, Iterable):
        pathnames = [pathnames]
    if mode in ("b", "t"):
        mode = "r" + mode
    for pathname in pathnames:
        if not isinstance(pathname, str):
            raise TypeError(f"Expected string type for pathname, but got {type(pathname)}")
        yield pathname, StreamWrapper(open(pathname, mode, encoding=encoding))  # noqa: SIM115

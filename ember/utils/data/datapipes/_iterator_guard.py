"""The single-iterator rule of ``IterDataPipe`` (PyTorch's ``_hook_iterator``, written anew).

Some datapipes hold buffers (Shuffler, Forker, Grouper), so two live iterators over one datapipe
would corrupt each other. Every ``__iter__`` a datapipe class defines is therefore wrapped by the
metaclass (``_IterDataPipeMeta``): creating an iterator claims a new *iterator id* on the
datapipe and calls ``reset()``; every ``next()`` checks that the id is still the current one,
so an older iterator raises PyTorch's RuntimeError. For a generator ``__iter__`` the claim
happens lazily, on the first ``next()`` (as in PyTorch: ``iter(dp)`` alone invalidates
nothing). Children of ``fork``/``demux`` share one id with their container.

An exception raised inside a generator ``__iter__`` gets a line naming the datapipe and its
arguments appended, as PyTorch does.
"""
from __future__ import annotations

import functools
import inspect

_FEEDBACK = ("\nFor feedback regarding this single iterator per IterDataPipe constraint, feel free "
             "to comment on this issue: https://github.com/pytorch/data/issues/45.")


def _short(value) -> str:
    """A function by name, anything else by repr (a datapipe's repr is its class name)."""
    return value.__name__ if inspect.isfunction(value) else repr(value)


def constructor_args_text(datapipe) -> str:
    """``name=value, ...`` for the constructor parameters the datapipe keeps as attributes,
    in alphabetical order (what PyTorch prints in its datapipe error messages)."""
    try:
        params = set(inspect.signature(type(datapipe)).parameters)
    except (TypeError, ValueError):
        return ""
    pairs = []
    for name in sorted(params):
        if name in ("self", "args", "kwargs"):
            continue
        try:
            value = object.__getattribute__(datapipe, name)
        except AttributeError:
            continue
        pairs.append(f"{name}={_short(value)}")
    return ", ".join(pairs)


def describe(datapipe) -> str:
    return f"{type(datapipe).__name__}({constructor_args_text(datapipe)})"


def _invalid_message(datapipe) -> str:
    return ("This iterator has been invalidated because another iterator has been created "
            f"from the same IterDataPipe: {describe(datapipe)}\n"
            "This may be caused by multiple references to the same IterDataPipe. We recommend "
            "using `.fork()` if that is necessary." + _FEEDBACK)


def claim_iterator(datapipe) -> int:
    """Make a new iterator the only valid one on ``datapipe`` and reset its state."""
    if getattr(datapipe, "_is_child_datapipe", False):
        return datapipe._set_main_datapipe_valid_iterator_id()
    datapipe._valid_iterator_id = 0 if datapipe._valid_iterator_id is None else datapipe._valid_iterator_id + 1
    datapipe.reset()
    return datapipe._valid_iterator_id


def check_iterator(datapipe, iterator_id) -> None:
    if getattr(datapipe, "_is_child_datapipe", False):
        if not datapipe._check_valid_iterator_id(iterator_id):
            raise RuntimeError("This iterator has been invalidated, because a new iterator has been created "
                               f"from one of the ChildDataPipes of {describe(datapipe.main_datapipe)}."
                               + _FEEDBACK)
    elif datapipe._valid_iterator_id != iterator_id:
        raise RuntimeError(_invalid_message(datapipe))


def _annotate(exc: BaseException, datapipe) -> None:
    """Append 'This exception is thrown by __iter__ of X(...)' to the exception's message once."""
    marker = "thrown by __iter__ of"
    full = f"{marker} {describe(datapipe)}"
    args = exc.args
    if len(args) == 0 or not isinstance(args[0], str):
        exc.args = (f"\nThis exception is {full}",)
    elif marker not in args[0] and "single iterator per IterDataPipe constraint" not in args[0]:
        exc.args = (args[0] + f"\nThis exception is {full}",) + args[1:]


class _GuardedIterator:
    """The iterator returned for a non-generator ``__iter__``: checks validity on each ``next``."""

    def __init__(self, iterator, datapipe, iterator_id, counts):
        self.iterator = iterator
        self.datapipe = datapipe
        self.iterator_id = iterator_id
        self._counts = counts

    def __iter__(self):
        return self

    def __next__(self):
        check_iterator(self.datapipe, self.iterator_id)
        value = next(self.iterator)
        if self._counts:
            self.datapipe._number_of_samples_yielded += 1
        return value

    def __getattr__(self, name):
        return getattr(self.iterator, name)


def _resume(datapipe, gen, request):
    """Run the wrapped generator to its next item, marking the datapipe as inside its own
    ``__iter__`` meanwhile (see the ``super().__iter__()`` case above)."""
    state = datapipe.__dict__
    outer = state.get("_ember_iter_running", False)
    state["_ember_iter_running"] = True
    try:
        return gen.send(request)
    finally:
        if outer:
            state["_ember_iter_running"] = True
        else:
            state.pop("_ember_iter_running", None)


def guard_iter(namespace: dict) -> None:
    """Replace ``namespace['__iter__']`` (and ``__next__``) by the validity-checking wrappers."""
    func = namespace["__iter__"]
    if getattr(func, "_ember_guarded", False):
        return
    if inspect.isgeneratorfunction(func):
        @functools.wraps(func)
        def guarded_generator(self, *args, **kwargs):
            gen = func(self, *args, **kwargs)
            if self.__dict__.get("_ember_iter_running"):
                # ``super().__iter__()`` inside a subclass's ``__iter__``: part of the iterator
                # already guarded, not a second one (PyTorch invalidates the outer one here).
                return (yield from gen)
            iterator_id = claim_iterator(self)
            try:
                response = _resume(self, gen, None)
                while True:
                    self._number_of_samples_yielded += 1
                    request = yield response
                    check_iterator(self, iterator_id)
                    response = _resume(self, gen, request)
            except StopIteration:
                return
            except Exception as e:
                _annotate(e, self)
                raise
        guarded_generator._ember_guarded = True
        namespace["__iter__"] = guarded_generator
        return

    has_next = "__next__" in namespace
    if has_next:
        next_func = namespace["__next__"]

        @functools.wraps(next_func)
        def counted_next(self, *args, **kwargs):
            value = next_func(self, *args, **kwargs)
            self._number_of_samples_yielded += 1
            return value
        namespace["__next__"] = counted_next

    @functools.wraps(func)
    def guarded_iter(self, *args, **kwargs):
        result = func(self, *args, **kwargs)
        iterator_id = claim_iterator(self)
        return _GuardedIterator(result, self, iterator_id, counts=not (result is self and has_next))
    guarded_iter._ember_guarded = True
    namespace["__iter__"] = guarded_iter


def wrap_reset(namespace: dict) -> None:
    """``reset()`` also zeroes the yielded-sample counter."""
    reset = namespace["reset"]
    if getattr(reset, "_ember_guarded", False):
        return

    @functools.wraps(reset)
    def counting_reset(self, *args, **kwargs):
        self._number_of_samples_yielded = 0
        return reset(self, *args, **kwargs)
    counting_reset._ember_guarded = True
    namespace["reset"] = counting_reset

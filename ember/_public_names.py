"""The public names of ember's private entry functions (``_cat_entry`` behind ``ember.cat``,
``_where_method`` behind ``Tensor.where``, ...), so that Python's own errors for a call that does
not bind (an unknown keyword, too many positional arguments) name the function as torch does:
``cat() got an unexpected keyword argument 'foo'``, ``Tensor.resize() ...`` for the methods torch
writes in Python. Each renamed function stays reachable by its new ``__module__`` and
``__qualname__`` (pickling by reference, graph caches): ``ember.<name>`` when that is the function,
``ember.Tensor.<name>`` for a ``Tensor.<name>`` qualname, else ``ember._public_names_methods``
(a Tensor method without a top-level function of its own) holds it under that name."""
import sys
import types

# torch.Tensor's methods written in Python (torch/_tensor.py): their errors say ``Tensor.<name>()``
_TORCH_PYTHON_METHODS = frozenset(
    "backward dim_order eig index is_shared istft lstsq lu module_load norm register_hook "
    "register_post_accumulate_grad_hook reinforce resize resize_as share_memory_ solve split stft storage "
    "storage_type symeig to_sparse_coo unflatten unique unique_consecutive".split())

_METHODS = types.ModuleType("ember._public_names_methods",
                            "Tensor methods renamed by ember._public_names, by their public names.")


def _private(f):
    return isinstance(f, types.FunctionType) and f.__qualname__.startswith("_")


def install(ember):
    sys.modules[_METHODS.__name__] = _METHODS
    aliases = {}
    # the module's own dict, not getattr: a lazy attribute (ember.onnx, ...) must stay unimported
    own_attrs = vars(ember)
    for name in sorted(n for n in own_attrs if not n.startswith("_")):
        f = own_attrs.get(name)
        if _private(f):
            aliases.setdefault(id(f), (f, []))[1].append(name)
    for f, names in aliases.values():
        own = f.__name__          # of several aliases: the one its own name contains, then the shortest
        public = min(names, key=lambda k: (k not in own, len(k), k))   # (as ember.fx._names prints it)
        f.__qualname__ = f.__name__ = public
        f.__module__ = "ember"
    Tensor = ember.Tensor
    for name in sorted(n for n in dir(Tensor) if not n.startswith("_")):
        f = Tensor.__dict__.get(name)
        if not _private(f):
            continue
        if name in _TORCH_PYTHON_METHODS:
            f.__qualname__, f.__name__, f.__module__ = f"Tensor.{name}", name, "ember"
            continue
        if own_attrs.get(name) is f:
            f.__qualname__, f.__name__, f.__module__ = name, name, "ember"
            continue
        if getattr(_METHODS, name, f) is not f:
            continue
        f.__qualname__ = f.__name__ = name
        f.__module__ = _METHODS.__name__
        setattr(_METHODS, name, f)

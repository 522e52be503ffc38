"""ember.ops: the operator registry (the dispatcher) and every op record.

Importing this package imports each op-family module, which registers its
records; see registry.py for what a record holds and how a call is
dispatched.
"""
from . import api, registry
from .registry import OPS, defop, defcomposite, dispatch

# Op families. Each module registers its records on import; order matters only
# in that later modules may use bindings of earlier ones at import time.
from . import creation  # noqa: E402,F401
from . import pointwise  # noqa: E402,F401
from . import reduction  # noqa: E402,F401
from . import shape  # noqa: E402,F401
from . import indexing  # noqa: E402,F401
from . import linalg  # noqa: E402,F401
from . import nn_ops  # noqa: E402,F401
from . import copy  # noqa: E402,F401

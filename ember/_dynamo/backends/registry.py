"""``torch._dynamo.backends.registry``: the backend registry (ember's, ``ember.dynamo.backends``)."""
from ...dynamo import list_backends, lookup_backend, register_backend

__all__ = ["list_backends", "lookup_backend", "register_backend"]

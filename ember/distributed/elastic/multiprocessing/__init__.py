"""``ember.distributed.elastic.multiprocessing``: error propagation from launched workers
(``errors``)."""
from .errors import ChildFailedError, ErrorHandler, ProcessFailure, record  # noqa: F401

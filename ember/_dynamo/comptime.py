"""``torch._dynamo.comptime``: ``comptime(fn)`` runs ``fn(ctx)`` while dynamo traces the line
(see ``ember/dynamo/comptime.py``, where the tracer's handlers live)."""
from ..dynamo.comptime import ComptimeContext, ComptimeVar, comptime

__all__ = ["comptime", "ComptimeContext", "ComptimeVar"]

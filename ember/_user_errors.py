"""``UserError``: an error in the user's program that tracing finds (lives outside ember.dynamo
so ``ember.cond`` can raise it without importing the compiler; ``ember.dynamo.exc`` re-exports it)."""


class UserError(RuntimeError):
    """An error in the user's program that tracing finds and that torch's compile raises as
    well, although eager would not (``ember.cond`` branches returning different shapes): raised
    from the compile instead of falling back to eager."""

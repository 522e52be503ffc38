"""Errors of ``ember.export`` (torch raises ``torch._dynamo.exc.UserError`` for the same cases)."""
from ..dynamo.exc import UserError as _DynamoUserError


class UserError(_DynamoUserError):
    """The export cannot be made as asked (bad ``dynamic_shapes``, violated constraints); the
    message says which input and how to fix it."""


class ConstraintViolationError(UserError):
    """A dimension declared dynamic was specialised or its range narrowed by the program."""

"""``len()`` of a datapipe that only has one when its source has one."""
from collections.abc import Sized


def no_length(dp):
    return TypeError(f"{type(dp).__name__} instance doesn't have valid length")


def source_len(dp, source) -> int:
    if isinstance(source, Sized):
        return len(source)
    raise no_length(dp)

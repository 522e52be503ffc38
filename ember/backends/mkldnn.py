"""``ember.backends.mkldnn``: no oneDNN in ember (convolutions are ember's own kernels)."""
import sys

from ._flags import set_flags

enabled = True
deterministic = False


def is_available():
    return False


def flags(enabled=False, deterministic=False):
    return set_flags(sys.modules[__name__], enabled=enabled, deterministic=deterministic)

"""The native convolution library built a second time at the vector width the host does not use
(tests/ops/test_conv_native_widths.py, tests/ops/test_conv_winograd.py): its source with
``EMBER_VB`` (and the row blocks) defined ahead, so every kernel's other-width code runs on any
host (GCC lowers 64-byte vectors to pairs on an AVX2 CPU: slowly, correctly)."""
from __future__ import annotations

import numpy as np

from ember.ops import _conv_native
from ember.runtime.native import LazyLibrary

_OTHER = {64: "#define EMBER_VB 32\n#define EMBER_MR_F 8\n#define EMBER_MR_D 4\n",
          32: "#define EMBER_VB 64\n#define EMBER_MR_F 8\n#define EMBER_MR_D 8\n"}


def other_width_library():
    """(the other width's lazy library getter, its ``_NR`` table); ``_conv_native``'s own source
    and table are left as they were. Call only where ``_conv_native.lib()`` is not None."""
    own = 64 if _conv_native._NR[np.dtype(np.float32)] == 32 else 32
    saved_src, saved_nr = _conv_native._SOURCE, dict(_conv_native._NR)
    try:
        _conv_native._SOURCE = _OTHER[own] + saved_src
        lazy = LazyLibrary(_conv_native._build, "native convolution (other width)", _conv_native.log).get
        assert lazy() is not None
        nr = dict(_conv_native._NR)
    finally:
        _conv_native._SOURCE = saved_src
        _conv_native._NR.clear()
        _conv_native._NR.update(saved_nr)
    assert nr[np.dtype(np.float32)] == (16 if own == 64 else 32)
    return lazy, nr

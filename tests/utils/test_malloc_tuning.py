"""``ember/_malloc.py``: glibc keeps big blocks in the heap after ``import ember`` (no first-touch
page faults for every large output), unless ``EMBER_MALLOC_TUNING=0``."""
import ctypes.util
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember import _malloc

glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None,
                           reason="mallopt is glibc's")


def _applied_in_fresh_process(env_value):
    env = dict(os.environ)
    env.pop("EMBER_MALLOC_TUNING", None)
    if env_value is not None:
        env["EMBER_MALLOC_TUNING"] = env_value
    r = subprocess.run([sys.executable, "-c", "import ember._malloc as m, ember; print(m.applied)"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@glibc
def test_applied_at_import():
    assert _malloc.applied is True
    assert _applied_in_fresh_process(None) == "True"


@glibc
def test_switched_off_by_the_environment():
    assert _applied_in_fresh_process("0") == "False"


def test_large_arrays_round_trip():
    # blocks between glibc's old and new thresholds now come from the heap: freed and reused
    for _ in range(3):
        a = np.random.default_rng(0).standard_normal(12_000_000).astype(np.float32)   # 48 MB
        t = ember.tensor(a)
        np.testing.assert_array_equal((t * 2).numpy(), a * 2)
        del a, t

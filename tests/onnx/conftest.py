"""tests/onnx: collected only where the onnx package and onnxruntime are installed (the test
extra installs them on Python 3.11); every test starts with dynamo's caches empty."""
import importlib.util

import pytest


def _installed(name):
    spec = importlib.util.find_spec(name)
    # tests/ is on sys.path, so this directory would pass for a namespace package called "onnx"
    return spec is not None and spec.origin not in (None, "namespace")


collect_ignore_glob = [] if _installed("onnx") and _installed("onnxruntime") else ["test_*.py"]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    from ember import dynamo
    dynamo.reset()
    yield
    dynamo.reset()

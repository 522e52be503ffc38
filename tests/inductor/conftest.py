import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _inductor_cache_dir(tmp_path_factory):
    """One fresh kernel cache per test session (compiled kernels are shared by the
    tests of the session, never with the user's cache)."""
    d = tmp_path_factory.mktemp("ember_cache")
    old = os.environ.get("EMBER_CACHE_DIR")
    os.environ["EMBER_CACHE_DIR"] = str(d)
    yield str(d)
    if old is None:
        os.environ.pop("EMBER_CACHE_DIR", None)
    else:
        os.environ["EMBER_CACHE_DIR"] = old

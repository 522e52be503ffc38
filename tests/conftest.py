import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="session", autouse=True)
def _ember_cache_dir(tmp_path_factory):
    """One fresh ember cache per test session (compiled kernels, FX-graph and aot
    entries are shared by the tests of the session, never with the user's cache in
    ``~/.cache/ember``). A test that needs its own directory sets ``EMBER_CACHE_DIR``."""
    d = tmp_path_factory.mktemp("ember_cache")
    old = os.environ.get("EMBER_CACHE_DIR")
    os.environ["EMBER_CACHE_DIR"] = str(d)
    yield str(d)
    if old is None:
        os.environ.pop("EMBER_CACHE_DIR", None)
    else:
        os.environ["EMBER_CACHE_DIR"] = old

import pytest

from ember import dynamo


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Every test starts with an empty compile cache (custom ops are guarded by identity, and
    several tests compile functions of the same name)."""
    dynamo.reset()
    yield
    dynamo.reset()

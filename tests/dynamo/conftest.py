import pytest

from ember import dynamo


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Every test starts with an empty compile cache and no hook installed."""
    dynamo.reset()
    yield
    dynamo.reset()

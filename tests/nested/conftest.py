import warnings

import pytest


@pytest.fixture(autouse=True)
def _quiet_torch_nested_prototype_warning():
    # torch warns that its strided nested tensors are a prototype; the tests use them as the oracle
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*nested tensors is in prototype stage.*")
        warnings.filterwarnings("ignore", message=".*PyTorch API of nested tensors.*")
        yield

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def _share_kernel_shards(cache, shared):
    """Point the kernel shard directories (``inductor/00`` .. ``inductor/ff``: the .so files and
    their checksums, named by the sha256 of source, flags, compiler and CPU) of this worker's
    cache at one directory shared by the run's xdist workers, so a kernel -- above all the
    native helpers every process builds on first use (convolution, small ops, fused Adam) -- is
    compiled once per run instead of once per worker. The code cache is safe for concurrent
    writers (atomic replace, checksum written last). Everything else (the FX-graph and aot
    entries, bindings) stays private to the worker, as in a run without xdist."""
    kernels = os.path.join(cache, "inductor")
    os.makedirs(kernels, exist_ok=True)
    for i in range(256):
        shard = f"{i:02x}"
        os.makedirs(os.path.join(shared, shard), exist_ok=True)
        os.symlink(os.path.join(shared, shard), os.path.join(kernels, shard))


@pytest.fixture(scope="session", autouse=True)
def _ember_cache_dir(tmp_path_factory):
    """One fresh ember cache per test session (compiled kernels, FX-graph and aot
    entries are shared by the tests of the session, never with the user's cache in
    ``~/.cache/ember``); under xdist the compiled kernels are shared by the run's workers
    (see :func:`_share_kernel_shards`). A test that needs its own directory sets
    ``EMBER_CACHE_DIR``."""
    d = tmp_path_factory.mktemp("ember_cache")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # a worker's basetemp is <the run's basetemp>/<worker id>: its parent is the run's
        _share_kernel_shards(str(d), str(tmp_path_factory.getbasetemp().parent / "ember_kernels"))
    old = os.environ.get("EMBER_CACHE_DIR")
    os.environ["EMBER_CACHE_DIR"] = str(d)
    yield str(d)
    if old is None:
        os.environ.pop("EMBER_CACHE_DIR", None)
    else:
        os.environ["EMBER_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def _torch_distribution_validation():
    """torch's dynamo, the first time torch.compile / ``torch._dynamo.explain`` runs in a
    process, switches torch.distributions' argument validation off for good
    (``TorchPatcher.patch``): a later test in the same worker comparing ember's validation
    errors with torch's would find torch silent. Each test starts with torch's default (on)."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributions", None) if torch is not None else None
    if dist is not None:
        dist.Distribution.set_default_validate_args(True)
    yield

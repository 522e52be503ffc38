"""Pass infrastructure (``torch.fx.passes.infra``): :mod:`.pass_base`
(PassBase, PassResult), :mod:`.pass_manager` (PassManager and pass ordering
constraints) and :mod:`.partitioner` (CapabilityBasedPartitioner)."""

from . import pass_base, pass_manager  # noqa: F401


def __getattr__(name):
    if name == "partitioner":
        import importlib

        return importlib.import_module(f"{__name__}.partitioner")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Backend-specific partitioning passes (``torch.fx.passes.backends``)."""

"""Op family: nn_ops (records register on import)."""

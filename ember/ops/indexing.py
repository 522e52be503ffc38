"""Op family: indexing (records register on import)."""

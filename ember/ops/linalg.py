"""Op family: linalg (records register on import)."""

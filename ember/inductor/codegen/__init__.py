"""Backends of the loop IR. ``cpp`` (C++/OpenMP for the CPU) is the only one so far; a
Triton backend would consume the same scheduled groups and ops handler protocol."""

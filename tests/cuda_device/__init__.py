"""Tests of the cuda device. Named ``cuda_device``, not ``cuda``: test packages are
importable by their directory name (``tests/`` is on ``sys.path`` under pytest),
and a package ``cuda`` would shadow NVIDIA's ``cuda`` Python package (cuda-python,
which cupy and Triton may import) on a GPU machine."""

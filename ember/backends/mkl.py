"""``ember.backends.mkl``: ember's BLAS is numpy's (OpenBLAS) and its own GEMM, not MKL."""


def is_available():
    return False

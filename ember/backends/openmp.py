"""``ember.backends.openmp``: ember's compiled cpu kernels are OpenMP loops built by a C++ compiler."""


def is_available():
    import shutil
    from ..inductor import config
    return shutil.which(config.cxx) is not None

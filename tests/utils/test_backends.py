"""ember.backends: the switches scripts set and ask, with PyTorch's names and defaults."""
import shutil

import pytest

import ember


def test_the_import_idioms_and_switches_work():
    import ember.backends.cudnn as cudnn
    assert cudnn.enabled and not cudnn.benchmark and not cudnn.deterministic
    cudnn.benchmark = True
    try:
        assert ember.backends.cudnn.benchmark is True
    finally:
        cudnn.benchmark = False
    with ember.backends.cudnn.flags(enabled=False, deterministic=True):
        assert not cudnn.enabled and cudnn.deterministic
    assert cudnn.enabled and not cudnn.deterministic
    with pytest.raises(TypeError):
        with ember.backends.cudnn.flags(nonsense=1):
            pass
    ember.backends.cuda.matmul.allow_tf32 = True
    ember.backends.cuda.matmul.allow_tf32 = False


def test_availability_answers_are_ember_s():
    assert not ember.backends.cudnn.is_available()
    assert not ember.backends.mps.is_available() and not ember.backends.mps.is_built()
    assert not ember.backends.mkldnn.is_available() and not ember.backends.mkl.is_available()
    from ember.inductor import config
    assert ember.backends.openmp.is_available() == (shutil.which(config.cxx) is not None)
    assert ember.backends.cuda.is_built() == ember.cuda.is_available()
    assert ember.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")

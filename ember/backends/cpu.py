"""``ember.backends.cpu``: the SIMD level ember's compiled kernels are built for."""


def get_cpu_capability():
    """"AVX512", "AVX2" or "DEFAULT", as PyTorch names them, from the CPU's flags."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return "DEFAULT"
    if " avx512f" in flags:
        return "AVX512"
    if " avx2" in flags:
        return "AVX2"
    return "DEFAULT"

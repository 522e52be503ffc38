"""``python -m ember.utils.collect_env``: the environment ember runs in, for bug reports
(torch.utils.collect_env's counterpart): ember's version and git commit, Python, the OS, numpy and
its BLAS, ml_dtypes, the C++ compiler the compiled kernels use, CUDA through cupy, and the CPU."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from typing import NamedTuple, Optional

__all__ = ["SystemEnv", "get_env_info", "get_pretty_env_info", "main"]


class SystemEnv(NamedTuple):
    ember_version: str
    git_version: str
    python_version: str
    python_platform: str
    os: str
    numpy_version: str
    blas: str
    ml_dtypes_version: str
    compiler: str
    cuda: str
    cpu: str
    num_threads: int


def _run(cmd) -> Optional[str]:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _compiler() -> str:
    for cc in (os.environ.get("CXX"), "g++", "clang++"):
        if cc and shutil.which(cc):
            first = (_run([cc, "--version"]) or "").splitlines()
            return first[0] if first else cc
    return "None (compiled kernels unavailable)"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cuda() -> str:
    try:
        from ember.runtime import cuda as rc
        if rc.is_available():
            return f"available (cupy {rc.cupy_module().__version__})"
    except Exception:  # noqa: BLE001 - any failure means no usable CUDA
        pass
    return "not available"


def get_env_info() -> SystemEnv:
    import numpy as np
    import ember
    from ember import version
    try:
        import ml_dtypes
        mld = ml_dtypes.__version__
    except ImportError:        # pragma: no cover - ml_dtypes is a dependency
        mld = "not installed"
    try:
        blas = str(np.__config__.CONFIG["Build Dependencies"]["blas"]["name"])
    except Exception:  # noqa: BLE001 - older numpy
        blas = "unknown"
    return SystemEnv(
        ember_version=str(ember.__version__), git_version=version.git_version,
        python_version=f"{sys.version.split()[0]} ({sys.implementation.name}, {platform.architecture()[0]})",
        python_platform=platform.platform(), os=f"{platform.system()} {platform.release()}",
        numpy_version=np.__version__, blas=blas, ml_dtypes_version=mld, compiler=_compiler(), cuda=_cuda(),
        cpu=_cpu(), num_threads=ember.get_num_threads())


def get_pretty_env_info() -> str:
    e = get_env_info()
    rows = [("ember version", e.ember_version), ("ember git commit", e.git_version),
            ("Python version", e.python_version), ("Python platform", e.python_platform), ("OS", e.os),
            ("numpy version", e.numpy_version), ("numpy BLAS", e.blas), ("ml_dtypes version", e.ml_dtypes_version),
            ("C++ compiler", e.compiler), ("CUDA (cupy)", e.cuda), ("CPU", e.cpu),
            ("intra-op threads", str(e.num_threads))]
    return "\n".join(f"{k}: {v}" for k, v in rows)


def main() -> None:
    print("Collecting environment information...")
    print(get_pretty_env_info())


if __name__ == "__main__":
    main()

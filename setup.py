"""Builds ember's C extensions: the PEP 523 frame hook (ember/_C/eval_frame.c) and the
tensor check of dynamo's guards (ember/_C/guards.c); then ember's fixed native helpers for this
machine (ember/inductor/prebuilt.py: the GEMM, the BLAS-threads callback, the precompiled
header), so that a fresh code cache does not build them on first use. ``EMBER_PREBUILD=0``
skips the helpers; a helper that does not build is reported and left to the code cache.

Everything else about the distribution is in pyproject.toml."""
import importlib.util
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_by_path(name, relpath):
    """A module of ember's that imports nothing of ember (pip's build environment has no numpy)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, relpath))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildExtAndHelpers(build_ext):
    """``build_ext``, then the prebuilt helpers next to the extensions (ember/_C/prebuilt)."""

    def _prebuilt_dir(self):
        root = HERE if self.inplace else self.build_lib
        return os.path.join(root, "ember", "_C", "prebuilt")

    def run(self):
        super().run()
        self._helpers = []
        if os.environ.get("EMBER_PREBUILD", "1") == "0":
            return
        config = _load_by_path("_ember_inductor_config", "ember/inductor/config.py")
        prebuilt = _load_by_path("_ember_inductor_prebuilt", "ember/inductor/prebuilt.py")
        target = self._prebuilt_dir()
        self.announce(f"building ember's native helpers into {target}", level=2)
        self._helpers = prebuilt.build(target, config.cxx, config.cpp_flags, config.cpp_libs,
                                       use_pch=config.precompiled_header, say=print)

    def get_outputs(self):
        # an editable install copies what build_ext reports: the helpers must be in it
        return super().get_outputs() + list(getattr(self, "_helpers", []))


setup(
    cmdclass={"build_ext": BuildExtAndHelpers},
    ext_modules=[
        Extension(
            "ember._C._eval_frame",
            sources=["ember/_C/eval_frame.c"],
            extra_compile_args=["-O2", "-Wno-missing-field-initializers"],
        ),
        Extension(
            "ember._C._guards",
            sources=["ember/_C/guards.c"],
            extra_compile_args=["-O2", "-Wno-missing-field-initializers"],
        ),
    ]
)

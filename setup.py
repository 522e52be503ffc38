"""Builds ember's C extensions: the PEP 523 frame hook (ember/_C/eval_frame.c) and the
tensor check of dynamo's guards (ember/_C/guards.c).

Everything else about the distribution is in pyproject.toml."""
from setuptools import Extension, setup

setup(
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

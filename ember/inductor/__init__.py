"""ember.inductor: the compiler backend (ARCHITECTURE.md section 9).

``compile_fx(gm, example_inputs)`` turns an FX graph of prims into fused
C++/OpenMP loops. Modules: ``ir`` (loop IR), ``sizevars`` (sympy sizes and
index simplification), ``lowering`` (one lowering per prim), ``graph`` (the
FX walk and realization policy), ``scheduler`` (loop fusion), ``codegen``
(C++ kernels and the Python wrapper), ``codecache`` (memory + disk cache),
``config`` (knobs and ``EMBER_LOGS``).
"""
from . import config
from .compile_fx import CompiledFunction, GuardError, compile_fx

__all__ = ["compile_fx", "config", "CompiledFunction", "GuardError"]

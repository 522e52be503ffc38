"""``ember._inductor``: the names PyTorch code reaches through ``torch._inductor`` --
``config`` (torch's knob names on ``ember.inductor.config``), ``compile_fx.compile_fx`` and
``compile`` (a graph through ember's default backend), ``utils.fresh_inductor_cache`` and
``utils.run_and_get_code`` (the generated C++ and wrapper). AOTInductor (ahead-of-time compiled
packages: ``aoti_compile_and_package``, ``aoti_load_package``, ``aot_compile``) is not
supported and raises naming it."""
from typing import Any, Callable, Optional

from . import compile_fx as _compile_fx_module
from . import config, utils
from .compile_fx import compile_fx


def compile(gm, example_inputs, options: Optional[dict] = None) -> Callable:
    """Compile FX graph ``gm`` for ``example_inputs`` with ``options`` (config names) in force."""
    return compile_fx(gm, example_inputs, config_patches=options)


def _no_aoti(name: str):
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"ember._inductor.{name}: AOTInductor (ahead-of-time compiled packages) is not "
                                  f"supported; ember.compile compiles at run time and keeps its kernels in the "
                                  f"disk cache (ember.compiler.save_cache_artifacts makes them portable)")
    refuse.__name__ = name
    return refuse


aoti_compile_and_package = _no_aoti("aoti_compile_and_package")
aoti_load_package = _no_aoti("aoti_load_package")
aot_compile = _no_aoti("aot_compile")


def list_options() -> list:
    """The torch config names ``options=`` / ``config.patch`` accept here."""
    return list(config._KNOWN)


__all__ = ["compile", "compile_fx", "config", "utils", "list_options", "aoti_compile_and_package",
           "aoti_load_package", "aot_compile"]

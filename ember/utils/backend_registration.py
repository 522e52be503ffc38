"""``ember.utils.backend_registration``: torch's hooks for out-of-tree device backends
(``PrivateUse1``). ember's device types are fixed (cpu, cuda, meta) and its kernels are its own,
so renaming the private backend or generating its Tensor methods is refused with an error that
says so."""
from ..overrides import handle_torch_function, has_torch_function_unary

__all__ = ["rename_privateuse1_backend", "generate_methods_for_privateuse1_backend", "handle_torch_function",
           "has_torch_function_unary"]


def rename_privateuse1_backend(backend_name: str) -> None:
    """torch: name the PrivateUse1 device type (``torch.device(backend_name)``). Not in ember."""
    if not isinstance(backend_name, str):
        raise TypeError(f"rename_privateuse1_backend(): backend_name must be str, got {type(backend_name).__name__}")
    raise NotImplementedError(f"ember: custom device backends are not supported (cannot register "
                              f"{backend_name!r} as the PrivateUse1 backend; ember's devices are cpu, cuda and meta)")


def generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_packed_sequence=True,
                                             for_storage=False, unsupported_dtype=None) -> None:
    """torch: add ``Tensor.<backend>()`` / ``is_<backend>`` methods for the renamed backend. Not in ember."""
    raise NotImplementedError("ember: custom device backends are not supported (no PrivateUse1 backend to generate "
                              "methods for)")

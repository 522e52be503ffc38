"""``ember.ao.quantization.backend_config``: how a backend describes the ops it can run
quantized (``BackendConfig`` / ``BackendPatternConfig`` / ``DTypeConfig``), and the configs
of the backends ember names -- what FX graph mode quantization (``quantize_fx``) reads."""
from .backend_config import (BackendConfig, BackendPatternConfig, DTypeConfig, DTypeWithConstraints,  # noqa: F401
                             ObservationType)
from .backends import (get_executorch_backend_config, get_fbgemm_backend_config,  # noqa: F401
                       get_native_backend_config, get_native_backend_config_dict, get_qnnpack_backend_config,
                       get_tensorrt_backend_config, get_tensorrt_backend_config_dict, get_x86_backend_config)

__all__ = ["get_native_backend_config", "get_native_backend_config_dict", "get_fbgemm_backend_config",
           "get_qnnpack_backend_config", "get_x86_backend_config", "get_tensorrt_backend_config",
           "get_tensorrt_backend_config_dict", "get_executorch_backend_config", "BackendConfig",
           "BackendPatternConfig", "DTypeConfig", "DTypeWithConstraints", "ObservationType"]

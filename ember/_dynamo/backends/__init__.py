"""``torch._dynamo.backends``: where custom-backend code finds ``common.aot_autograd`` and the
backend ``registry``."""
from . import common, registry

__all__ = ["common", "registry"]

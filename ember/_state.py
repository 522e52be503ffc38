"""Process-wide dispatcher state, kept in one tiny module so the hot path
reads plain attributes of one object.

``grad_enabled``   autograd records nodes only when this is true.
``modes``          the stack of dispatch modes (fake tensors, tracing, ...);
                   the dispatcher consults it before running a kernel.
``autocast``       None, or {device type: dtype} while ``ember.autocast`` regions are active.
``anomaly``        when true, nodes remember the forward stack and the
                   engine checks every backward output for NaN.
"""


import threading


class _State(threading.local):
    """Per thread, as in PyTorch: a thread under ``no_grad`` (inference, or a compile tracing
    under its own grad modes and fake-tensor modes) must not switch autograd off, or push a
    dispatch mode onto, another thread's eager code. Process-wide, a training thread's
    ``backward()`` failed ("does not require grad") while another thread compiled. A new
    thread starts with the defaults. (A thread-local attribute read costs ~30 ns more than a
    slot: a few reads per eager op.)"""

    def __init__(self):
        self.grad_enabled = True
        self.modes = []
        self.anomaly = False
        self.anomaly_check_nan = True
        self.inference = False
        self.autocast = None         # {device type: dtype} of the active autocast regions (ember.amp)
        self.tf_modes = []           # active TorchFunctionModes (ember/_torch_function.py)
        self.tf_subclass_off = False  # inside DisableTorchFunctionSubclass
        self.tf_off = False          # inside DisableTorchFunction (modes off too)
        # the device factories use when not told one (``set_default_device``, ``with
        # ember.device("meta"):``); per thread, as torch's
        from .types import cpu
        self.default_device = cpu


STATE = _State()

# True once any thread has made a device other than the cpu its default: until then the compiler's
# per-call check of ``STATE.default_device`` (a thread-local read) is skipped.
DEFAULT_DEVICE_SET = [False]

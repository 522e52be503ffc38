"""Process-wide dispatcher state, kept in one tiny module so the hot path
reads plain attributes of one object.

``grad_enabled``   autograd records nodes only when this is true.
``modes``          the stack of dispatch modes (fake tensors, tracing, ...);
                   the dispatcher consults it before running a kernel.
``anomaly``        when true, nodes remember the forward stack and the
                   engine checks every backward output for NaN.
"""


class _State:
    __slots__ = ("grad_enabled", "modes", "anomaly", "anomaly_check_nan", "inference")

    def __init__(self):
        self.grad_enabled = True
        self.modes = []
        self.anomaly = False
        self.anomaly_check_nan = True
        self.inference = False


STATE = _State()

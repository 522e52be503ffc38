"""Turning what users hand a SummaryWriter (ember tensors, numpy arrays, Python scalars) into numpy arrays.

Every summary builder works on numpy, so this is the one place that knows about ember tensors."""
import numpy as np


def make_np(x):
    """numpy array holding ``x``'s values: arrays as they are, scalars as a 1-element array (as torch's
    make_np), ember tensors detached and copied to the host; bfloat16 becomes float16 as in torch."""
    if isinstance(x, np.ndarray):
        return x
    if np.isscalar(x):
        return np.array([x])
    from ember.tensor import Tensor
    if isinstance(x, Tensor):
        if x.device.type == "meta":
            raise ValueError("ember.utils.tensorboard: a tensor on the 'meta' device has no values to log")
        import ember
        if x.dtype == ember.bfloat16:
            x = x.to(ember.float16)
        return x.detach().cpu().numpy()
    raise NotImplementedError(f"Got {type(x)}, but numpy array or ember tensor are expected.")

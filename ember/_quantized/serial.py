"""``ember.save`` / ``ember.load`` of quantized tensors: the integers are stored as the
tensor's data (raw bytes, as any tensor's) and the quantizer as JSON fields of its node."""
from __future__ import annotations

import numpy as np

from .. import types as _t
from . import schemes as QS
from .tensor import QParams, make_qtensor


def saved_form(t):
    """(C-ordered integer array, JSON-able quantizer description) of a quantized tensor."""
    qp = t._qp
    arr = np.array(t._irepr, order="C", copy=True)
    if qp.per_channel:
        desc = {"qscheme": qp.qscheme.name, "scales": [float(s) for s in qp.scales],
                "zero_points": [float(z) if qp.zero_points.dtype.kind == "f" else int(z) for z in qp.zero_points],
                "zp_float": qp.zero_points.dtype.kind == "f", "axis": int(qp.axis)}
    else:
        desc = {"qscheme": qp.qscheme.name, "scale": float(qp.scale), "zero_point": int(qp.zero_point)}
    return arr, desc


def from_saved(arr, dtype_name, desc):
    dtype = _t.as_dtype(dtype_name)
    scheme = QS.qscheme(desc["qscheme"])
    if "axis" in desc:
        zp = np.asarray(desc["zero_points"], dtype=np.float32 if desc.get("zp_float") else np.int64)
        qp = QParams(scheme, scales=np.asarray(desc["scales"], dtype=np.float64), zero_points=zp,
                     axis=int(desc["axis"]))
    else:
        qp = QParams(scheme, scale=float(desc["scale"]), zero_point=int(desc["zero_point"]))
    return make_qtensor(np.array(arr, dtype=dtype.np, copy=True), dtype, qp)

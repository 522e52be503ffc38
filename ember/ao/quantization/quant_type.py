"""``QuantType``: the kind of quantization a layer gets (torch's enum, with its string names)."""
import enum

__all__ = ["QuantType"]


class QuantType(enum.IntEnum):
    DYNAMIC = 0
    STATIC = 1
    QAT = 2
    WEIGHT_ONLY = 3


_QUANT_TYPE_TO_STR = {QuantType.STATIC: "static", QuantType.DYNAMIC: "dynamic", QuantType.QAT: "qat",
                      QuantType.WEIGHT_ONLY: "weight_only"}


def _get_quant_type_to_str(quant_type):
    return _QUANT_TYPE_TO_STR[quant_type]


def _quant_type_from_str(name):
    for quant_type, s in _QUANT_TYPE_TO_STR.items():
        if name == s:
            return quant_type
    raise ValueError(f"Unknown QuantType name '{name}'")

"""``QuantizedLSTM``: a converted quantizable LSTM (ember.ao.nn.quantizable.LSTM) whose gate
Linears are quantized Linears and whose FloatFunctionals are QFunctionals with the observed
output parameters: quantized input, quantized outputs and states, as torch's
``torch.ao.nn.quantized.LSTM``."""
from __future__ import annotations

from ...quantizable.rnn import LSTM as _QuantizableLSTM

__all__ = ["LSTM"]


class LSTM(_QuantizableLSTM):
    _FLOAT_MODULE = _QuantizableLSTM

    def _get_name(self):
        return "QuantizedLSTM"

    @classmethod
    def from_float(cls, *args, **kwargs):
        raise NotImplementedError("It looks like you are trying to convert a non-observed LSTM module. Please, see "
                                  "the examples on quantizable LSTMs.")

    @classmethod
    def from_observed(cls, other):
        """Convert the calibrated observed LSTM's pieces (a copy), then re-class it."""
        from ember.ao.quantization import convert
        if not isinstance(other, cls._FLOAT_MODULE):
            raise AssertionError(f"Expected an observed {cls._FLOAT_MODULE.__name__}, got {type(other).__name__}")
        converted = convert(other, inplace=False, remove_qconfig=True)
        converted.__class__ = cls
        return converted

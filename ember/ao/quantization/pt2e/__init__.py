"""The PT2E (export-based) quantization flow's machinery: unlifting and pattern raising of
exported graphs (``_graph``), observer insertion (``prepare``), conversion to quantize /
dequantize operators (``convert``) and the ``quantized_decomposed`` operators (``_decomposed``)."""

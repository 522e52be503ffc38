"""``ember.backends.mha``: the switch for the MultiheadAttention / TransformerEncoder inference fast path.

PyTorch routes eval-mode, no-grad ``nn.MultiheadAttention`` (batch_first self-attention) to
``_native_multi_head_attention`` and ``nn.TransformerEncoder`` with a key padding mask to nested
tensors when this is on. ember follows the same rules (see ``_takes_native_path`` in
``nn/modules/attention.py`` and ``_takes_nested_path`` in ``nn/modules/transformer.py``), and they
show in the results: the native path returns ``None`` attention weights, the nested path zeros
the padded tokens. Turning this off sends both through the ordinary (slow-path) code, as in PyTorch.
"""
_is_fastpath_enabled: bool = True


def get_fastpath_enabled() -> bool:
    """Whether the fast path may be taken (it still runs only when every input condition holds).

    Inside TorchScript PyTorch answers True; ember's ``jit.script`` runs the Python, so the stored
    value is always what is returned."""
    return _is_fastpath_enabled


def set_fastpath_enabled(value: bool) -> None:
    """Turn the fast path on or off. The value is stored as given, as PyTorch does (``get`` returns it)."""
    global _is_fastpath_enabled
    _is_fastpath_enabled = value

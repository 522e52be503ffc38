"""Packed sequences: the type exists so code can name it; packing is not supported yet."""
from __future__ import annotations

from collections import namedtuple

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "pack_sequence"]


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    def __new__(cls, *args, **kwargs):
        raise RuntimeError("ember.nn.utils.rnn.PackedSequence (packed variable-length sequences) is not "
                           "supported; pad the batch and pass a mask instead")


def pack_padded_sequence(*args, **kwargs):
    raise RuntimeError("ember.nn.utils.rnn.pack_padded_sequence is not supported (no PackedSequence support)")


def pad_packed_sequence(*args, **kwargs):
    raise RuntimeError("ember.nn.utils.rnn.pad_packed_sequence is not supported (no PackedSequence support)")


def pack_sequence(*args, **kwargs):
    raise RuntimeError("ember.nn.utils.rnn.pack_sequence is not supported (no PackedSequence support)")


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack variable-length tensors (L_i, *) into (L_max, B, *) (or (B, L_max, *) with batch_first)."""
    import ember
    if padding_side not in ("right", "left"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences)
    max_len = max(s.shape[0] for s in sequences)
    trailing = tuple(sequences[0].shape[1:])
    padded = []
    for s in sequences:
        pad = max_len - s.shape[0]
        if pad:
            fill = ember.full((pad,) + trailing, padding_value, dtype=s.dtype, device=s.device)
            s = ember.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return ember.stack(padded, 0 if batch_first else 1)

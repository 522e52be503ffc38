"""Packed variable-length sequences (``torch.nn.utils.rnn``): PackedSequence, pack/pad/unpad helpers.

A PackedSequence holds the valid time steps of a batch of sequences sorted by decreasing length, time
major: ``data`` is ``(sum(lengths), *)`` with the ``batch_sizes[t]`` rows of step ``t`` contiguous, and
``batch_sizes`` is a CPU int64 tensor. ``sorted_indices[i]`` is the original batch position of sorted
row ``i``; ``unsorted_indices`` is its inverse (None for both when the input was already sorted).

Packing and padding are each one differentiable gather (index_select) of the flattened input, so
gradients flow to the padded input / the packed data. Lengths, batch sizes and indices are host-side
metadata computed with numpy.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]


def _api():
    import ember
    return ember


def _bind(optional, fn):
    return None if optional is None else fn(optional)


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """Holds the data and list of ``batch_sizes`` of a packed sequence (see the module docstring).

    Build one with :func:`pack_padded_sequence` or :func:`pack_sequence`; all RNN modules accept it.
    ``PackedSequence(data, batch_sizes, sorted_indices=None, unsorted_indices=None)`` and
    ``PackedSequence((data, batch_sizes), sorted_indices=...)`` are accepted as in PyTorch.
    """

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is not None:
            dev = getattr(batch_sizes, "device", None)
            if dev is not None and dev.type != "cpu":
                raise ValueError("batch_sizes should always be on CPU. Instances of PackedSequence should never "
                                 "be created manually. They should be instantiated by functions like "
                                 "pack_sequence and pack_padded_sequences in nn.utils.rnn.")
        else:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    # batch_sizes always stays a CPU int64 tensor; the indices follow data's device.
    def to(self, *args, **kwargs):
        """Dtype and/or device conversion of ``data`` (``Tensor.to``'s signature); ``self`` if unchanged."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def call_to(t):
            return t.to(data.device)
        return type(self)(data, self.batch_sizes, _bind(self.sorted_indices, call_to),
                          _bind(self.unsorted_indices, call_to))

    def cuda(self, device=None, non_blocking=False):
        if device is None:
            device = "cuda"
        elif isinstance(device, int):
            device = f"cuda:{device}"
        return self.to(device=device)

    def cpu(self):
        return self.to(device="cpu")

    def double(self):
        return self.to(dtype=_api().float64)

    def float(self):
        return self.to(dtype=_api().float32)

    def half(self):
        return self.to(dtype=_api().float16)

    def long(self):
        return self.to(dtype=_api().int64)

    def int(self):
        return self.to(dtype=_api().int32)

    def short(self):
        return self.to(dtype=_api().int16)

    def char(self):
        return self.to(dtype=_api().int8)

    def byte(self):
        return self.to(dtype=_api().uint8)

    @property
    def is_cuda(self):
        """True if ``data`` is stored on a gpu."""
        return self.data.is_cuda

    def is_pinned(self):
        """True if ``data`` is in pinned memory (``Tensor.is_pinned``)."""
        return self.data.is_pinned()

    def pin_memory(self):
        """A copy with every tensor in pinned host memory (``Tensor.pin_memory``: needs an
        accelerator, as in torch)."""
        return type(self)(self.data.pin_memory(), self.batch_sizes,
                          _bind(self.sorted_indices, lambda t: t.pin_memory()),
                          _bind(self.unsorted_indices, lambda t: t.pin_memory()))


def invert_permutation(permutation):
    """The inverse of a 1-D permutation tensor (None stays None)."""
    if permutation is None:
        return None
    em = _api()
    out = em.empty_like(permutation)
    out.scatter_(0, permutation, em.arange(permutation.numel(), dtype=permutation.dtype,
                                           device=permutation.device))
    return out


def _lengths_to_numpy(lengths):
    """lengths (list / tuple / 1-D CPU tensor / numpy array) -> 1-D int64 numpy array."""
    em = _api()
    if isinstance(lengths, em.Tensor):
        if lengths.device.type != "cpu":
            raise RuntimeError("'lengths' argument should be a 1D CPU int64 tensor, but got "
                               f"{lengths.dim()}D {lengths.device} {lengths.dtype} tensor (call .cpu() on it)")
        if lengths.dim() != 1:
            raise RuntimeError("'lengths' argument should be a 1D CPU int64 tensor, but got "
                               f"{lengths.dim()}D tensor")
        return np.asarray(lengths.detach().tolist(), dtype=np.int64).reshape(-1)
    arr = np.asarray(lengths)
    if arr.ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1-D sequence of ints, but got {arr.ndim}-D")
    return arr.astype(np.int64)


def _batch_sizes_of(lengths):
    """Sorted (decreasing) int64 lengths -> batch_sizes: batch_sizes[t] = #{b : lengths[b] > t}."""
    max_len = int(lengths[0])
    return (lengths[None, :] > np.arange(max_len)[:, None]).sum(1).astype(np.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded ``T x B x *`` (``B x T x *`` with batch_first) batch of sequences of ``lengths``.

    With ``enforce_sorted=True`` the lengths must be in decreasing order; otherwise the batch is
    sorted (stably) and ``sorted_indices`` / ``unsorted_indices`` record the permutation.
    Differentiable with respect to ``input``.
    """
    em = _api()
    if input.dim() < 2:
        raise IndexError(f"pack_padded_sequence: expected an input with at least 2 dimensions "
                         f"({'B x T' if batch_first else 'T x B'} x *), got a {input.dim()}-D tensor of shape "
                         f"{list(input.shape)}")
    lens = _lengths_to_numpy(lengths)
    tdim, bdim = (1, 0) if batch_first else (0, 1)
    T, B = int(input.shape[tdim]), int(input.shape[bdim])
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    if lens.shape[0] != B:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {lens.shape[0]} "
                           f"(batch_size={B}); the batch dimension is dim {bdim} of the input of shape "
                           f"{list(input.shape)} (batch_first={batch_first})")
    bad = np.nonzero(lens <= 0)[0]
    if bad.size:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           f"that is <= 0 (lengths[{int(bad[0])}]={int(lens[bad[0]])}); drop empty sequences "
                           "from the batch before packing")
    too_long = np.nonzero(lens > T)[0]
    if too_long.size:
        i = int(too_long[0])
        raise RuntimeError(f"pack_padded_sequence: lengths[{i}]={int(lens[i])} is longer than the padded "
                           f"sequence length {T} (dim {tdim} of the input of shape {list(input.shape)}, "
                           f"batch_first={batch_first})")
    if enforce_sorted:
        if np.any(lens[1:] > lens[:-1]):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                               "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                               "pack_sequence to sidestep this requirement if you do not need ONNX "
                               "exportability.")
        order = np.arange(B, dtype=np.int64)
        sorted_indices = None
    else:
        order = np.argsort(-lens, kind="stable").astype(np.int64)
        lens = lens[order]
        sorted_indices = em.tensor(order, dtype=em.int64, device=input.device)
    batch_sizes = _batch_sizes_of(lens)
    # row r of the packed data is (step t, sorted row s) for s < batch_sizes[t], t ascending
    t_idx = np.repeat(np.arange(batch_sizes.shape[0], dtype=np.int64), batch_sizes)
    s_idx = np.concatenate([np.arange(n, dtype=np.int64) for n in batch_sizes])
    b_idx = order[s_idx]
    flat = t_idx * B + b_idx if not batch_first else b_idx * T + t_idx
    trailing = tuple(input.shape[2:])
    data = input.reshape((T * B,) + trailing).index_select(0, em.tensor(flat, dtype=em.int64,
                                                                         device=input.device))
    return PackedSequence(data, em.tensor(batch_sizes, dtype=em.int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Inverse of :func:`pack_padded_sequence`: ``(padded, lengths)`` with the batch in its original
    order, ``padded`` of shape ``T x B x *`` (``B x T x *`` with batch_first), ``T`` the longest
    length or ``total_length``. Differentiable with respect to ``sequence.data``."""
    em = _api()
    data, batch_sizes = sequence.data, sequence.batch_sizes
    bs = np.asarray(batch_sizes.tolist() if isinstance(batch_sizes, em.Tensor) else batch_sizes,
                    dtype=np.int64).reshape(-1)
    max_seq_length = int(bs.shape[0])
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {max_seq_length}")
        max_seq_length = int(total_length)
    T = max_seq_length
    B = int(bs[0]) if bs.size else 0
    n_rows = int(bs.sum())
    if int(data.shape[0]) != n_rows:
        raise RuntimeError(f"pad_packed_sequence: data has {int(data.shape[0])} rows but batch_sizes sum to "
                           f"{n_rows}")
    # packed row of (step t, sorted row s); n_rows (the appended padding row) where s >= batch_sizes[t]
    offsets = np.concatenate([[0], np.cumsum(bs)[:-1]]).astype(np.int64)
    src = np.full((T, B), n_rows, dtype=np.int64)
    for t in range(bs.shape[0]):
        src[t, :bs[t]] = offsets[t] + np.arange(bs[t])
    lengths = (src != n_rows).sum(0).astype(np.int64)  # per sorted row
    unsorted = sequence.unsorted_indices
    if unsorted is not None:
        perm = np.asarray(unsorted.tolist(), dtype=np.int64)
        src = src[:, perm]
        lengths = lengths[perm]
    if batch_first:
        src = src.T
    trailing = tuple(data.shape[1:])
    pad_row = em.full((1,) + trailing, padding_value, dtype=data.dtype, device=data.device)
    ext = em.cat([data, pad_row], 0)
    idx = em.tensor(np.ascontiguousarray(src).reshape(-1), dtype=em.int64, device=data.device)
    padded = ext.index_select(0, idx).reshape(tuple(src.shape) + trailing)
    return padded, em.tensor(lengths, dtype=em.int64)


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


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Split a padded batch back into a list of its ``lengths[i]``-long sequences (views of the input).

    Unlike PyTorch, the input is not transposed in place when ``batch_first=False``."""
    lens = _lengths_to_numpy(lengths)
    bdim = 0 if batch_first else 1
    if int(padded_sequences.shape[bdim]) != lens.shape[0]:
        raise ValueError(f"unpad_sequence: got {lens.shape[0]} lengths for a batch of "
                         f"{int(padded_sequences.shape[bdim])} (dim {bdim} of shape "
                         f"{list(padded_sequences.shape)})")
    out = []
    for b, n in enumerate(lens.tolist()):
        out.append(padded_sequences[b, :n] if batch_first else padded_sequences[:n, b])
    return out


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of variable-length tensors (L_i, *): ``pad_sequence`` then ``pack_padded_sequence``."""
    lengths = [int(v.shape[0]) for v in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """Inverse of :func:`pack_sequence`: the list of variable-length tensors, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)

"""``ember.nn.attention.flex_attention``: attention with a user score function and block masks.

``flex_attention(q, k, v, score_mod=..., block_mask=...)`` is scaled-dot-product attention
where the user edits every score with ``score_mod(score, b, h, q_idx, kv_idx)`` and hides
pairs with ``mask_mod(b, h, q_idx, kv_idx)`` (carried by a ``BlockMask``). PyTorch calls
the mods under ``vmap`` with 0-d index tensors; ember calls them once with *broadcasting*
index grids -- ``b`` shaped ``(B,1,1,1)``, ``h`` ``(1,H,1,1)``, ``q_idx`` ``(1,1,L,1)``,
``kv_idx`` ``(1,1,1,S)`` -- which gives the same values for every mod written with
pointwise tensor ops and tensor indexing (``bias[h, q_idx - kv_idx]``): that is what mods
are. It also makes the whole computation ordinary ember ops, so

* it has autograd on every device (PyTorch refuses the backward on CPU; ember does not), and
* under ``ember.compile`` dynamo traces it like any other code: the mods land in the graph
  and the inductor fuses them into the softmax loops (the score matrix is still
  materialised: there is no block-sparse fused kernel, the matmuls are BLAS calls).

Block masks follow PyTorch's *kernel* semantics: a pair is visible when its block is a
"full" block, or a "partial" block whose ``mask_mod`` says True; pairs in blocks the mask
does not list are hidden. For masks made by ``create_block_mask`` this is exactly
``mask_mod``; for hand-made ``BlockMask.from_kv_blocks`` it is what the fused kernel
computes (PyTorch's eager reference ignores the block lists -- the two disagree there).
Rows with nothing visible produce zeros and a log-sum-exp of ``-inf``, as PyTorch.
"""
from __future__ import annotations

import inspect
import itertools
import math
import warnings
from enum import Enum
from typing import NamedTuple, Optional

import ember as _e

__all__ = ["BlockMask", "flex_attention", "create_block_mask", "create_mask", "or_masks",
           "and_masks", "noop_mask", "AuxRequest", "AuxOutput"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30
_WARNED = set()


class AuxRequest(NamedTuple):
    """Which auxiliary outputs ``flex_attention(..., return_aux=...)`` should return."""
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """Auxiliary outputs of ``flex_attention``; a field is None when it was not requested."""
    lse: Optional[object] = None
    max_scores: Optional[object] = None


class _ModificationType(Enum):
    SCORE_MOD = 1
    MASK_MOD = 2


def _mod_type(fn):
    """A mod is told apart by its number of required positional arguments: five for a
    ``score_mod`` (score first), four for a ``mask_mod`` -- PyTorch's rule."""
    code = getattr(fn, "__code__", None)
    if code is not None:
        n = code.co_argcount - len(getattr(fn, "__defaults__", None) or ())
    else:
        n = sum(1 for p in inspect.signature(fn).parameters.values()
                if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    if n == 5:
        return _ModificationType.SCORE_MOD
    if n == 4:
        return _ModificationType.MASK_MOD
    raise AssertionError(f"Expected 4 or 5 positional args, got {n}")


def noop_mask(batch, head, token_q, token_kv):
    """A mask_mod that hides nothing."""
    return batch.new_ones(size=(), dtype=_e.bool, device=batch.device)


def _identity(score, batch, head, token_q, token_kv):
    return score


def _sliced_mask_mod_error(batch, head, token_q, token_kv):
    raise RuntimeError(
        "Cannot use mask_mod from a sliced BlockMask. When you slice a BlockMask using [], the "
        "mask_mod attribute is reset. You must set it from the original BlockMask's mask_mod.")


def or_masks(*mask_mods):
    """A mask_mod that is the union of ``mask_mods``."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b, h, q_idx, kv_idx):
        result = b.new_zeros((), dtype=_e.bool)
        for m in mask_mods:
            result = result | m(b, h, q_idx, kv_idx)
        return result
    return or_mask


def and_masks(*mask_mods):
    """A mask_mod that is the intersection of ``mask_mods``."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b, h, q_idx, kv_idx):
        result = b.new_ones((), dtype=_e.bool)
        for m in mask_mods:
            result = result & m(b, h, q_idx, kv_idx)
        return result
    return and_mask


def _index_grids(B, H, M, N, device):
    """The broadcasting index tensors the mods are called with (see the module docstring)."""
    b = _e.arange(B, device=device).view(B, 1, 1, 1)
    h = _e.arange(H, device=device).view(1, H, 1, 1)
    m = _e.arange(M, device=device).view(1, 1, M, 1)
    n = _e.arange(N, device=device).view(1, 1, 1, N)
    return b, h, m, n


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device=None):
    """The dense ``(B, H, Q_LEN, KV_LEN)`` boolean mask of a mask_mod, or of a score_mod
    (True where the score_mod does not give ``-inf``)."""
    device = "cpu" if device is None else device
    B = 1 if B is None else B
    H = 1 if H is None else H
    b, h, m, n = _index_grids(B, H, Q_LEN, KV_LEN, device)
    if _mod_type(mod_fn) is _ModificationType.SCORE_MOD:
        out = mod_fn(_e.zeros(B, H, Q_LEN, KV_LEN, device=device), b, h, m, n)
        out = out.expand(B, H, Q_LEN, KV_LEN)
        return _e.where(_e.isneginf(out), False, True)
    mask = mod_fn(b, h, m, n)
    return mask.expand(B, H, Q_LEN, KV_LEN)


def _round_up(x, multiple):
    return (x + multiple - 1) // multiple * multiple


def _mask_to_blocks(mask, q_block, kv_block, separate_full_blocks):
    """Per-block counts of visible pairs -> (partial blocks, full blocks or None) as int8."""
    B, H, Q, KV = mask.shape
    mask = _e.nn.functional.pad(mask, (0, _round_up(KV, kv_block) - KV, 0, _round_up(Q, q_block) - Q))
    B, H, Q, KV = mask.shape
    blocks = mask.view(B, H, Q // q_block, q_block, KV // kv_block, kv_block).permute(0, 1, 2, 4, 3, 5)
    counts = blocks.sum(dim=[-2, -1])
    if separate_full_blocks:
        full = q_block * kv_block
        return ((counts > 0) & (counts < full)).to(_e.int8), (counts == full).to(_e.int8)
    return (counts > 0).to(_e.int8), None


def _dense_to_ordered(dense):
    """Block-presence matrix -> (number of listed blocks per row, column indices listed first)."""
    dense = dense.to(_e.int32)
    num = dense.sum(dim=-1).to(_e.int32)
    idx = _e.argsort(dense, dim=-1, descending=True, stable=True).to(_e.int32)
    return num.contiguous(), idx.contiguous()


def _ordered_to_dense(num, idx, num_cols):
    """(counts, indices) -> int32 block-presence matrix: column c of row r is present when
    one of the first ``num[r]`` indices of row r is c."""
    entries = idx.shape[-1]
    listed = _e.arange(entries, device=idx.device) < num.unsqueeze(-1)
    hits = (idx.unsqueeze(-1).to(_e.int64) == _e.arange(num_cols, device=idx.device)) & listed.unsqueeze(-1)
    return hits.any(dim=-2).to(_e.int32)


def _transpose_ordered(num, idx):
    return _dense_to_ordered(_ordered_to_dense(num, idx, idx.shape[-1]).transpose(-2, -1))


class BlockMask:
    """Which (query block, key block) tiles attention visits, plus the ``mask_mod`` that
    decides pairs inside partially visible tiles. Built by ``create_block_mask`` or
    ``BlockMask.from_kv_blocks``; fields as PyTorch's (the q-side lists are the transposes)."""

    def __init__(self, seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                 q_num_blocks, q_indices, full_q_num_blocks, full_q_indices,
                 BLOCK_SIZE=(_DEFAULT_SPARSE_BLOCK_SIZE, _DEFAULT_SPARSE_BLOCK_SIZE), mask_mod=noop_mask):
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks = kv_num_blocks
        self.kv_indices = kv_indices
        self.full_kv_num_blocks = full_kv_num_blocks
        self.full_kv_indices = full_kv_indices
        self.q_num_blocks = q_num_blocks
        self.q_indices = q_indices
        self.full_q_num_blocks = full_q_num_blocks
        self.full_q_indices = full_q_indices
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None, full_kv_indices=None,
                       BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, mask_mod=None, seq_lengths=None,
                       compute_q_blocks=True):
        """A BlockMask from the kv-side block lists (the q-side lists are derived)."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        q_num = q_idx = full_q_num = full_q_idx = None
        if compute_q_blocks:
            q_num, q_idx = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                full_q_num, full_q_idx = _transpose_ordered(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0], kv_indices.shape[-1] * BLOCK_SIZE[1])
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                   q_num, q_idx, full_q_num, full_q_idx, BLOCK_SIZE,
                   mask_mod if mask_mod is not None else noop_mask)

    def as_tuple(self, flatten=True):
        block = tuple(self.BLOCK_SIZE) if flatten else (self.BLOCK_SIZE,)
        seq = tuple(self.seq_lengths) if flatten else (self.seq_lengths,)
        return (*seq, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks, self.full_kv_indices,
                self.q_num_blocks, self.q_indices, self.full_q_num_blocks, self.full_q_indices,
                *block, self.mask_mod)

    @property
    def shape(self):
        return tuple(self.kv_indices.shape[:-2]) + tuple(self.seq_lengths)

    def numel(self):
        return math.prod(self.shape)

    def sparsity(self):
        """Percentage of the (padded) block grid that is skipped, PyTorch's formula."""
        computed = int(self.kv_num_blocks.sum().item())
        if self.full_kv_num_blocks is not None:
            computed += int(self.full_kv_num_blocks.sum().item())
        size = computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1]
        return 100 * (1 - size / self.numel())

    def to_dense(self):
        """The int32 block-presence matrix (partial or full blocks)."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def to_string(self, grid_size=(20, 20), limit=4):
        """A picture of the block grid per (batch, head): full tiles, partial, empty."""
        dense = self.to_dense().numpy()
        *batch_dims, rows, cols = dense.shape
        if isinstance(grid_size, int) and grid_size == -1:
            max_rows, max_cols = rows, cols
        elif isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        else:
            max_rows, max_cols = grid_size
        row_step = max(1, -(-rows // max_rows))
        col_step = max(1, -(-cols // max_cols))
        pictures = []
        for i, where in enumerate(itertools.product(*[range(d) for d in batch_dims])):
            if i == limit:
                pictures += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                             "You can also index (BlockMask[batch, head]) to choose a specific batch or head"]
                break
            grid = dense[where]
            lines = [f"{where}"]
            for r in range(0, rows, row_step):
                line = ""
                for c in range(0, cols, col_step):
                    frac = grid[r:r + row_step, c:c + col_step].astype("float32").mean()
                    line += ("█" if frac == 1 else " " if frac == 0 else "░") * 2
                lines.append(line)
            pictures.append("\n".join(lines) + "\n")
        return "\n".join(pictures)

    def __str__(self):
        return f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n" \
               f"{self.to_string().strip()}\n)"

    def __repr__(self):
        def shape_or_none(t):
            return t.shape if t is not None else None
        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return (f"BlockMask(\n"
                f"    kv_num_blocks={self.kv_num_blocks.shape},\n"
                f"    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape_or_none(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape_or_none(self.full_kv_indices)},\n"
                f"    q_num_blocks={shape_or_none(self.q_num_blocks)},\n"
                f"    q_indices={shape_or_none(self.q_indices)},\n"
                f"    full_q_num_blocks={shape_or_none(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape_or_none(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n"
                f"    mask_mod={name}\n"
                f")")

    def __getitem__(self, index):
        """Select batches / heads / query-block rows (the mask_mod cannot follow a slice, so the
        result's mask_mod raises when used, as PyTorch)."""
        index = index if isinstance(index, tuple) else (index,)
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        sizes = self.kv_num_blocks.shape[:3]
        # ints become length-1 slices so the block tensors keep their (B, H, rows) layout
        index = tuple((slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1)) if isinstance(i, int) else i
                      for i, n in zip(padded, sizes))
        full_num = self.full_kv_num_blocks[index] if self.full_kv_num_blocks is not None else None
        full_idx = self.full_kv_indices[index] if self.full_kv_indices is not None else None
        return BlockMask.from_kv_blocks(self.kv_num_blocks[index], self.kv_indices[index], full_num, full_idx,
                                        BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
                                        seq_lengths=self.seq_lengths,
                                        compute_q_blocks=self.q_indices is not None)

    def _adjust(self, new_q_len, new_kv_len):
        """Crop the mask to the upper-left ``new_q_len x new_kv_len`` corner."""
        rows = -(-new_q_len // self.BLOCK_SIZE[0])
        cols = -(-new_kv_len // self.BLOCK_SIZE[1])

        def crop(num, idx):
            idx = idx[:, :, :rows, :cols]
            num = _e.clamp(num[:, :, :rows], max=cols)
            return (idx < num[:, :, :, None]).sum(dim=-1).to(_e.int32), idx
        kv_num, kv_idx = crop(self.kv_num_blocks, self.kv_indices)
        full_num = full_idx = None
        if self.full_kv_num_blocks is not None:
            full_num, full_idx = crop(self.full_kv_num_blocks, self.full_kv_indices)
        return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=self.BLOCK_SIZE,
                                        mask_mod=self.mask_mod, seq_lengths=(new_q_len, new_kv_len),
                                        compute_q_blocks=self.q_indices is not None)

    def to(self, device):
        def move(t):
            return t.to(device) if t is not None else None
        return BlockMask(self.seq_lengths, move(self.kv_num_blocks), move(self.kv_indices),
                         move(self.full_kv_num_blocks), move(self.full_kv_indices), move(self.q_num_blocks),
                         move(self.q_indices), move(self.full_q_num_blocks), move(self.full_q_indices),
                         self.BLOCK_SIZE, self.mask_mod)

    def _visible(self, B, H, L, S, device):
        """The ``(B|1, H|1, L, S)`` boolean of visible pairs under the kernel semantics."""
        qb, kb = self.BLOCK_SIZE
        b, h, m, n = _index_grids(B, H, L, S, device)
        rows, cols = m.view(L, 1) // qb, n.view(1, S) // kb

        def expand(num, idx):   # block presence -> element presence via the tile of each pair
            return _ordered_to_dense(num, idx, idx.shape[-1]).bool()[..., rows, cols]
        partial = expand(self.kv_num_blocks, self.kv_indices)
        mask = self.mask_mod(b, h, m, n)
        keep = partial & mask
        if self.full_kv_num_blocks is not None:
            keep = keep | expand(self.full_kv_num_blocks, self.full_kv_indices)
        return keep


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile=False, separate_full_blocks=True, compute_dq_write_order=False, dq_kv_order=True):
    """A ``BlockMask`` for ``mask_mod`` over ``B x H x Q_LEN x KV_LEN`` (B/H None: shared)."""
    if _mod_type(mask_mod) is not _ModificationType.MASK_MOD:
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    if compute_dq_write_order:
        raise NotImplementedError("create_block_mask(compute_dq_write_order=True): ember has no "
                                  "deterministic block-sparse backward kernel to use that metadata")
    B = 1 if B is None else B
    H = 1 if H is None else H
    q_block, kv_block = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    partial, full = _mask_to_blocks(mask, q_block, kv_block, separate_full_blocks)
    p_num, p_idx = _dense_to_ordered(partial)
    f_num, f_idx = _dense_to_ordered(full) if full is not None else (None, None)
    return BlockMask.from_kv_blocks(p_num, p_idx, f_num, f_idx, BLOCK_SIZE=(q_block, kv_block),
                                    mask_mod=mask_mod, seq_lengths=(Q_LEN, KV_LEN))


def _warn_once(key, message, category=UserWarning):
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, category, stacklevel=3)


def _validate(query, key, value, enable_gqa, block_mask):
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise ValueError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                         f"{query.dtype}, key.dtype: {key.dtype}, and value.dtype: {value.dtype} instead.")
    if query.device != key.device or query.device != value.device:
        raise ValueError(f"Expected query, key, and value to have the same device type, but got query.device: "
                         f"{query.device}, key.device: {key.device}, and value.device: {value.device} instead.")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if query.size(-1) != key.size(-1):
        raise ValueError(f"Expect query and key/value to have the same embedding dimension but got "
                         f"E={query.size(-1)} and E={key.size(-1)}.")
    Hq, Hkv = query.size(1), key.size(1)
    if not enable_gqa and Hq != Hkv:
        raise ValueError(f"Expect query and key/value to have the same number of heads but got Hq={Hq} and "
                         f"Hkv={Hkv}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and Hq % Hkv != 0:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA but got "
                         f"Hq={Hq} and Hkv={Hkv}.")
    if query.size(0) != key.size(0):
        if block_mask is None:
            raise ValueError(f"Expect query and key/value to have the same batch size, or non-none block_mask, "
                             f"but got block_mask=None, Bq={query.size(0)}, and Bkv={key.size(0)}.")
        if block_mask.kv_num_blocks.size(0) != query.size(0):
            raise ValueError(f"Expect query and key/value to have the same batch size, or block_mask and query "
                             f"to have the same batch size, but got Bq={query.size(0)}, Bkv={key.size(0)}, "
                             f"B_block_mask={block_mask.kv_num_blocks.size(0)}.")
    if block_mask is None:
        return
    if block_mask.mask_mod is _sliced_mask_mod_error:
        raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
    L, S = query.size(-2), key.size(-2)
    bq, bkv = block_mask.shape[-2], block_mask.shape[-1]
    if L > bq or S > bkv:
        raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={L} and "
                         f"kv_len={S}. As the block mask was created for a smaller length than you're using it "
                         f"for, you likely need to create a new block mask.")
    if (L, S) != (bq, bkv):
        raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={L} and "
                         f"kv_len={S}. As the block mask was created for a larger length than you're using it "
                         f"for, you can either 1. create a new block mask with the correct length, or 2. "
                         f"'adjust' the existing block mask to the correct length by calling "
                         f"block_mask._adjust(q_len, kv_len). This essentially 'crops' the block mask to the "
                         f"upper left corner, which does not work for all mask_mods!")
    if query.device != block_mask.kv_num_blocks.device:
        raise RuntimeError(f"Expect q/k/v and block_mask to be on the same device but got {query.device} and "
                           f"{block_mask.kv_num_blocks.device}.")


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False, kernel_options=None, *, return_aux=None):
    """Scaled dot-product attention with ``score_mod`` applied to every (scaled) score and
    ``block_mask`` hiding pairs; shapes ``(B, H, L, E)``, ``(B, Hkv, S, E)``, ``(B, Hkv, S, Ev)``
    -> ``(B, H, L, Ev)``. Scores are computed in float32 (float64 for float64 inputs); the
    log-sum-exp (``return_lse`` / ``return_aux=AuxRequest(lse=True)``) is in natural log."""
    _validate(query, key, value, enable_gqa, block_mask)
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is deprecated, please use "
                         "return_aux=AuxRequest(lse=True) instead.")
    if return_lse:
        _warn_once("deprecated_return_lse", "return_lse is deprecated and will be removed in v2.10. Please use "
                   "return_aux=AuxRequest(lse=True) instead.", FutureWarning)
    score_mod = _identity if score_mod is None else score_mod
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    B, H, L, _ = query.shape
    S = key.size(-2)
    group = H // key.size(1)
    if group > 1:
        key = key.repeat_interleave(group, dim=1)
        value = value.repeat_interleave(group, dim=1)
    key = key.expand(B, *key.shape[1:])
    value = value.expand(B, *value.shape[1:])
    work = _e.float64 if query.dtype is _e.float64 else _e.float32
    scores = (query.to(work) @ key.to(work).transpose(-2, -1)) * scale
    b, h, m, n = _index_grids(B, H, L, S, query.device)
    modded = score_mod(scores, b, h, m, n)
    if not isinstance(modded, _e.Tensor):
        raise TypeError(f"flex_attention: score_mod must return a tensor, got {type(modded).__name__}")
    neg_inf = _e.tensor(float("-inf"), dtype=work, device=query.device)
    if block_mask is not None:
        scores = _e.where(block_mask._visible(B, H, L, S, query.device), modded.to(work), neg_inf)
    else:
        scores = modded.to(work).expand(B, H, L, S)
    # the row maximum is a constant shift (softmax and lse do not depend on it): detached
    row_max = scores.detach().amax(dim=-1, keepdim=True)
    dead = _e.isneginf(row_max)        # nothing visible in the row
    weights = (scores - _e.where(dead, 0.0, row_max)).exp()
    # rows with nothing visible: zero weights and a -inf lse (never 0/0 or log 0, whose
    # gradients would be NaN even where the result is not selected)
    total = _e.where(dead, 1.0, weights.sum(dim=-1, keepdim=True))
    probs = weights / total
    out = probs.to(query.dtype) @ value.to(query.dtype)
    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    want_max = return_aux is not None and return_aux.max_scores
    lse = (_e.where(dead, float("-inf"), row_max + total.log())).squeeze(-1) if want_lse else None
    if return_aux is not None:
        return out, AuxOutput(lse=lse, max_scores=row_max.squeeze(-1) if want_max else None)
    if return_lse:
        return out, lse
    return out

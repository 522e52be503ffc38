"""Session 48: losses against PyTorch -- target conventions and argument checks.

Each test was a mismatch: cross_entropy took any float target as class probabilities (torch: only
one of input's shape; others are class indices the nll kernel rejects), accepted an ignore_index
or a wrong-length weight with probabilities, and refused Byte targets and a size-1 1-D target for
a 1-D input; cosine_embedding_loss / triplet_margin_loss / multi_margin_loss /
multilabel_margin_loss ran without torch's shape and range checks (silent broadcasting or
backend errors); multi_margin_loss's unreduced output had the input's rank (torch: the
target's); gaussian_nll_loss accepted var shapes by another rule; soft_margin_loss broadcast
its operands in the other order; BCEWithLogits' pos_weight broadcast failed inside numpy."""
from __future__ import annotations

import numpy as np
import pytest
from _util_s48 import close, same_error, torch_or_skip

import ember


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + 7 * len(shape) + sum(shape)).standard_normal(shape).astype(np.float32)


def _probs(n, c):
    p = np.random.default_rng(n * c).random((n, c)).astype(np.float32) + 0.1
    return p / p.sum(1, keepdims=True)


def _t(lib, a, **kw):
    return lib.tensor(a, **kw)


ERRORS = {
    "ce_float_wrong_shape": lambda lib: lib.nn.functional.cross_entropy(_t(lib, _rand(5, 4)), _t(lib, _rand(5, 5))),
    "ce_prob_ignore_index": lambda lib: lib.nn.functional.cross_entropy(_t(lib, _rand(5, 4)), _t(lib, _probs(5, 4)),
                                                                        ignore_index=0),
    "ce_prob_weight": lambda lib: lib.nn.functional.cross_entropy(_t(lib, _rand(5, 4)), _t(lib, _probs(5, 4)),
                                                                  weight=_t(lib, _rand(3))),
    "nll_1d_target_size": lambda lib: lib.nn.functional.nll_loss(_t(lib, _rand(4)), _t(lib, np.array([1, 2]))),
    "cos_emb_2d_target": lambda lib: lib.nn.functional.cosine_embedding_loss(
        _t(lib, _rand(5, 4)), _t(lib, _rand(5, 4)), _t(lib, _rand(5, 1))),
    "cos_emb_0d_target": lambda lib: lib.nn.functional.cosine_embedding_loss(
        _t(lib, _rand(5, 4)), _t(lib, _rand(5, 4)), _t(lib, np.float32(1.0))),
    "cos_emb_1d_target_1d_inputs": lambda lib: lib.nn.functional.cosine_embedding_loss(
        _t(lib, _rand(4)), _t(lib, _rand(4)), _t(lib, _rand(3))),
    "cos_emb_3d_inputs": lambda lib: lib.nn.functional.cosine_embedding_loss(
        _t(lib, _rand(5, 4, 2)), _t(lib, _rand(5, 4, 2)), _t(lib, _rand(5))),
    "triplet_ranks": lambda lib: lib.nn.functional.triplet_margin_loss(
        _t(lib, _rand(5, 4)), _t(lib, _rand(4)), _t(lib, _rand(5, 4))),
    "mm_target_size": lambda lib: lib.nn.functional.multi_margin_loss(_t(lib, _rand(5, 4)),
                                                                      _t(lib, np.array([0, 1, 2]))),
    "mm_target_2d": lambda lib: lib.nn.functional.multi_margin_loss(_t(lib, _rand(5, 4)),
                                                                    _t(lib, np.array([[0, 1, 2, 3, 0]]))),
    "mm_target_range": lambda lib: lib.nn.functional.multi_margin_loss(_t(lib, _rand(5, 4)),
                                                                       _t(lib, np.array([0, 1, 2, 3, 4]))),
    "mm_target_negative": lambda lib: lib.nn.functional.multi_margin_loss(_t(lib, _rand(5, 4)),
                                                                          _t(lib, np.array([0, 1, -1, 3, 0]))),
    "mm_weight_size": lambda lib: lib.nn.functional.multi_margin_loss(
        _t(lib, _rand(5, 4)), _t(lib, np.array([0, 1, 2, 3, 0])), weight=_t(lib, _rand(3))),
    "mm_weight_2d": lambda lib: lib.nn.functional.multi_margin_loss(
        _t(lib, _rand(5, 4)), _t(lib, np.array([0, 1, 2, 3, 0])), weight=_t(lib, _rand(2, 2))),
    "mm_input_3d": lambda lib: lib.nn.functional.multi_margin_loss(_t(lib, _rand(5, 4, 1)),
                                                                   _t(lib, np.array([0, 1, 2, 3, 0]))),
    "mm_input_empty": lambda lib: lib.nn.functional.multi_margin_loss(_t(lib, _rand(5, 0)),
                                                                      _t(lib, np.array([0, 1, 2, 3, 0]))),
    "mlm_target_size": lambda lib: lib.nn.functional.multilabel_margin_loss(_t(lib, _rand(5, 4)),
                                                                            _t(lib, np.array([[0, 1, 2]]))),
    "mlm_target_range": lambda lib: lib.nn.functional.multilabel_margin_loss(
        _t(lib, _rand(2, 4)), _t(lib, np.array([[0, 1, 2, 5], [1, -1, 0, 0]]))),
    "mlm_target_below": lambda lib: lib.nn.functional.multilabel_margin_loss(
        _t(lib, _rand(2, 4)), _t(lib, np.array([[0, -2, 2, 1], [1, -1, 0, 0]]))),
    "mlm_input_3d": lambda lib: lib.nn.functional.multilabel_margin_loss(
        _t(lib, _rand(2, 4, 1)), _t(lib, np.array([[0, 1, 2, 3], [1, -1, 0, 0]]))),
    "gnll_var_size": lambda lib: lib.nn.functional.gaussian_nll_loss(_t(lib, _rand(5, 4)), _t(lib, _rand(5, 4)),
                                                                     _t(lib, np.abs(_rand(5, 2)))),
    "gnll_var_last_dim": lambda lib: lib.nn.functional.gaussian_nll_loss(_t(lib, _rand(5, 4)), _t(lib, _rand(5, 4)),
                                                                         _t(lib, np.abs(_rand(4)))),
    "gnll_reduction": lambda lib: lib.nn.functional.gaussian_nll_loss(_t(lib, _rand(5, 4)), _t(lib, _rand(5, 4)),
                                                                      _t(lib, np.abs(_rand(5, 4))), reduction="x"),
    "gnll_negative_float_var": lambda lib: lib.nn.functional.gaussian_nll_loss(_t(lib, _rand(5, 4)),
                                                                               _t(lib, _rand(5, 4)), -1.0),
    "soft_margin_broadcast": lambda lib: lib.nn.functional.soft_margin_loss(_t(lib, _rand(5)), _t(lib, _rand(4))),
    "bce_logits_pos_weight": lambda lib: lib.nn.functional.binary_cross_entropy_with_logits(
        _t(lib, _rand(5, 4)), _t(lib, _probs(5, 4)), pos_weight=_t(lib, _rand(3))),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_loss_argument_checks(case):
    same_error(ERRORS[case])


VALUES = {
    "ce_byte_target": lambda lib, x: lib.nn.functional.cross_entropy(
        x, _t(lib, np.array([0, 1, 2, 3, 1], dtype=np.uint8)), label_smoothing=0.1),
    "nll_byte_target": lambda lib, x: lib.nn.functional.nll_loss(
        x, _t(lib, np.array([0, 1, 2, 3, 1], dtype=np.uint8)), reduction="none"),
    # (values only: torch's backward of this form fails with a size mismatch)
    "nll_1d_size1_target": lambda lib, x: lib.nn.functional.nll_loss(x[0].detach(), _t(lib, np.array([3])),
                                                                     reduction="none"),
    "ce_prob_negative_ignore_index": lambda lib, x: lib.nn.functional.cross_entropy(
        x, _t(lib, _probs(5, 4)), ignore_index=-5, label_smoothing=0.2),
    "mm_1d_input_1d_target": lambda lib, x: lib.nn.functional.multi_margin_loss(
        x[1], _t(lib, np.array([2])), reduction="none"),
    "mm_1d_input_0d_target": lambda lib, x: lib.nn.functional.multi_margin_loss(
        x[1], _t(lib, np.array(2)), reduction="none", p=2),
    "mm_2d_input_0d_target": lambda lib, x: lib.nn.functional.multi_margin_loss(
        x[:1], _t(lib, np.array(3)), reduction="none", margin=0.5),
    "mm_0d_input": lambda lib, x: lib.nn.functional.multi_margin_loss(x[0, 0], _t(lib, np.array(0)),
                                                                      reduction="none"),
    "gnll_var_row": lambda lib, x: lib.nn.functional.gaussian_nll_loss(
        x, _t(lib, _rand(5, 4, seed=3)), _t(lib, np.abs(_rand(1, 4, seed=4)) + 0.1), reduction="none"),
    "gnll_var_col": lambda lib, x: lib.nn.functional.gaussian_nll_loss(
        x, _t(lib, _rand(5, 4, seed=3)), _t(lib, np.abs(_rand(5, 1, seed=4)) + 0.1), full=True),
    "gnll_var_homoscedastic": lambda lib, x: lib.nn.functional.gaussian_nll_loss(
        x, _t(lib, _rand(5, 4, seed=3)), _t(lib, np.abs(_rand(5, seed=4)) + 0.1), reduction="sum"),
    "gnll_float_var": lambda lib, x: lib.nn.functional.gaussian_nll_loss(x, _t(lib, _rand(5, 4, seed=3)), 0.7),
    "cos_emb_1d": lambda lib, x: lib.nn.functional.cosine_embedding_loss(
        x[0], _t(lib, _rand(4, seed=5)), _t(lib, np.float32(-1.0)), margin=-0.5),
}


@pytest.mark.parametrize("case", sorted(VALUES))
def test_loss_values_and_grads(case):
    torch = torch_or_skip()
    x0 = _rand(5, 4, seed=11)
    got = []
    for lib in (torch, ember):
        x = lib.tensor(x0, requires_grad=True)
        out = VALUES[case](lib, x)
        if out.requires_grad:
            (out * lib.tensor(_rand(*out.shape, seed=2)) if out.dim() else out).sum().backward()
        got.append((out, x.grad))
    (to, tg), (eo, eg) = got
    close(eo, to, rtol=1e-5, atol=1e-6)
    assert (eg is None) == (tg is None)
    if tg is not None:
        close(eg, tg, rtol=1e-5, atol=1e-6)

"""``mul``/``div`` save an operand only when the gradient that reads it is needed (PyTorch's
MulBackward0/DivBackward0 rule, ``OpDef.save_if_grad``): a tensor multiplied by a number (or by a
tensor that does not require grad) may be written in place before the backward; it raised
"modified by an inplace operation" (box decoding: ``y[:, 1:] = y[:, 1:] * 2; y[0] += 1``)."""
import numpy as np
import pytest

import ember


def _a(seed=0):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal((5, 3)))


CASES = [
    ("mul by a number", lambda v, c: v * 2.5),
    ("rmul", lambda v, c: 2.5 * v),
    ("div by a number", lambda v, c: v / 4.0),
    ("mul by a tensor without grad", lambda v, c: v * c),
    ("div by a tensor without grad", lambda v, c: v / (c + 3)),
]


@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
def test_operand_written_after_a_product_with_a_constant(name, f):
    a = _a().requires_grad_(True)
    c = _a(1)[:, 1:]
    y = a.clone()
    z = f(y[:, 1:], c)
    y.add_(1)                      # the product did not save y: no version error
    (z * z).sum().backward()
    # d/da sum(f(a[:, 1:])^2) = 2 f(a) f'(a) -- computed from the old values
    a2 = _a().requires_grad_(True)
    z2 = f(a2[:, 1:], c)
    (z2 * z2).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), a2.grad.numpy(), rtol=1e-12)


def test_box_decoding_pattern_matches_torch():
    torch = pytest.importorskip("torch")
    outs = []
    for lib in (ember, torch):
        a = lib.tensor(_a(2).numpy(), requires_grad=True)
        y = a.clone()
        y[:, 1:] = y[:, 1:] * 2
        y[0] += 1
        (y * y).sum().backward()
        outs.append(a.grad.numpy() if lib is ember else a.grad.detach().numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-12)


def test_an_operand_the_other_gradient_reads_is_still_checked():
    """``x * w`` with w requiring grad saves x (w's gradient reads it): writing x in place
    before the backward is still an error, as in PyTorch."""
    w = _a(3)[:, 1:].requires_grad_(True)
    a = _a().requires_grad_(True)
    y = a.clone()
    z = y[:, 1:] * w
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_gradients_of_both_operands_unchanged():
    for f in (lambda x, y: x * y, lambda x, y: x / (y * y + 1)):
        x, y = _a(4).requires_grad_(True), _a(5).requires_grad_(True)
        assert ember.autograd.gradcheck(f, (x, y))
        assert ember.autograd.gradgradcheck(f, (x, y))


def test_unsaved_operand_reads_as_none_like_torch():
    x = _a().requires_grad_(True)
    y = x * _a(1)
    assert y.grad_fn._saved_self is None
    assert tuple(y.grad_fn._saved_other.shape) == (5, 3)
    w = _a(2).requires_grad_(True)
    assert tuple((x * w).grad_fn._saved_self.shape) == (5, 3)

"""What the bindings accept and refuse: object, string and complex arrays are a TypeError; torch tensors that require
grad are read through .detach() (the same storage), bfloat16 and float16 tensors are accepted; -inf logits are masked
keys and a row without a finite logit is a ValueError; row_entropy refuses rows that are not distributions."""
import numpy as np
import pytest

import attnscope

from conftest import numpy_softmax


@pytest.mark.parametrize("bad, kind", [
    (np.array([[1.0, "a"]], dtype=object), "object"),
    (np.array([[object(), object()]], dtype=object), "object"),
    (np.array([["1.0", "2.0"]]), "string"),
    (np.array([[b"1", b"2"]]), "string"),
    (np.array([[1 + 2j, 0.5 + 0j]]), "complex"),
    (np.array([[1 + 0j, 0.5 + 0j]], dtype=np.complex64), "complex"),
])
@pytest.mark.parametrize("function", [attnscope.softmax, attnscope.row_entropy, attnscope.sparsemax])
def test_object_string_and_complex_arrays_are_type_errors(bad, kind, function):
    with pytest.raises(TypeError, match=f"is a {kind} array"):
        function(bad)


def test_complex_input_names_the_fix():
    with pytest.raises(TypeError, match=r"a\.real"):
        attnscope.softmax(np.array([1 + 1j, 2 + 0j]))


def test_not_an_array_is_a_type_error():
    with pytest.raises(TypeError, match="not an array-like of numbers"):
        attnscope.softmax([[1.0, 2.0], [3.0]])  # ragged


def test_minus_infinity_logits_are_masked_keys(rng):
    z = rng.standard_normal((3, 5, 7)) * 2
    z_masked = z.copy()
    z_masked[..., 2] = -np.inf
    z_masked[1, 3, 5] = -np.inf
    got = attnscope.softmax(z_masked)
    assert np.all(got[..., 2] == 0.0) and got[1, 3, 5] == 0.0
    np.testing.assert_allclose(got, numpy_softmax(z_masked), rtol=1e-13, atol=1e-15)
    # the same through an explicit mask
    np.testing.assert_allclose(got, attnscope.softmax(z, mask=np.isfinite(z_masked)), rtol=0, atol=0)
    # float32 (torch's usual dtype), with causal on top
    z32 = z_masked.astype(np.float32)
    causal = attnscope.softmax(z32[0, :5, :5], causal=True)
    assert causal.dtype == np.float32
    np.testing.assert_allclose(causal, numpy_softmax(np.where(np.tril(np.ones((5, 5), bool)), z32[0, :5, :5], -np.inf)),
                               rtol=1e-6, atol=1e-7)
    for function in (attnscope.sparsemax, attnscope.entmax15):
        out = function(z_masked)
        assert np.all(out[..., 2] == 0.0)
        np.testing.assert_allclose(out.sum(-1), 1.0, rtol=0, atol=1e-12)


def test_row_without_a_finite_logit_is_an_error():
    z = np.array([[0.5, 1.0, -np.inf], [-np.inf, -np.inf, -np.inf]])
    with pytest.raises(ValueError, match="row 1 has no finite logit"):
        attnscope.softmax(z)
    with pytest.raises(ValueError, match="row 0 of matrix 1 has no finite logit"):
        attnscope.softmax(np.stack([np.zeros((2, 3)), np.full((2, 3), -np.inf)]))
    with pytest.raises(ValueError, match="no finite logit"):  # the causal row 0 sees only key 0, which is -inf
        attnscope.softmax(np.array([[-np.inf, 0.0], [0.0, 0.0]]), causal=True)
    with pytest.raises(ValueError):  # +inf and NaN are still errors
        attnscope.softmax(np.array([[0.0, np.inf]]))
    with pytest.raises(ValueError):
        attnscope.softmax(np.array([[0.0, np.nan]]))


def test_row_entropy_refuses_rows_that_are_not_distributions(rng):
    with pytest.raises(ValueError, match="row 0 sums to 5"):
        attnscope.row_entropy(np.array([[2.0, 3.0]]))
    with pytest.raises(ValueError, match="row 1 sums to 0.9"):
        attnscope.row_entropy(np.array([[0.5, 0.5], [0.45, 0.45]]))
    with pytest.raises(ValueError):
        attnscope.row_entropy(np.array([[1.5, -0.5]]))
    p = numpy_softmax(rng.standard_normal((4, 300)))
    np.testing.assert_allclose(attnscope.row_entropy(p), -(p * np.log(p)).sum(-1), rtol=1e-12)
    p32 = p.astype(np.float32)  # float32 rounding of a true distribution is accepted
    np.testing.assert_allclose(attnscope.row_entropy(p32), -(p * np.log(p)).sum(-1), rtol=1e-5)
    causal = attnscope.softmax(rng.standard_normal((6, 6)), causal=True)
    np.testing.assert_allclose(attnscope.row_entropy(causal, causal=True)[0], 0.0, atol=1e-15)


torch = pytest.importorskip("torch")


def test_requires_grad_tensors_are_read_without_detaching_by_hand(rng):
    z = torch.tensor(rng.standard_normal((4, 9)), requires_grad=True)
    expected = torch.softmax(z.detach(), dim=-1).numpy()
    np.testing.assert_allclose(attnscope.softmax(z), expected, rtol=1e-13)
    assert z.requires_grad and z.grad is None  # the caller's tensor is left as it was
    p = torch.softmax(z, dim=-1)  # a non-leaf tensor in the graph
    np.testing.assert_allclose(attnscope.row_entropy(p), -(expected * np.log(expected)).sum(-1), rtol=1e-12)


def test_half_precision_tensors_are_accepted(rng):
    z = torch.tensor(rng.standard_normal((3, 16)), dtype=torch.float32)
    for dtype in (torch.bfloat16, torch.float16):
        low = z.to(dtype)
        expected = torch.softmax(low.double(), dim=-1).numpy()  # every bf16/f16 value is exact in float32/64
        got = attnscope.softmax(low)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(attnscope.softmax(low.requires_grad_()), expected, rtol=1e-6, atol=1e-7)


def test_captured_torch_scores_with_minus_infinity_work_unchanged(rng):
    q, k = torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    scores = q @ k.transpose(-1, -2) / 8 ** 0.5
    scores = scores.masked_fill(torch.triu(torch.ones(6, 6, dtype=torch.bool), 1), float("-inf"))
    np.testing.assert_allclose(attnscope.softmax(scores), torch.softmax(scores, dim=-1).numpy(), rtol=2e-6, atol=1e-7)

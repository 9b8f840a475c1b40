"""`causal` is a bool; an offset is its own keyword (causal_offset); causal=True on a non-square input without an
offset is refused naming both alignments (top-left as torch.tril, bottom-right as a KV cache), never guessed."""
import numpy as np
import pytest

import attnscope

from conftest import numpy_softmax


def masked_softmax(z, offset):
    """softmax over keys j <= i + offset (torch.tril(ones, diagonal=offset))."""
    visible = np.tril(np.ones(z.shape[-2:], bool), k=offset)
    return numpy_softmax(np.where(visible, z, -np.inf))


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_causal_offset_is_tril_with_that_diagonal(rng, offset):
    z = rng.standard_normal((2, 5, 5 + offset)) * 2
    np.testing.assert_allclose(attnscope.softmax(z, causal=True, causal_offset=offset), masked_softmax(z, offset),
                               rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(attnscope.row_entropy(masked_softmax(z, offset), causal=True, causal_offset=offset),
                               attnscope.row_entropy(masked_softmax(z, offset)), rtol=1e-12)


def test_square_causal_needs_no_offset(rng):
    z = rng.standard_normal((3, 6, 6))
    np.testing.assert_allclose(attnscope.softmax(z, causal=True), masked_softmax(z, 0), rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(attnscope.softmax(z, causal=np.bool_(True)), attnscope.softmax(z, causal=True))


@pytest.mark.parametrize("value", [0, 1, 2, -1])
@pytest.mark.parametrize("function", [attnscope.softmax, attnscope.row_entropy, attnscope.composition.closure])
def test_integer_causal_is_a_type_error_naming_the_keyword(rng, value, function):
    p = numpy_softmax(rng.standard_normal((4, 4)))
    with pytest.raises(TypeError, match=rf"causal must be True or False, got {value}; an offset is its own "
                                        rf"keyword: causal=True, causal_offset={value}"):
        function(p, causal=value)


def test_other_causal_values_are_type_errors(rng):
    with pytest.raises(TypeError, match="causal must be True or False, got 'yes'"):
        attnscope.softmax(np.zeros((2, 2)), causal="yes")


def test_offset_without_causal_is_refused(rng):
    with pytest.raises(ValueError, match=r"attnscope\.softmax: causal_offset=2 needs causal=True"):
        attnscope.softmax(np.zeros((3, 5)), causal_offset=2)


@pytest.mark.parametrize("rows, cols", [(3, 7), (7, 3), (1, 4)])
def test_non_square_causal_states_both_alignments_or_takes_an_offset(rng, rows, cols):
    z = rng.standard_normal((rows, cols))
    message = (rf"causal=True on {rows} queries x {cols} keys is ambiguous: top-left alignment .* is causal_offset=0, "
               rf"bottom-right alignment \(the queries are the last {rows} positions.*causal_offset={cols - rows}")
    for function in (attnscope.softmax, attnscope.jacobian_spectral_norm, attnscope.capacity.weight_summary,
                     attnscope.logits.visible_logit_extremes):
        with pytest.raises(ValueError, match=message):
            function(z if function is not attnscope.capacity.weight_summary else numpy_softmax(z), causal=True)
    if rows <= cols:  # bottom-right: a KV cache whose queries are the last `rows` positions
        bottom_right = attnscope.softmax(z, causal=True, causal_offset=cols - rows)
        np.testing.assert_allclose(bottom_right, masked_softmax(z, cols - rows), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(bottom_right[-1], numpy_softmax(z[-1]), rtol=1e-13)  # the last query sees all

"""attnscope.analysis.compare: two models head by head, as a dict of numpy columns (those of `compare --csv`).

A model compared with itself changes nothing (exact zeros, JS 0, overlap 1). Two different models of one shape and
vocabulary (the llama and gemma2 fixtures of tests/fixtures/hf: 2 layers x 4 heads, 300 tokens; gemma2 has a sliding
window of 12 on alternate layers and an attention softcap) agree head by head with a numpy reference computed here
from both models' dense attention captures (Transformer.forward(capture=["attention"]), 0 where a key is not seen).
"""
import pathlib

import numpy as np
import pytest

import attnscope

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"
NAMES = ["sink_mass", "entropy", "entropy_sink", "entropy_content", "max_weight", "jacobian_norm"]
COLUMNS = ["rank", "layer", "head", "js_keep", "js_drop", "drop_rows", "top_k_overlap"] + [
    column for name in NAMES for column in (name + "_a", name + "_b", "delta_" + name)
]


@pytest.fixture(scope="module")
def llama():
    return attnscope.model.load_huggingface_model(str(FIXTURES / "llama"))


@pytest.fixture(scope="module")
def gemma2():
    return attnscope.model.load_huggingface_model(str(FIXTURES / "gemma2"))


def _tokens(count, seed):
    return [int(t) for t in np.random.default_rng(seed).integers(0, 300, size=count)]


def _js(p, q):
    """Jensen-Shannon divergence (nats) of the rows of p and q, 0 ln 0 = 0."""
    m = 0.5 * (p + q)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 0.5 * (np.where(p > 0, p * np.log(p / m), 0.0) + np.where(q > 0, q * np.log(q / m), 0.0)).sum(axis=-1)


def _entropy(p):
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)


def _reference(a, b, top_k):
    """Per-head means of the dense L x L attention matrices a, b (causal, float64), sink key 0."""
    length = a.shape[0]
    out = {"js_keep": _js(a, b).mean()}
    for side, p in (("a", a), ("b", b)):
        s = p[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            binary = -np.where(s > 0, s * np.log(s), 0.0) - np.where(s < 1, (1 - s) * np.log1p(-s), 0.0)
        out["sink_mass_" + side] = s.mean()
        out["entropy_" + side] = _entropy(p).mean()
        out["entropy_sink_" + side] = binary.mean()  # H_b(s) + s·H(sinks), one sink key
        out["max_weight_" + side] = p.max(axis=1).mean()
    # the drop convention: the content keys 1.. renormalised, rows 1.. (row 0 sees key 0 only)
    content_a = a[1:, 1:] / a[1:, 1:].sum(axis=1, keepdims=True)
    content_b = b[1:, 1:] / b[1:, 1:].sum(axis=1, keepdims=True)
    out["js_drop"] = _js(content_a, content_b).mean()
    overlap = 0.0
    for i in range(length):
        k = min(top_k, i + 1)
        top_a = set(np.argsort(-a[i, : i + 1], kind="stable")[:k])
        top_b = set(np.argsort(-b[i, : i + 1], kind="stable")[:k])
        overlap += len(top_a & top_b) / k
    out["top_k_overlap"] = overlap / length
    return out


def test_compare_returns_the_csv_columns_and_a_model_with_itself_changes_nothing(llama):
    result = attnscope.analysis.compare(llama, llama, _tokens(40, 1), top_k=3, query_block=16)
    assert list(result.keys()) == COLUMNS
    for name in COLUMNS:
        assert result[name].shape == (8,)
    for name in ["rank", "layer", "head", "drop_rows"]:
        assert result[name].dtype == np.int64
    assert result["js_keep"].dtype == np.float64
    assert list(result["rank"]) == list(range(1, 9))
    assert sorted(zip(result["layer"].tolist(), result["head"].tolist())) == [(l, h) for l in range(2) for h in range(4)]
    assert np.all(result["js_keep"] == 0)
    assert np.all(result["js_drop"] == 0)
    assert np.all(result["top_k_overlap"] == 1)
    assert np.all(result["drop_rows"] == 39)
    for name in NAMES:
        assert np.all(result["delta_" + name] == 0)
        assert np.array_equal(result[name + "_a"], result[name + "_b"])
    np.testing.assert_allclose(result["entropy_sink_a"] + result["entropy_content_a"], result["entropy_a"], atol=1e-12)


def test_compare_of_two_models_agrees_with_numpy_on_dense_captures(llama, gemma2):
    tokens = _tokens(30, 2)
    result = attnscope.analysis.compare(llama, gemma2, tokens, top_k=4)
    dense_a = llama.forward(tokens, capture=["attention"])
    dense_b = gemma2.forward(tokens, capture=["attention"])
    assert np.all(np.diff(result["js_keep"]) <= 0)  # most changed first
    for r in range(8):
        layer, head = int(result["layer"][r]), int(result["head"][r])
        a = np.asarray(dense_a[f"layer{layer}.attention"][head], np.float64)
        b = np.asarray(dense_b[f"layer{layer}.attention"][head], np.float64)
        want = _reference(a, b, 4)
        for name, value in want.items():
            assert result[name][r] == pytest.approx(value, abs=2e-5), (layer, head, name)
        assert result["js_keep"][r] > 1e-3  # different models
        for name in NAMES:
            assert result["delta_" + name][r] == result[name + "_b"][r] - result[name + "_a"][r]


def test_compare_refuses_bad_input_with_value_error(llama, data_dir):
    stories = attnscope.model.load_model(str(data_dir / "stories260K.bin"))
    with pytest.raises(ValueError, match="different vocabularies: 300 and 512"):
        attnscope.analysis.compare(llama, stories, [1, 2, 3])
    with pytest.raises(ValueError, match="no tokens"):
        attnscope.analysis.compare(llama, llama, [])
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        attnscope.analysis.compare(llama, llama, [1, 2], top_k=0)
    with pytest.raises(ValueError, match="negative sink key -2"):
        attnscope.analysis.compare(llama, llama, [1, 2], sink_keys=[-2])
    with pytest.raises(ValueError, match="300"):
        attnscope.analysis.compare(llama, llama, [1, 300])
    with pytest.raises(ValueError, match="threads must be >= 0"):
        attnscope.analysis.compare(llama, llama, [1, 2], threads=-1)

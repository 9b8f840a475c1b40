"""Models through attnscope.model: stories260K against the llama2.c golden file, a Hugging Face folder, the
tokenizer against the reference GPT-2 encoder, and the streaming statistics against numpy."""
import json

import numpy as np
import pytest
import scipy.stats

import attnscope


@pytest.fixture(scope="module")
def stories(data_dir):
    return attnscope.model.load_model(str(data_dir / "stories260K.bin"))


@pytest.fixture(scope="module")
def golden(data_dir):
    return json.loads((data_dir / "stories260K.greedy.json").read_text())


def test_stories260k_matches_the_llama2c_golden_file(stories, golden):
    config = stories.config
    assert (config["dim"], config["n_layers"], config["n_heads"], config["n_kv_heads"]) == (64, 5, 8, 4)
    tokens = golden["input_tokens"]
    result = stories.capture(tokens, ["scores", "attention"])
    assert result["logits"].shape == (256, 512) and result["logits"].dtype == np.float32
    assert result["layer4.attention"].shape == (8, 256, 256)
    for position, reference in golden["logits"].items():
        reference = np.array(reference)
        ours = result["logits"][int(position)]
        assert np.abs(ours - reference).max() <= 1e-4 * np.abs(reference).max()
    for entry in golden["attention"]:
        ours = result[f"layer{entry['layer']}.attention"][entry["head"], entry["pos"], : entry["pos"] + 1]
        np.testing.assert_allclose(ours, entry["values"], rtol=1e-4, atol=1e-6)
    for entry in golden["scores"]:
        ours = result[f"layer{entry['layer']}.scores"][entry["head"], entry["pos"], : entry["pos"] + 1]
        reference = np.array(entry["values"])
        assert np.abs(ours - reference).max() <= 1e-4 * np.abs(reference).max()
    generated = stories.generate_greedy([tokens[0]], 255)
    assert generated[1:] == golden["next_tokens"][:255]


def test_what_if_maps_and_streaming_statistics(stories, golden):
    tokens = golden["input_tokens"][:64]
    ssmax = stories.capture(tokens, ["attention"], map="ssmax:0.43")
    np.testing.assert_allclose(ssmax["layer0.attention"].sum(-1), 1, rtol=1e-5)
    dense = stories.forward(tokens, capture=["attention"])
    streamed = stories.forward_row_statistics(tokens, top_k=[1, 4])
    stats = streamed.row_statistics
    assert stats.entropy.shape == (5, 8, 64) and stats.top_k_mass.shape == (5, 8, 64, 2)
    attention = np.stack([dense[f"layer{l}.attention"] for l in range(5)]).astype(np.float64)
    np.testing.assert_allclose(stats.entropy, scipy.stats.entropy(attention, axis=-1), atol=2e-4)
    np.testing.assert_allclose(stats.sink_mass, attention[..., 0], atol=2e-5)
    np.testing.assert_allclose(stats.top_k_mass[..., 0], attention.max(-1), atol=2e-5)
    np.testing.assert_allclose(streamed.logits, dense["logits"], atol=2e-5 * np.abs(dense["logits"]).max())
    nll = stories.mean_negative_log_likelihood(tokens)
    logp = dense["logits"].astype(np.float64)
    logp = logp - logp.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    assert nll == pytest.approx(-np.mean([logp[p, tokens[p + 1]] for p in range(63)]), rel=1e-5)


def test_stream_row_statistics_against_numpy(rng):
    q = rng.standard_normal((50, 16)).astype(np.float32)
    k = rng.standard_normal((50, 16)).astype(np.float32)
    stats = attnscope.stream.row_statistics(q, k, attnscope.stream.RowStatisticsOptions(top_k=[2]))
    scores = (q.astype(np.float64) @ k.T.astype(np.float64)) / 4
    scores[np.triu_indices(50, 1)] = -np.inf
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(stats.entropy, scipy.stats.entropy(p, axis=-1), atol=1e-5)
    np.testing.assert_allclose(stats.sink_mass, p[:, 0], atol=1e-6)
    np.testing.assert_allclose(stats.top_k_mass[:, 0], np.sort(p, -1)[:, -2:].sum(-1), atol=1e-6)
    norms = [np.linalg.eigvalsh(np.diag(r) - np.outer(r, r)).max() for r in p]
    np.testing.assert_allclose(stats.jacobian_norm, norms, atol=1e-6)
    np.testing.assert_array_equal(stats.visible_keys, np.arange(1, 51))
    with pytest.raises(ValueError, match="row_statistics"):
        attnscope.stream.row_statistics(q, k[:, :8])


def test_huggingface_folder_and_tokenizer(data_dir):
    folder = data_dir / "gpt2-wp-mini"
    gpt2 = attnscope.model.load_huggingface_model(str(folder))
    assert gpt2.config["architecture"] == "gpt2" and gpt2.config["n_layers"] == 4
    tokenizer = attnscope.text.ByteLevelBpeTokenizer.from_folder(str(folder))
    reference = json.loads((data_dir / "war_and_peace.gpt2-tokens.json").read_text())
    ids = tokenizer.encode(reference["text"])
    assert ids == reference["gpt2_tokens"]
    assert tokenizer.decode(ids) == reference["text"]
    result = gpt2.capture(ids[:32], ["attention"])
    assert result["layer3.attention"].shape == (3, 32, 32)
    np.testing.assert_allclose(result["layer3.attention"].sum(-1), 1, rtol=1e-5)
    with pytest.raises(ValueError, match="learned position embedding"):
        gpt2.forward_row_statistics([0] * 1025)

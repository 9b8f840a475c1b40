"""Transformer.generate with per-step statistics: the tokens are generate_greedy's / generate_sampled's, step s is
row prompt_length - 1 + s of forward_row_statistics on the returned tokens, the most attended key carries the row's
largest weight of the captured attention, the key-0 attention is the captured attention's column 0, stop tokens end
the run, and bad arguments raise ValueError naming the value."""
import pathlib

import numpy as np
import pytest

import attnscope

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"


@pytest.fixture(scope="module")
def stories(data_dir):
    return attnscope.model.load_model(str(data_dir / "stories260K.bin"))


def check_against_streaming(model, prompt, result):
    tokens = result["tokens"]
    p, steps = result["prompt_length"], result["steps"]
    assert p == len(prompt) and len(tokens) == p + steps and tokens[:p] == list(prompt)
    full = model.forward_row_statistics(tokens, top_k=[1, 4])
    rows = slice(p - 1, p - 1 + steps)
    for name in ("max_scaled_logit", "log_partition", "entropy", "sink_mass", "max_weight", "jacobian_norm"):
        step_values = getattr(result["row_statistics"], name)
        assert step_values.shape == (model.config["n_layers"], model.config["n_heads"], steps)
        # bitwise on AVX2 + FMA (the packed GEMM); float rounding of a row alone otherwise
        np.testing.assert_allclose(step_values, getattr(full.row_statistics, name)[:, :, rows], rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(result["row_statistics"].top_k_mass, full.row_statistics.top_k_mass[:, :, rows],
                               rtol=2e-4, atol=2e-4)
    attention = model.capture(tokens, ["attention"])
    first_rows = result["first_key_attention"].shape[2]
    assert first_rows == min(8, p + steps - 1)
    for layer in range(model.config["n_layers"]):
        weights = attention[f"layer{layer}.attention"]  # (heads, L, L)
        for s in range(steps):
            row = weights[:, p - 1 + s, :]
            chosen = row[np.arange(row.shape[0]), result["most_attended_key"][layer, :, s]]
            assert np.all(chosen >= row.max(axis=1) - 1e-5)
        np.testing.assert_allclose(result["first_key_attention"][layer], weights[:, :first_rows, 0], atol=2e-5)


def test_greedy_generation_statistics_are_the_streaming_rows(stories):
    prompt = [1, 403, 407, 405]
    result = stories.generate(prompt, 30, top_k=[1, 4], sink_rate_queries=8)
    assert result["tokens"] == stories.generate_greedy(prompt, 30)
    check_against_streaming(stories, prompt, result)


def test_sampled_generation_on_gpt_oss_with_learned_sinks():
    model = attnscope.model.load_model(str(FIXTURES / "gpt_oss"))
    prompt = [5, 17, 40, 2, 99, 7, 31, 8, 60, 12]
    result = model.generate(prompt, 20, temperature=0.8, seed=3, top_k=[1, 4], sink_rate_queries=8)
    assert result["tokens"] == model.generate_sampled(prompt, 20, 0.8, 3)
    check_against_streaming(model, prompt, result)
    assert result["learned_sink"].shape == (2, 4, 20)
    assert np.all((result["learned_sink"] > 0) & (result["learned_sink"] < 1))


def test_stop_tokens_and_tokens_only(stories):
    prompt = [1, 403]
    greedy = stories.generate_greedy(prompt, 12)
    stop = greedy[2 + 4]
    first = greedy.index(stop, 2)
    result = stories.generate(prompt, 12, stop_tokens=[stop])
    assert result["tokens"] == greedy[: first + 1] and result["steps"] == first - 1
    assert result["row_statistics"].entropy.shape[2] == first - 1
    plain = stories.generate(prompt, 12, statistics=False)
    assert plain["tokens"] == greedy and "row_statistics" not in plain


def test_bad_arguments_raise_value_errors_naming_the_value(stories):
    with pytest.raises(ValueError, match="steps must be >= 0, got -1"):
        stories.generate([1], -1)
    with pytest.raises(ValueError, match="exceeds seq_len 512"):
        stories.generate([1], 512)
    with pytest.raises(ValueError, match="temperature must be finite and >= 0"):
        stories.generate([1], 2, temperature=-1.0)
    with pytest.raises(ValueError, match="stop token 512"):
        stories.generate([1], 2, stop_tokens=[512])
    with pytest.raises(ValueError, match="empty token sequence"):
        stories.generate([], 2)

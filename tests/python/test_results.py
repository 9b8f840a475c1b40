"""Every struct result is an object of a typed class of attnscope.results (a dataclass of the C++ struct's fields):
attributes, a repr naming the class and the fields, to_dict() and to_pandas(). Every class is produced by a call."""
import dataclasses

import numpy as np
import pytest

import attnscope
from attnscope import capacity, composition, logits, results, stream

from conftest import numpy_softmax


def calls(rng):
    """(function name, result) for every function returning a struct result."""
    heads = numpy_softmax(rng.standard_normal((3, 6, 6)) + 3 * (np.arange(6) == 0))
    a, b = heads[0], heads[1]
    x = capacity.project_to_sphere(rng.standard_normal((12, 4)))
    alpha = numpy_softmax(4 * x @ x[0])
    top = capacity.top_n(alpha, 3)
    options = logits.FitOptions()
    options.steps = 3
    options.head_dim = 2
    target = logits.causal_band_target(6, 2)
    q, k = rng.standard_normal((8, 4)), rng.standard_normal((8, 4))
    return [
        ("capacity.separability", capacity.separability(alpha, x, top)),
        ("capacity.separability_at_radius", capacity.separability_at_radius(alpha, x, top, 0.5)),
        ("capacity.lemma1_constants", capacity.lemma1_constants(0.5, 2.0)),
        ("capacity.softmax_weight_bounds", capacity.softmax_weight_bounds(1.0, 1.0, 1.0, 10)),
        ("capacity.weight_summary", capacity.weight_summary(a)),
        ("capacity.theorem2_bounds", capacity.theorem2_bounds(alpha, x, top, 1.0, 0.1, 1.0)),
        ("capacity.separability_rows", capacity.separability_rows(a, rng.standard_normal((6, 3)), [1, 2])[0]),
        ("capacity.lemma2_jacobian_bound", capacity.lemma2_jacobian_bound([1.0, 2.0], [1.0, 2.0])),
        ("capacity.gradient_sensitivity", capacity.gradient_sensitivity(rng.standard_normal((2, 5, 5)), 1.0, 1e-6, 1)),
        ("capacity.exact_jacobian_norm", capacity.exact_jacobian_norm(rng.standard_normal((2, 5, 5)), 1.0)),
        ("capacity.ks_2samp", capacity.ks_2samp([1.0, 2.0, 3.0], [1.5, 2.5])),
        ("capacity.critical_top_n", capacity.critical_top_n([1, 2], [[1.0, 2.0], [1.0, 3.0]],
                                                            [[1.0, 2.0], [2.0, 3.0]], 0.05)),
        ("capacity.wilcoxon_signed_rank", capacity.wilcoxon_signed_rank([1.0, 2.0, 3.5], [1.5, 2.5, 3.0])),
        ("capacity.fit_power_law", capacity.fit_power_law([1.0, 2.0, 4.0], [2.0, 4.1, 7.9])),
        ("composition.split_sink", composition.split_sink(a)),
        ("composition.entropy_split", composition.entropy_split(a)),
        ("composition.aitchison_split", composition.aitchison_split(a, b)),
        ("composition.js_split", composition.js_split(a, b)),
        ("composition.cosine_conventions", composition.cosine_conventions(a, b)),
        ("composition.channel_summary", composition.channel_summary(a)),
        ("composition.head_scores", composition.head_scores(heads)),
        ("composition.pair_metric_matrices", composition.pair_metric_matrices(heads, "js")),
        ("composition.flip_rate", composition.flip_rate(heads, "cosine")),
        ("logits.fit_qk", logits.fit_qk(target, options=options)),
        ("logits.logit_gap_rows", logits.logit_gap_rows(rng.standard_normal((6, 6)), target, causal=True)),
        ("logits.rounding_error", logits.rounding_error(rng.standard_normal((4, 4)), logits.RoundingFormat.float16)),
        ("logits.visible_logit_extremes", logits.visible_logit_extremes(rng.standard_normal((4, 4)))),
        ("softmax_jacobian_norm_bounds", attnscope.softmax_jacobian_norm_bounds(a)),
        ("stream.row_statistics", stream.row_statistics(q, k)),
        ("stream.summarize", stream.summarize(list(rng.standard_normal(20)))),
        ("stream.position_curve", stream.position_curve(list(rng.standard_normal(20)), 4)),
    ]


def test_every_struct_result_is_a_typed_result(rng):
    produced = set()
    for name, result in calls(rng):
        assert isinstance(result, results.Result), name
        produced.add(type(result).__name__)
        fields = [f.name for f in dataclasses.fields(result)]
        assert fields, name
        assert list(result.to_dict()) == fields, name
        for field in fields:
            value = result.to_dict()[field]
            assert value is getattr(result, field) or isinstance(getattr(result, field), results.Result), name
        text = repr(result)
        assert text.startswith(type(result).__name__ + "(") and all(f"{f}=" in text for f in fields), name
    # every class of attnscope.results is produced by some call (ForwardRowStatistics in test_model_results)
    classes = {n for n in results.__all__ if n not in ("Result", "HeadTable", "HeadReport", "ModelComparison",
                                                         "ForwardRowStatistics")}
    assert classes == produced


def test_fields_keep_their_names_and_values(rng):
    a = numpy_softmax(rng.standard_normal((5, 7)))
    summary = capacity.weight_summary(a)
    assert summary.max_weight == pytest.approx(a.max(), rel=1e-15)
    assert summary.to_dict()["mean_row_max"] == pytest.approx(a.max(-1).mean(), rel=1e-13)
    split = composition.entropy_split(a)
    np.testing.assert_allclose(split.entropy, -(a * np.log(a)).sum(-1), rtol=1e-12)
    assert "entropy=array(shape=(5,), dtype=float64)" not in repr(split)  # five values are shown, not a shape
    assert "entropy=[" in repr(split)


def test_to_pandas_rows(rng):
    pandas = pytest.importorskip("pandas")
    heads = numpy_softmax(rng.standard_normal((4, 6, 6)))
    scores = composition.head_scores(heads)
    frame = scores.to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame.columns) == ["sink_mass", "content_entropy", "raw_entropy", "content_redundancy"]
    assert len(frame) == 4  # one row per head
    np.testing.assert_array_equal(frame["sink_mass"].to_numpy(), scores.sink_mass)
    one = capacity.fit_power_law([1.0, 2.0, 4.0], [2.0, 4.0, 8.0]).to_pandas()
    assert len(one) == 1 and one["exponent"][0] == pytest.approx(1.0)


def test_model_results(data_dir):
    stories = attnscope.model.load_model(data_dir / "stories260K.bin")
    result = stories.forward_row_statistics([1, 2, 3, 4])
    assert isinstance(result, results.ForwardRowStatistics)
    assert isinstance(result.row_statistics, results.RowStatistics)
    assert result.row_statistics.entropy.shape == (5, 8, 4)
    assert isinstance(result.to_dict()["row_statistics"], dict)

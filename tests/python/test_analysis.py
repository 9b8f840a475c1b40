"""attnscope.analysis: the per-head report as numpy columns (from arrays, a capture dict or a capture file) against
numpy closed forms, the file and in-memory paths agreeing, the HTML page, the column glossary and the errors."""
import numpy as np
import pytest

import attnscope

from conftest import numpy_softmax


def causal_heads(rng, heads=3, length=9):
    """Causal softmax attention of random scores (float64) with the scores' future entries -inf."""
    scores = 2 * rng.standard_normal((heads, length, length))
    future = np.triu(np.ones((length, length), dtype=bool), 1)
    scores[:, future] = -np.inf
    return numpy_softmax(scores), scores


def test_head_report_of_arrays_matches_numpy(rng):
    attention, scores = causal_heads(rng)
    report = attnscope.analysis.head_report(attention, scores=scores, basic=True)
    assert list(report) == ["layer", "head", "bad_rows", "sink_mass", "entropy", "max_max_weight",
                            "max_scaled_logit", "mean_jacobian_norm", "max_jacobian_norm"]
    np.testing.assert_array_equal(report["layer"], [0, 0, 0])
    np.testing.assert_array_equal(report["head"], [0, 1, 2])
    np.testing.assert_array_equal(report["bad_rows"], [0, 0, 0])
    np.testing.assert_allclose(report["sink_mass"], attention[:, :, 0].mean(axis=1), rtol=1e-13)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(attention > 0, -attention * np.log(attention), 0.0)
    np.testing.assert_allclose(report["entropy"], terms.sum(axis=2).mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(report["max_max_weight"], attention[:, 1:, :].max(axis=(1, 2)), rtol=1e-15)
    np.testing.assert_allclose(report["max_scaled_logit"], np.where(np.isfinite(scores), scores, -np.inf).max(axis=(1, 2)))
    # The exact spectral norm of diag p - p p^T per row, by numpy's eigenvalues.
    norms = np.array([[np.abs(np.linalg.eigvalsh(np.diag(p) - np.outer(p, p))).max() for p in head] for head in attention])
    np.testing.assert_allclose(report["mean_jacobian_norm"], norms.mean(axis=1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(report["max_jacobian_norm"], norms.max(axis=1), rtol=1e-9, atol=1e-12)
    # Without scores the column is NaN; a layers axis numbers the layers.
    no_scores = attnscope.analysis.head_report(attention[None].repeat(2, axis=0), basic=True, layout="layers,heads,q,k")
    np.testing.assert_array_equal(no_scores["layer"], [0, 0, 0, 1, 1, 1])
    assert np.isnan(no_scores["max_scaled_logit"]).all()


def test_file_dict_and_arrays_give_the_same_report(rng, tmp_path):
    layers = [causal_heads(rng, heads=2, length=7) for _ in range(2)]
    values = [rng.standard_normal((2, 7, 4)) for _ in range(2)]
    capture = {}
    for i, ((attention, scores), v) in enumerate(zip(layers, values)):
        capture[f"layer{i}.attention"] = attention.astype(np.float32)
        capture[f"layer{i}.scores"] = scores.astype(np.float32)
        capture[f"layer{i}.v"] = v.astype(np.float32)
    path = tmp_path / "capture.npz"
    np.savez(path, **capture)
    from_dict = attnscope.analysis.head_report(capture, columns="all")
    from_file = attnscope.analysis.head_report(path, columns="all")
    from_str = attnscope.analysis.head_report(str(path), columns=["entropy", "sink"])
    assert list(from_file) == list(from_dict)
    for name in from_dict:
        np.testing.assert_array_equal(from_file[name], from_dict[name], err_msg=name)
    np.testing.assert_array_equal(from_str["entropy"], from_dict["entropy"])
    assert list(from_str) == ["layer", "head", "bad_rows", "entropy", "sink_mass"]
    # Layer 1 as arrays is layer 0 of its own report, with the same values.
    one = attnscope.analysis.head_report(capture["layer1.attention"], scores=capture["layer1.scores"],
                                         values=capture["layer1.v"], columns="all")
    np.testing.assert_array_equal(one["gradient_sensitivity"], from_dict["gradient_sensitivity"][2:])
    # Selections.
    selected = attnscope.analysis.head_report(path, layers=[1], heads=[0], basic=True)
    np.testing.assert_array_equal(selected["layer"], [1])
    np.testing.assert_array_equal(selected["entropy"], from_dict["entropy"][2:3])


def test_model_capture_round_trip(data_dir, tmp_path):
    stories = attnscope.model.load_model(str(data_dir / "stories260K.bin"))
    tokens = stories.generate_greedy([1], 15)
    capture = stories.forward(tokens, capture=["scores", "attention", "v"])
    assert "layer4.attention" in capture
    path = tmp_path / "stories.npz"
    np.savez(path, **capture)
    from_dict = attnscope.analysis.head_report(capture, basic=True)
    from_file = attnscope.analysis.head_report(path, basic=True)
    assert len(from_file["head"]) == 40
    for name in from_dict:
        np.testing.assert_array_equal(from_file[name], from_dict[name], err_msg=name)


def test_write_html_and_glossary(rng, tmp_path):
    attention, scores = causal_heads(rng, heads=2, length=6)
    page = tmp_path / "page.html"
    report = attnscope.analysis.write_html(attention, str(page), scores=scores, tokens=list("abcdef"), title="T<1>")
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "<title>T&lt;1&gt;</title>" in text
    escape = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
    for column in attnscope.analysis.columns():
        assert f'<dt id="glossary-{column["name"]}">' in text
        assert "".join(escape.get(c, c) for c in column["glossary"]["measures"]) in text, column["name"]
    np.testing.assert_array_equal(report["head"], [0, 1])
    columns = attnscope.analysis.columns(all=True)
    assert len(columns) == 12
    assert [c["name"] for c in attnscope.analysis.columns(basic=True)] == [c["name"] for c in columns[:6]]
    for column in columns:
        assert all(column["glossary"][part] for part in ("measures", "high", "low", "typical")), column["name"]


def test_errors(rng, tmp_path):
    attention, _ = causal_heads(rng, heads=1, length=5)
    bad = attention.copy()
    bad[0, 3, 0] += 0.5
    with pytest.raises(ValueError, match=r"layer 0 head 0 .*lenient=True"):
        attnscope.analysis.head_report(bad)
    lenient = attnscope.analysis.head_report(bad, lenient=True, basic=True)
    np.testing.assert_array_equal(lenient["bad_rows"], [1])
    with pytest.raises(ValueError, match="unknown column 'nope'"):
        attnscope.analysis.head_report(attention, columns=["nope"])
    with pytest.raises(ValueError, match="scores must have the attention's shape"):
        attnscope.analysis.head_report(attention, scores=np.zeros((1, 5, 4)))
    with pytest.raises(ValueError, match=r"batch_index applies to a \(batch, heads, q, k\) array"):
        attnscope.analysis.head_report(attention, batch_index=0)
    path = tmp_path / "future.npz"
    np.savez(path, **{"layer0.attention": attention.astype(np.float32),
                      "attnscope_capture_layout": np.array([99], dtype=np.int32)})
    with pytest.raises(OSError, match="capture layout version 99"):
        attnscope.analysis.head_report(path)
    with pytest.raises(OSError, match="no_such_file"):
        attnscope.analysis.head_report(tmp_path / "no_such_file.npz")
    five = tmp_path / "five.npy"
    np.save(five, np.broadcast_to(attention, (2, 3, 1, 5, 5)).astype(np.float32))
    with pytest.raises(ValueError, match="has a batch axis of size 3"):
        attnscope.analysis.head_report(five)
    np.testing.assert_array_equal(attnscope.analysis.head_report(five, batch_index=2, basic=True)["layer"], [0, 1])

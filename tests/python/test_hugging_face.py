"""The report takes what PyTorch and Hugging Face hand it: output.attentions (a tuple of one [batch, heads, L, L]
tensor per layer) with batch_index, torch tensors of any float dtype, and 4-D arrays only with layout= (both readings
named otherwise). The report's default columns are those of `attnscope report`."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import attnscope

from conftest import numpy_softmax


def hf_attentions(rng, layers=3, batch=2, heads=4, length=7):
    """What a Hugging Face model returns as output.attentions (eager attention, causal): a tuple with one
    [batch, heads, L, L] array per layer."""
    scores = rng.standard_normal((layers, batch, heads, length, length)) * 2
    scores = np.where(np.tril(np.ones((length, length), bool)), scores, -np.inf)
    return tuple(numpy_softmax(scores[l]) for l in range(layers))


def numpy_entropy(attention):
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(attention > 0, -attention * np.log(attention), 0.0)
    return terms.sum(axis=-1).mean(axis=-1)


def test_output_attentions_tuple_with_batch_index(rng):
    attentions = hf_attentions(rng)
    for b in range(2):
        report = attnscope.analysis.head_report(attentions, batch_index=b, basic=True)
        np.testing.assert_array_equal(report["layer"], np.repeat(np.arange(3), 4))
        np.testing.assert_array_equal(report["head"], np.tile(np.arange(4), 3))
        expected = np.concatenate([numpy_entropy(layer[b]) for layer in attentions])
        np.testing.assert_allclose(report["entropy"], expected, rtol=1e-12)
        expected_sink = np.concatenate([layer[b][:, :, 0].mean(axis=-1) for layer in attentions])
        np.testing.assert_allclose(report["sink_mass"], expected_sink, rtol=1e-12)
    # a batch of one needs no batch_index
    single = tuple(layer[1:] for layer in attentions)
    np.testing.assert_array_equal(attnscope.analysis.head_report(single, basic=True)["entropy"],
                                  attnscope.analysis.head_report(attentions, batch_index=1, basic=True)["entropy"])
    # selections index the tuple's layers
    selected = attnscope.analysis.head_report(attentions, batch_index=0, layers=[2], heads=[1, 3], basic=True)
    np.testing.assert_array_equal(selected["layer"], [2, 2])
    np.testing.assert_array_equal(selected["head"], [1, 3])


def test_output_attentions_errors(rng):
    attentions = hf_attentions(rng)
    with pytest.raises(ValueError, match=r"layer 0 \(2, 4, 7, 7\) has a batch of 2: choose one with batch_index"):
        attnscope.analysis.head_report(attentions)
    with pytest.raises(ValueError, match=r"batch_index 2 is outside \[0, 2\)"):
        attnscope.analysis.head_report(attentions, batch_index=2)
    with pytest.raises(ValueError, match="layer 1 has shape"):
        attnscope.analysis.head_report((attentions[0], attentions[1][0, 0]), batch_index=0)
    with pytest.raises(ValueError, match="sequence of layers is empty"):
        attnscope.analysis.head_report(())
    with pytest.raises(ValueError, match="not with a sequence of layers"):
        attnscope.analysis.head_report(attentions, batch_index=0, scores=attentions)


def test_ambiguous_four_axis_array_is_refused_with_both_readings(rng, tmp_path):
    stacked = np.stack([layer[0] for layer in hf_attentions(rng)])  # (3, 4, 7, 7)
    message = r"is 4-D: it is either \(layers, heads, q, k\).* or \(batch, heads, q, k\).*layout="
    with pytest.raises(ValueError, match=message):
        attnscope.analysis.head_report(stacked)
    with pytest.raises(ValueError, match=message):
        attnscope.analysis.write_html(stacked, tmp_path / "page.html")
    as_layers = attnscope.analysis.head_report(stacked, layout="layers,heads,q,k", basic=True)
    np.testing.assert_array_equal(as_layers["layer"], np.repeat(np.arange(3), 4))
    as_batch = attnscope.analysis.head_report(stacked, layout="batch,heads,q,k", batch_index=2, basic=True)
    np.testing.assert_array_equal(as_batch["layer"], np.zeros(4))
    np.testing.assert_allclose(as_batch["entropy"], numpy_entropy(stacked[2]), rtol=1e-12)
    with pytest.raises(ValueError, match="has a batch of 3: choose one with batch_index"):
        attnscope.analysis.head_report(stacked, layout="batch,heads,q,k")
    with pytest.raises(ValueError, match="layout must be None"):
        attnscope.analysis.head_report(stacked, layout="heads,layers,q,k")
    with pytest.raises(ValueError, match="batch_index applies to a"):
        attnscope.analysis.head_report(stacked[0], batch_index=0)
    # the same refusal for a bare 4-D array in a file
    path = tmp_path / "attention.npy"
    np.save(path, stacked.astype(np.float32))
    with pytest.raises(ValueError, match=message):
        attnscope.analysis.head_report(path)
    from_file = attnscope.analysis.head_report(path, layout="batch,heads,q,k", batch_index=2, basic=True)
    np.testing.assert_allclose(from_file["entropy"], as_batch["entropy"], rtol=1e-5)


def test_default_columns_are_those_of_the_cli(rng, tmp_path):
    attention = hf_attentions(rng, layers=1, batch=1, heads=2, length=6)[0][0]
    report = attnscope.analysis.head_report(attention)
    names = [n for n in report if n not in ("layer", "head", "bad_rows")]
    assert names == [c["name"] for c in attnscope.analysis.columns()]
    costly = {"causal_stable_rank", "separability_at_critical_n", "gradient_sensitivity"}
    assert not costly & set(names)
    every = [c["name"] for c in attnscope.analysis.columns(all=True)]
    assert names == [n for n in every if n not in costly] and costly <= set(every)
    assert list(attnscope.analysis.head_report(attention, columns="all"))[3:] == every
    assert list(attnscope.analysis.head_report(attention, columns="entropy,sink_mass"))[3:] == ["entropy", "sink_mass"]
    # the CLI's own CSV header, when the command-line tool is built in the module's build folder (same sources)
    beside = pathlib.Path(attnscope.__file__).resolve().parents[2] / "tools" / "attnscope"
    cli = os.environ.get("ATTNSCOPE_CLI") or (str(beside) if os.access(beside, os.X_OK) else None)
    if cli is None:
        pytest.skip("the attnscope command-line tool is not built beside the module (set ATTNSCOPE_CLI)")
    path = tmp_path / "attention.npy"
    np.save(path, attention)
    csv = tmp_path / "report.csv"
    subprocess.run([cli, "report", str(path), "--csv", str(csv)], check=True, capture_output=True)
    header = next(line for line in csv.read_text().splitlines() if not line.startswith("#")).split(",")  # after the run
    assert [h for h in header if h not in ("layer", "head", "bad_rows")] == names


def test_report_is_typed_and_shows_as_html(rng):
    attentions = hf_attentions(rng, layers=2, batch=1, heads=3, length=5)
    report = attnscope.analysis.head_report(attentions, basic=True)
    assert isinstance(report, attnscope.results.HeadReport)
    assert report.heads == 6
    np.testing.assert_array_equal(report.entropy, report["entropy"])  # columns as attributes
    assert set(report.to_dict()) == set(report)
    assert "HeadReport(6 heads; columns: bad_rows, sink_mass" in repr(report)
    html = report._repr_html_()
    assert html.startswith("<table") and html.count("<tr>") == 1 + 6
    for name in report:
        assert f"<th>{name}</th>" in html
    with pytest.raises(AttributeError, match="no column 'nope'"):
        report.nope


def test_report_to_pandas_one_row_per_layer_and_head(rng):
    pandas = pytest.importorskip("pandas")
    report = attnscope.analysis.head_report(hf_attentions(rng, layers=2, batch=1, heads=3, length=5), basic=True)
    frame = report.to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    assert len(frame) == 6 and list(frame.columns) == list(report)
    assert list(zip(frame["layer"], frame["head"])) == [(l, h) for l in range(2) for h in range(3)]
    np.testing.assert_array_equal(frame["entropy"].to_numpy(), report["entropy"])


torch = pytest.importorskip("torch")


def test_torch_output_attentions_every_float_dtype(rng):
    attentions = hf_attentions(rng, layers=2, batch=2, heads=2, length=6)
    expected = attnscope.analysis.head_report(attentions, batch_index=1, basic=True)
    for dtype, tolerance in ((torch.float64, 1e-12), (torch.float32, 1e-5), (torch.float16, 3e-3),
                             (torch.bfloat16, 2e-2)):
        tensors = tuple(torch.from_numpy(layer).to(dtype) for layer in attentions)
        report = attnscope.analysis.head_report(tensors, batch_index=1, basic=True)
        np.testing.assert_allclose(report["entropy"], expected["entropy"], rtol=tolerance, err_msg=str(dtype))
        np.testing.assert_array_equal(report["layer"], expected["layer"])


def test_torch_output_attentions_to_html(rng, tmp_path):
    tensors = tuple(torch.from_numpy(layer) for layer in hf_attentions(rng, layers=2, batch=2, heads=2, length=6))
    page = tmp_path / "page.html"
    report = attnscope.analysis.write_html(tensors, page, batch_index=0, basic=True, tokens=list("abcdef"))
    assert page.read_text().startswith("<!DOCTYPE html>")
    np.testing.assert_array_equal(report["layer"], [0, 0, 1, 1])


def test_module_import_does_not_import_torch():
    code = "import sys, attnscope; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))

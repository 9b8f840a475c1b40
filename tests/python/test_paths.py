"""Every argument that names a file or folder takes str, bytes and os.PathLike (pathlib.Path, or any object with
__fspath__)."""
import os
import pathlib

import numpy as np
import pytest

import attnscope


class FsPath:
    """An os.PathLike that is not a pathlib.Path."""

    def __init__(self, path):
        self.path = str(path)

    def __fspath__(self):
        return self.path


def kinds(path):
    return [pathlib.Path(path), FsPath(path), os.fsencode(str(path)), str(path)]


def test_io_functions_take_path_like(tmp_path, rng):
    x = rng.standard_normal((3, 4))
    for i, path in enumerate(kinds(tmp_path / "x.npy")):
        attnscope.io.write_npy(path, x + i)
        np.testing.assert_array_equal(attnscope.io.read_npy(path), x + i)
    for path in kinds(tmp_path / "x.npz"):
        attnscope.io.write_npz(path, {"x": x})
        np.testing.assert_array_equal(attnscope.io.read_npz(path)["x"], x)
    for path in kinds(tmp_path / "x.safetensors"):
        attnscope.io.write_safetensors(path, {"x": x}, {"k": "v"})
        tensors, metadata = attnscope.io.read_safetensors(path)
        np.testing.assert_array_equal(tensors["x"], x)
        assert metadata == {"k": "v"}
    with pytest.raises(OSError, match="missing.npy"):
        attnscope.io.read_npy(pathlib.Path(tmp_path / "missing.npy"))
    with pytest.raises(TypeError):
        attnscope.io.read_npy(3)


def test_report_and_page_take_path_like(tmp_path, rng):
    attention = np.stack([np.eye(4)[[0, 0, 1, 2]] * 0.5 + np.eye(4) * 0.5] * 2)
    path = tmp_path / "attention.npy"
    np.save(path, attention)
    expected = attnscope.analysis.head_report(str(path), basic=True)
    for source in kinds(path)[:2]:
        np.testing.assert_array_equal(attnscope.analysis.head_report(source, basic=True)["entropy"],
                                      expected["entropy"])
    for page in kinds(tmp_path / "page.html"):
        os.remove(tmp_path / "page.html") if (tmp_path / "page.html").exists() else None
        attnscope.analysis.write_html(FsPath(path), page, basic=True)
        text = (tmp_path / "page.html").read_text()
        assert text.startswith("<!DOCTYPE html>") and str(path) in text  # the page names its source


def test_models_and_tokenizers_take_path_like(data_dir):
    folder = data_dir / "gpt2-wp-mini"
    for path in kinds(folder)[:2]:
        assert attnscope.model.load_huggingface_model(path).config["n_layers"] == 4
        assert attnscope.model.load_model(path).config["architecture"] == "gpt2"
        assert attnscope.text.ByteLevelBpeTokenizer.from_folder(path).encode("Hello") == \
            attnscope.text.ByteLevelBpeTokenizer.from_folder(str(folder)).encode("Hello")
    tokenizer = attnscope.text.ByteLevelBpeTokenizer.from_vocab_and_merges(folder / "vocab.json",
                                                                           FsPath(folder / "merges.txt"))
    assert tokenizer.vocab_size() > 0
    assert attnscope.model.load_model(data_dir / "stories260K.bin").config["n_layers"] == 5

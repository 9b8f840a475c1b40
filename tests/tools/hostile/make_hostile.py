#!/usr/bin/env python3
"""Writes the hostile-input corpus of tests/tools/hostile/ (run from anywhere; needs numpy).

Every file here is an input that no command may accept, crash on, or answer with a usage dump: each must give exit
code 1 and an error naming the file (tests/tools/test_cli_hostile.cpp runs every command on every file, in the
ordinary build and under ASan + UBSan with scripts/sanitize.sh). Folders by the commands that read them:
  qk/          Q/K files: rowstats INPUT, merge
  attention/   captures and attention arrays: report INPUT
  npy/         arrays for normalize
  checkpoint/  llama2.c checkpoints: capture --checkpoint, report, rowstats --checkpoint
  config/      model folders with a bad config.json: capture / report / rowstats --model
  tokenizer/   model folders with bad tokenizer files: tokenize --model, capture --model --text
  text/        text files that are not text: tokenize / capture / report / rowstats --text-file (with the GPT-2
               fixture's tokenizer)
  merge/       JSON and CSV inputs of merge
"""
import io
import json
import os
import shutil
import struct
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(28)


def path(*parts):
    p = os.path.join(HERE, *parts)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    return p


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)


def npz_bytes(arrays):
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def npy_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def npy_header(descr, shape, fortran=False):
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    header = header.ljust(118) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()


def safetensors_bytes(header, data=b""):
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def qk(shape, dtype=np.float64):
    return {"layer0.q": rng.normal(size=shape).astype(dtype), "layer0.k": rng.normal(size=shape).astype(dtype)}


# ---- qk/: rowstats and merge ----
write("qk/empty.npz", b"")
write("qk/random_bytes.npz", b"PK" + rng.integers(0, 256, 300, dtype=np.uint8).tobytes())
write("qk/zero_rows.npz", npz_bytes(qk((2, 0, 4))))
write("qk/zero_dims.npz", npz_bytes(qk((2, 5, 0))))
write("qk/zero_heads.npz", npz_bytes(qk((0, 5, 4))))
write("qk/rank2.npz", npz_bytes(qk((5, 4))))
write("qk/rank4.npz", npz_bytes(qk((1, 2, 5, 4))))
write("qk/shape_mismatch.npz", npz_bytes({"layer0.q": np.zeros((2, 5, 4)), "layer0.k": np.zeros((2, 6, 4))}))
write("qk/int32.npz", npz_bytes({"layer0.q": np.ones((2, 5, 4), np.int32), "layer0.k": np.ones((2, 5, 4), np.int32)}))
write("qk/float16.npz", npz_bytes(qk((2, 5, 4), np.float16)))
write("qk/dtypes_differ.npz", npz_bytes({"layer0.q": np.zeros((2, 5, 4)), "layer0.k": np.zeros((2, 5, 4), np.float32)}))
nan_q = qk((2, 5, 4))
nan_q["layer0.q"][1, 3, 2] = np.nan
write("qk/nan_query.npz", npz_bytes(nan_q))
inf_k = qk((2, 5, 4))
inf_k["layer0.k"][0, 1, 0] = np.inf
write("qk/inf_key.npz", npz_bytes(inf_k))
write("qk/only_q.npz", npz_bytes({"layer0.q": np.zeros((2, 5, 4))}))
whole = npz_bytes(qk((2, 8, 4)))
write("qk/truncated.npz", whole[: len(whole) // 2])
corrupt = bytearray(whole)
corrupt[100] ^= 0xFF  # inside the first stored member's data: its CRC-32 no longer matches
write("qk/crc_mismatch.npz", bytes(corrupt))
write("qk/huge_shape.npy", npy_header("<f8", (1 << 40, 1 << 40, 8)) + b"\0" * 64)
write("qk/negative_shape.npy", npy_header("<f8", (-1, 5, 4)) + b"\0" * 64)
write("qk/object_dtype.npy", npy_bytes(np.array([{"a": 1}, None], dtype=object)))
write("qk/big_endian.npz", npz_bytes(qk((2, 5, 4), ">f8")))
write("qk/offsets_past_end.safetensors",
      safetensors_bytes({"layer0.q": {"dtype": "F32", "shape": [2, 5, 4], "data_offsets": [0, 160]},
                         "layer0.k": {"dtype": "F32", "shape": [2, 5, 4], "data_offsets": [160, 320]}}, b"\0" * 200))
write("qk/huge_header.safetensors", struct.pack("<Q", 1 << 60) + b"{}")
write("qk/header_not_json.safetensors", struct.pack("<Q", 12) + b"{not json!!}")
write("qk/overlapping.safetensors",
      safetensors_bytes({"layer0.q": {"dtype": "F32", "shape": [2, 5, 4], "data_offsets": [0, 160]},
                         "layer0.k": {"dtype": "F32", "shape": [2, 5, 4], "data_offsets": [80, 240]}}, b"\0" * 240))
write("qk/shape_bytes_disagree.safetensors",
      safetensors_bytes({"layer0.q": {"dtype": "F32", "shape": [2, 5, 4], "data_offsets": [0, 100]},
                         "layer0.k": {"dtype": "F32", "shape": [2, 5, 4], "data_offsets": [100, 260]}}, b"\0" * 260))
torch = io.BytesIO()
with zipfile.ZipFile(torch, "w") as archive:
    archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    archive.writestr("archive/version", b"3\n")
write("qk/torch_save.npz", torch.getvalue())
write("qk/text.npz", b"layer0.q = [[1, 2], [3, 4]]\n")
write("qk/layout_version_99.npz", npz_bytes({**qk((2, 5, 4)), "attnscope_capture_layout": np.array([99], np.int32)}))

# ---- attention/: report INPUT ----
def causal_attention(heads, length):
    logits = rng.normal(size=(heads, length, length))
    logits[:, np.triu_indices(length, 1)[0], np.triu_indices(length, 1)[1]] = -np.inf
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True)


a = causal_attention(2, 6)
bad = a.copy(); bad[1, 4, 2] = np.nan
write("attention/nan_weight.npz", npz_bytes({"layer0.attention": bad}))
bad = a.copy(); bad[0, 3] *= 1.5
write("attention/row_sums_1_5.npz", npz_bytes({"layer0.attention": bad}))
bad = a.copy(); bad[0, 5, 1] = -0.25; bad[0, 5, 0] += 0.25
write("attention/negative_weight.npz", npz_bytes({"layer0.attention": bad}))
write("attention/scores_shape_mismatch.npz",
      npz_bytes({"layer0.attention": a, "layer0.scores": np.zeros((2, 6, 5))}))
write("attention/values_wrong_rows.npz", npz_bytes({"layer0.attention": a, "layer0.scores": np.log(a + 1e-30),
                                                     "layer0.v": np.zeros((2, 4, 3))}))
write("attention/zero_size.npy", npy_bytes(np.zeros((2, 0, 0))))
write("attention/zero_queries.npz", npz_bytes({"layer0.attention": np.zeros((2, 0, 6))}))
write("attention/scalar.npy", npy_bytes(np.float64(1.0)))
write("attention/int32.npy", npy_bytes(np.ones((2, 3, 3), np.int32)))
write("attention/rank6.npy", npy_bytes(np.ones((1, 1, 1, 1, 2, 2)) / 2))
write("attention/layout_version_99.npz",
      npz_bytes({"layer0.attention": a, "attnscope_capture_layout": np.array([99], np.int32)}))
write("attention/truncated.npy", npy_bytes(a)[:200])
write("attention/complex.npy", npy_bytes(a.astype(np.complex128)))
write("attention/unicode.npy", npy_bytes(np.array(["a", "bc"])))

# ---- npy/: normalize ----
write("npy/nan.npy", npy_bytes(np.array([[1.0, np.nan, 0.0]])))
write("npy/plus_inf.npy", npy_bytes(np.array([[1.0, np.inf, 0.0]])))
write("npy/all_masked_row.npy", npy_bytes(np.array([[0.0, 1.0], [-np.inf, -np.inf]])))
write("npy/scalar.npy", npy_bytes(np.float64(2.0)))
write("npy/empty.npy", npy_bytes(np.zeros((3, 0))))
write("npy/object.npy", npy_bytes(np.array([1, "a"], dtype=object)))
write("npy/unicode.npy", npy_bytes(np.array(["abc"])))
write("npy/complex.npy", npy_bytes(np.array([[1 + 2j, 0j]])))
write("npy/truncated.npy", npy_bytes(np.zeros((64, 64)))[:300])
write("npy/huge_shape.npy", npy_header("<f4", (1 << 31, 1 << 31)) + b"\0" * 16)
write("npy/bad_magic.npy", b"\x93NUMPX\x01\x00" + b"\0" * 100)
write("npy/header_overflow.npy", b"\x93NUMPY\x01\x00\xff\xff" + b"{" * 20)
write("npy/header_garbage.npy", npy_header("<f8", "(3,") + b"\0" * 24)
write("npy/npz_instead.npy", npz_bytes({"x": np.zeros(3)}))

# ---- checkpoint/: llama2.c ----
def checkpoint(dim, hidden, layers, heads, kv_heads, vocab, seq, floats=0):
    return struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq) + b"\0" * (4 * floats)


write("checkpoint/header_only.bin", checkpoint(64, 172, 5, 8, 4, 512, 512))
write("checkpoint/truncated_header.bin", checkpoint(64, 172, 5, 8, 4, 512, 512)[:20])
write("checkpoint/zero_dim.bin", checkpoint(0, 172, 5, 8, 4, 512, 512, 1000))
write("checkpoint/zero_heads.bin", checkpoint(64, 172, 5, 0, 0, 512, 512, 1000))
write("checkpoint/negative_layers.bin", checkpoint(64, 172, -5, 8, 4, 512, 512, 1000))
write("checkpoint/dim_not_divisible.bin", checkpoint(65, 172, 1, 8, 4, 32, 16, 20000))
write("checkpoint/kv_heads_not_divisor.bin", checkpoint(64, 172, 1, 8, 3, 32, 16, 20000))
write("checkpoint/huge_vocab.bin", checkpoint(64, 172, 1, 8, 4, 1 << 30, 16, 1000))
write("checkpoint/huge_dims.bin", checkpoint(1 << 30, 1 << 30, 1 << 20, 8, 4, 512, 512, 10))
write("checkpoint/zero_seq_len.bin", checkpoint(8, 16, 1, 2, 2, 8, 0, 20000))
write("checkpoint/nan_weights.bin", checkpoint(8, 16, 1, 2, 2, 8, 4) +
      np.full(8 * 8 + 8 + 4 * 64 + 8 + 3 * 128 + 8 + 2 * 4 * 2, np.nan, np.float32).tobytes())

# ---- config/: model folders whose config.json is bad (no weights needed: the config is read first) ----
gpt2 = {"model_type": "gpt2", "vocab_size": 300, "n_positions": 64, "n_embd": 64, "n_layer": 2, "n_head": 4,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}


def config_folder(name, config, raw=None):
    write(f"config/{name}/config.json", raw if raw is not None else json.dumps(config).encode())
    # one tiny tensor, so that the loader gets past "no weights" to the configuration
    write(f"config/{name}/model.safetensors",
          safetensors_bytes({"wte.weight": {"dtype": "F32", "shape": [1, 1], "data_offsets": [0, 4]}}, b"\0" * 4))


config_folder("not_json", None, b"{\"model_type\": \"gpt2\", ")
config_folder("array", None, b"[1, 2, 3]")
config_folder("empty_file", None, b"")
config_folder("zero_heads", {**gpt2, "n_head": 0})
config_folder("embd_not_divisible", {**gpt2, "n_embd": 65})
config_folder("negative_layers", {**gpt2, "n_layer": -2})
config_folder("huge_positions", {**gpt2, "n_positions": 1 << 40})
config_folder("no_model_type", {k: v for k, v in gpt2.items() if k != "model_type"})
config_folder("unknown_activation", {**gpt2, "activation_function": "swish_but_not"})
config_folder("string_sizes", {**gpt2, "n_embd": "64"})
config_folder("fractional_heads", {**gpt2, "n_head": 2.5})
config_folder("no_weights", gpt2)
config_folder("llama_kv_heads", {"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
                                 "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 3,
                                 "max_position_embeddings": 16, "rms_norm_eps": 1e-6, "hidden_act": "silu"})
config_folder("nested_depth", None, b"[" * 20000 + b"]" * 20000)

# ---- tokenizer/: folders whose tokenizer files are bad ----
write("tokenizer/vocab_not_object/vocab.json", b"[\"a\", \"b\"]")
write("tokenizer/vocab_not_object/merges.txt", b"#version: 0.2\n")
write("tokenizer/vocab_negative_id/vocab.json", json.dumps({"a": -1, "b": 0}).encode())
write("tokenizer/vocab_negative_id/merges.txt", b"#version: 0.2\n")
write("tokenizer/vocab_huge_id/vocab.json", json.dumps({"a": 1 << 40, "b": 0}).encode())
write("tokenizer/vocab_huge_id/merges.txt", b"#version: 0.2\n")
write("tokenizer/merges_unknown_token/vocab.json", json.dumps({"a": 0, "b": 1}).encode())
write("tokenizer/merges_unknown_token/merges.txt", b"#version: 0.2\nx y\n")
write("tokenizer/merges_three_parts/vocab.json", json.dumps({"a": 0, "b": 1, "ab": 2}).encode())
write("tokenizer/merges_three_parts/merges.txt", b"#version: 0.2\na b c\n")
write("tokenizer/vocab_invalid_utf8/vocab.json", b"{\"a\xff\": 0}")
write("tokenizer/vocab_invalid_utf8/merges.txt", b"#version: 0.2\n")
write("tokenizer/only_vocab/vocab.json", json.dumps({"a": 0}).encode())
write("tokenizer/tokenizer_not_json/tokenizer.json", b"{\"model\": ")
write("tokenizer/tokenizer_wordpiece/tokenizer.json",
      json.dumps({"model": {"type": "WordPiece", "vocab": {"a": 0}}}).encode())
write("tokenizer/tokenizer_bad_regex/tokenizer.json", json.dumps({
    "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed[a-"}, "behavior": "Isolated", "invert": False},
    "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}).encode())
write("tokenizer/tokenizer_merges_not_list/tokenizer.json", json.dumps({
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
    "model": {"type": "BPE", "vocab": {"a": 0}, "merges": 5}}).encode())
write("tokenizer/tokenizer_duplicate_ids/tokenizer.json", json.dumps({
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}}).encode())
write("tokenizer/tokenizer_added_token_id/tokenizer.json", json.dumps({
    "added_tokens": [{"id": -7, "content": "<x>", "special": True}],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
    "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}).encode())
os.makedirs(path("tokenizer/no_files/.keep")[:-6], exist_ok=True)
write("tokenizer/no_files/README", b"a model folder without tokenizer files\n")

# ---- text/: inputs of --text-file ----
write("text/empty.txt", b"")
write("text/invalid_byte.txt", b"War and Peace\xff chapter one")
write("text/truncated_sequence.txt", b"Natasha \xe2\x80")
write("text/overlong_slash.txt", b"a\xc0\xafb")
write("text/surrogate.txt", b"x\xed\xa0\x80y")
write("text/beyond_unicode.txt", b"\xf4\x90\x80\x80")
write("text/lone_continuation.txt", b"\x80\x80\x80")
write("text/utf16.txt", "Pierre".encode("utf-16"))

# ---- merge/: JSON and CSV ----
write("merge/not_json.json", b"{\"heads\": [")
write("merge/empty.csv", b"")
write("merge/runs_not_array.json", json.dumps({"columns": ["entropy"], "heads": [], "runs": 3}).encode())
print("hostile corpus written to", HERE)

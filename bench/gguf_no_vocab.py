#!/usr/bin/python3
"""Copies a GGUF file, adding tokenizer.ggml.model = "no_vocab" (and llama.vocab_size from token_embd when missing),
so that llama.cpp loads a model written without a tokenizer (the test fixtures of tests/fixtures/gguf/); tensors are
copied byte for byte. For the logits check of docs/performance.md (llama.cpp against attnscope's --matmul modes).

    bench/gguf_no_vocab.py IN.gguf OUT.gguf
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
import gguf_format as g  # noqa: E402
from make_matmul_fixtures import read_gguf_raw  # noqa: E402


def main():
    source, target = sys.argv[1], sys.argv[2]
    metadata, tensors, alignment = read_gguf_raw(source)
    keys = {key: v for key, _, v in metadata}
    arch = keys["general.architecture"]
    metadata.append(("tokenizer.ggml.model", g.STRING, "no_vocab"))
    if arch + ".vocab_size" not in keys:
        vocab = [shape[0] for name, shape, _, _ in tensors if name == "token_embd.weight"][0]
        metadata.append((arch + ".vocab_size", g.UINT32, vocab))
    metadata = [m for m in metadata if m[0] != "general.alignment"]
    with open(target, "wb") as out:
        out.write(g.gguf_bytes(metadata, tensors, alignment=alignment))


if __name__ == "__main__":
    main()

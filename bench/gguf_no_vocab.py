#!/usr/bin/python3
"""Copies a GGUF file, adding tokenizer.ggml.model = "no_vocab" (and llama.vocab_size from token_embd when missing),
so that llama.cpp loads a model written without a tokenizer (the test fixtures of tests/fixtures/gguf/); tensors are
copied byte for byte. For the logits check of docs/performance.md (llama.cpp against attnscope's --matmul modes).

    bench/gguf_no_vocab.py IN.gguf OUT.gguf
"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
import gguf_format as g  # noqa: E402


def main():
    source, target = sys.argv[1], sys.argv[2]
    data = open(source, "rb").read()
    at = 4

    def take(fmt):
        nonlocal at
        value = struct.unpack_from(fmt, data, at)[0]
        at += struct.calcsize(fmt)
        return value

    def string():
        nonlocal at
        n = take("<Q")
        text = data[at:at + n].decode("utf-8")
        at += n
        return text

    def value(kind):
        if kind == g.STRING:
            return string()
        if kind == g.ARRAY:
            element, count = take("<I"), take("<Q")
            return (element, [value(element) for _ in range(count)])
        return take(g.SCALAR_FORMATS[kind])

    take("<I")
    n_tensors, n_kv = take("<Q"), take("<Q")
    metadata = []
    for _ in range(n_kv):
        key = string()
        kind = take("<I")
        metadata.append((key, kind, value(kind)))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("<Q") for _ in range(take("<I"))]
        infos.append((name, dims, take("<I"), take("<Q")))
    keys = {key: v for key, _, v in metadata}
    alignment = keys.get("general.alignment", 32)
    start = (at + alignment - 1) // alignment * alignment
    names = {number: name for name, (number, _, _) in g.GGML_TYPES.items()}
    tensors = []
    for name, dims, type_number, offset in infos:
        _, block, size = g.GGML_TYPES[names[type_number]]
        count = 1
        for d in dims:
            count *= d
        tensors.append((name, tuple(reversed(dims)), names[type_number],
                        data[start + offset:start + offset + count // block * size]))
    arch = keys["general.architecture"]
    metadata.append(("tokenizer.ggml.model", g.STRING, "no_vocab"))
    if arch + ".vocab_size" not in keys:
        vocab = [t[1][0] for t in tensors if t[0] == "token_embd.weight"][0]
        metadata.append((arch + ".vocab_size", g.UINT32, vocab))
    metadata = [m for m in metadata if m[0] != "general.alignment"]
    with open(target, "wb") as out:
        out.write(g.gguf_bytes(metadata, tensors, alignment=alignment))


if __name__ == "__main__":
    main()

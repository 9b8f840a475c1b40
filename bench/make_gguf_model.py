#!/usr/bin/python3
"""Writes a GGUF llama model of random weights with the shapes of a real model, quantized as llama.cpp's Q4_K_M
mostly is (weight matrices Q4_K, output.weight Q6_K, norms F32), for the memory measurement of docs/performance.md
(never for the tests).

Default shapes are Llama-3-8B's: 32 layers, hidden 4096, 32 heads, 8 key/value heads, MLP 14336, vocabulary 128256
(about 4.6 GB). As bench/make_llama_folder.py does, one pool of blocks is drawn (N(0, 0.02²) values quantized by
tests/fixtures/gguf_format.py's Q4_K and Q6_K quantizers) and every tensor is that pool repeated from its own random
block offset (each block is a valid quantization of normal values; blocks are not independent across tensors).
Needs numpy. Usage:

    bench/make_gguf_model.py FILE.gguf [--layers N] [--seed S]
"""
import argparse
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
import gguf_format as g  # noqa: E402

POOL_BLOCKS = 1 << 14


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args()
    d, f, v, heads, kv_heads = 4096, 14336, 128256, 32, 8
    head = d // heads
    kv = head * kv_heads
    rng = np.random.default_rng(args.seed)
    pools = {}
    for t in ("Q4_K", "Q6_K"):
        x = (rng.standard_normal((POOL_BLOCKS, 256)) * 0.02).astype(np.float32)
        pools[t] = np.frombuffer(g.quantize(x, t), dtype=np.uint8).reshape(POOL_BLOCKS, -1)

    def tiled(type_name, shape):
        blocks = shape[0] * shape[1] // 256
        start = int(rng.integers(0, POOL_BLOCKS))
        index = (start + np.arange(blocks)) % POOL_BLOCKS
        return pools[type_name][index].tobytes()

    ones = np.ones(d, dtype=np.float32).tobytes()
    tensors = [("token_embd.weight", (v, d), "Q4_K", None)]
    for layer in range(args.layers):
        at = "blk.%d." % layer
        tensors += [(at + "attn_norm.weight", (d,), "F32", ones), (at + "attn_q.weight", (d, d), "Q4_K", None),
                    (at + "attn_k.weight", (kv, d), "Q4_K", None), (at + "attn_v.weight", (kv, d), "Q4_K", None),
                    (at + "attn_output.weight", (d, d), "Q4_K", None), (at + "ffn_norm.weight", (d,), "F32", ones),
                    (at + "ffn_gate.weight", (f, d), "Q4_K", None), (at + "ffn_up.weight", (f, d), "Q4_K", None),
                    (at + "ffn_down.weight", (d, f), "Q4_K", None)]
    tensors += [("output_norm.weight", (d,), "F32", ones), ("output.weight", (v, d), "Q6_K", None)]
    metadata = [("general.architecture", g.STRING, "llama"), ("general.name", g.STRING, "random Llama-3-8B shapes"),
                ("llama.context_length", g.UINT32, 8192), ("llama.embedding_length", g.UINT32, d),
                ("llama.block_count", g.UINT32, args.layers), ("llama.feed_forward_length", g.UINT32, f),
                ("llama.attention.head_count", g.UINT32, heads), ("llama.attention.head_count_kv", g.UINT32, kv_heads),
                ("llama.attention.layer_norm_rms_epsilon", g.FLOAT32, 1e-5),
                ("llama.rope.freq_base", g.FLOAT32, 500000.0), ("llama.vocab_size", g.UINT32, v)]
    # header and tensor infos first (offsets from the sizes), then the data, one tensor at a time
    alignment = 32
    header = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    for key, kind, value in metadata:
        header += g.gguf_string(key) + struct.pack("<I", kind) + g.gguf_value(kind, value)
    offset, offsets = 0, []
    for name, shape, type_name, _ in tensors:
        _, elements, size = g.GGML_TYPES[type_name]
        count = int(np.prod(shape))
        dims = list(reversed(shape))
        header += g.gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        header += struct.pack("<IQ", g.GGML_TYPES[type_name][0], offset)
        offsets.append(offset)
        offset += (count // elements * size + alignment - 1) // alignment * alignment
    header += b"\0" * ((-len(header)) % alignment)
    with open(args.path, "wb") as out:
        out.write(header)
        start = len(header)
        for (name, shape, type_name, data), at in zip(tensors, offsets):
            out.write(b"\0" * (start + at - out.tell()))
            out.write(data if data is not None else tiled(type_name, shape))
    print("%s: %.2f GB, %d layers" % (args.path, os.path.getsize(args.path) / 1e9, args.layers))


if __name__ == "__main__":
    main()

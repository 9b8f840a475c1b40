#!/usr/bin/python3
"""Writes a GGUF llama model of random weights with the shapes of a real model, quantized as llama.cpp's Q4_K_M
mostly is (weight matrices Q4_K, output.weight Q6_K, norms F32), for the memory measurement of docs/performance.md
(never for the tests).

Default shapes are Llama-3-8B's: 32 layers, hidden 4096, 32 heads, 8 key/value heads, MLP 14336, vocabulary 128256
(about 4.6 GB). As bench/make_llama_folder.py does, one pool of blocks is drawn (N(0, 0.02²) values quantized by
tests/fixtures/gguf_format.py's Q4_K and Q6_K quantizers) and every tensor is that pool repeated from its own random
block offset (each block is a valid quantization of normal values; blocks are not independent across tensors).
Needs numpy. Usage:

    bench/make_gguf_model.py FILE.gguf [--layers N] [--seed S] [--shape 8b|1b] [--type Q4_K_M|Q8_0]

--shape 1b gives Llama-3.2-1B's shapes (16 layers, hidden 2048, 32 heads, 8 key/value heads, MLP 8192, vocabulary
128256, output head tied to token_embd), for the side-by-side with llama.cpp (bench/llamacpp_side_by_side.sh).
--shape gpt-oss-20b gives gpt-oss-20b's shapes as llama.cpp's MXFP4_MOE files hold them (architecture gpt-oss: 24
layers, hidden 2880, 64 query heads and 8 key/value heads of 64, 32 experts of width 2880 with 4 per token, learned
sinks, sliding window 128 on even layers, yarn factor 32 from 4096 positions, vocabulary 201088): the experts
ffn_{gate,up,down}_exps MXFP4 (random E2M1 codes with scale bytes 119-121, about 0.02 in size), the attention and
embedding matrices F16 (N(0, 0.02²)), norms, biases, sinks and the router F32; about 13 GB. --type is ignored.
--type Q4_K_M follows llama.cpp's Q4_K_M choice (llama_tensor_get_type in src/llama-quant.cpp): Q4_K matrices,
(with --shape 1b) attn_v and ffn_down Q6_K in the layers where use_more_bits holds (the first and last eighth and
every third layer between), the output head (token_embd when tied) Q6_K; --type Q8_0 makes every matrix Q8_0. The 1b file says
tokenizer.ggml.model = "no_vocab" (llama.cpp then reads the vocabulary size from llama.vocab_size).
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
    parser.add_argument("--shape", choices=["8b", "1b", "gpt-oss-20b"], default="8b")
    parser.add_argument("--type", choices=["Q4_K_M", "Q8_0"], default="Q4_K_M")
    args = parser.parse_args()
    if args.shape == "gpt-oss-20b":
        write_gpt_oss(args)
        return
    if args.shape == "1b":
        d, f, v, heads, kv_heads, tied, name = 2048, 8192, 128256, 32, 8, True, "random Llama-3.2-1B shapes"
    else:
        d, f, v, heads, kv_heads, tied, name = 4096, 14336, 128256, 32, 8, False, "random Llama-3-8B shapes"
    head = d // heads
    kv = head * kv_heads
    rng = np.random.default_rng(args.seed)
    pools = {}
    for t in (("Q8_0",) if args.type == "Q8_0" else ("Q4_K", "Q6_K")):
        x = (rng.standard_normal((POOL_BLOCKS, 256)) * 0.02).astype(np.float32)
        pools[t] = np.frombuffer(g.quantize(x, t), dtype=np.uint8).reshape(-1, g.GGML_TYPES[t][2])

    def tiled(type_name, shape):
        blocks = shape[0] * shape[1] // g.GGML_TYPES[type_name][1]
        start = int(rng.integers(0, len(pools[type_name])))
        index = (start + np.arange(blocks)) % len(pools[type_name])
        return pools[type_name][index].tobytes()

    def more_bits(layer):  # llama-quant.cpp use_more_bits
        return layer < args.layers // 8 or layer >= 7 * args.layers // 8 or (layer - args.layers // 8) % 3 == 2

    matrix = "Q8_0" if args.type == "Q8_0" else "Q4_K"
    head_type = "Q8_0" if args.type == "Q8_0" else "Q6_K"
    ones = np.ones(d, dtype=np.float32).tobytes()
    tensors = [("token_embd.weight", (v, d), head_type if tied else matrix, None)]
    for layer in range(args.layers):
        at = "blk.%d." % layer
        more = head_type if args.shape == "1b" and args.type == "Q4_K_M" and more_bits(layer) else matrix
        tensors += [(at + "attn_norm.weight", (d,), "F32", ones), (at + "attn_q.weight", (d, d), matrix, None),
                    (at + "attn_k.weight", (kv, d), matrix, None), (at + "attn_v.weight", (kv, d), more, None),
                    (at + "attn_output.weight", (d, d), matrix, None), (at + "ffn_norm.weight", (d,), "F32", ones),
                    (at + "ffn_gate.weight", (f, d), matrix, None), (at + "ffn_up.weight", (f, d), matrix, None),
                    (at + "ffn_down.weight", (d, f), more, None)]
    tensors += [("output_norm.weight", (d,), "F32", ones)]
    if not tied:
        tensors += [("output.weight", (v, d), head_type, None)]
    metadata = [("general.architecture", g.STRING, "llama"), ("general.name", g.STRING, name),
                ("llama.context_length", g.UINT32, 8192), ("llama.embedding_length", g.UINT32, d),
                ("llama.block_count", g.UINT32, args.layers), ("llama.feed_forward_length", g.UINT32, f),
                ("llama.attention.head_count", g.UINT32, heads), ("llama.attention.head_count_kv", g.UINT32, kv_heads),
                ("llama.attention.layer_norm_rms_epsilon", g.FLOAT32, 1e-5),
                ("llama.rope.freq_base", g.FLOAT32, 500000.0), ("llama.vocab_size", g.UINT32, v)]
    if args.shape == "1b":
        metadata.append(("tokenizer.ggml.model", g.STRING, "no_vocab"))
    def write_data(out, name, shape, type_name, data, size):
        out.write(data if data is not None else tiled(type_name, shape))

    write_gguf(args.path, metadata, tensors, write_data)
    print("%s: %.2f GB, %d layers" % (args.path, os.path.getsize(args.path) / 1e9, args.layers))


def write_gguf(path, metadata, tensors, write_data):
    """Header and tensor infos first (offsets from the sizes), then the data, one tensor at a time:
    write_data(out, name, shape, type_name, data, size) writes tensor `name` of `size` bytes."""
    alignment = 32
    header = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    for key, kind, value in metadata:
        header += g.gguf_string(key) + struct.pack("<I", kind) + g.gguf_value(kind, value)
    offset, offsets, sizes = 0, [], []
    for name, shape, type_name, _ in tensors:
        _, elements, size = g.GGML_TYPES[type_name]
        count = int(np.prod(shape))
        dims = list(reversed(shape))
        header += g.gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        header += struct.pack("<IQ", g.GGML_TYPES[type_name][0], offset)
        offsets.append(offset)
        sizes.append(count // elements * size)
        offset += (count // elements * size + alignment - 1) // alignment * alignment
    header += b"\0" * ((-len(header)) % alignment)
    with open(path, "wb") as out:
        out.write(header)
        start = len(header)
        for (name, shape, type_name, data), at, size in zip(tensors, offsets, sizes):
            out.write(b"\0" * (start + at - out.tell()))
            write_data(out, name, shape, type_name, data, size)


def write_gpt_oss(args):
    layers = args.layers if args.layers != 32 else 24   # the parser's default is the 8B's 32
    d, f, v, heads, kv_heads, head, experts, used = 2880, 2880, 201088, 64, 8, 64, 32, 4
    rng = np.random.default_rng(args.seed)
    pool_f16 = (rng.standard_normal(1 << 22) * 0.02).astype("<f2").tobytes()
    codes = rng.integers(0, 256, size=(POOL_BLOCKS, 16), dtype=np.uint8)
    scales = rng.integers(119, 122, size=(POOL_BLOCKS, 1), dtype=np.uint8)
    pool_mxfp4 = np.concatenate((scales, codes), axis=1).tobytes()   # block_mxfp4: e8m0 scale, then 16 code bytes

    def f32(a):
        return np.ascontiguousarray(a, dtype="<f4").tobytes()

    ones, q = np.ones(d), heads * head
    tensors = [("token_embd.weight", (v, d), "F16", None), ("output_norm.weight", (d,), "F32", f32(ones)),
               ("output.weight", (v, d), "F16", None)]
    for layer in range(layers):
        at = "blk.%d." % layer
        small = lambda *shape: f32(rng.standard_normal(shape) * 0.02)   # noqa: E731
        tensors += [(at + "attn_norm.weight", (d,), "F32", f32(ones)),
                    (at + "post_attention_norm.weight", (d,), "F32", f32(ones)),
                    (at + "attn_q.weight", (q, d), "F16", None), (at + "attn_q.bias", (q,), "F32", small(q)),
                    (at + "attn_k.weight", (kv_heads * head, d), "F16", None),
                    (at + "attn_k.bias", (kv_heads * head,), "F32", small(kv_heads * head)),
                    (at + "attn_v.weight", (kv_heads * head, d), "F16", None),
                    (at + "attn_v.bias", (kv_heads * head,), "F32", small(kv_heads * head)),
                    (at + "attn_output.weight", (d, q), "F16", None), (at + "attn_output.bias", (d,), "F32", small(d)),
                    (at + "attn_sinks.weight", (heads,), "F32", f32(rng.standard_normal(heads))),
                    (at + "ffn_gate_inp.weight", (experts, d), "F32", small(experts, d)),
                    (at + "ffn_gate_inp.bias", (experts,), "F32", small(experts)),
                    (at + "ffn_gate_exps.weight", (experts, f, d), "MXFP4", None),
                    (at + "ffn_up_exps.weight", (experts, f, d), "MXFP4", None),
                    (at + "ffn_down_exps.weight", (experts, d, f), "MXFP4", None),
                    (at + "ffn_gate_exps.bias", (experts, f), "F32", small(experts, f)),
                    (at + "ffn_up_exps.bias", (experts, f), "F32", small(experts, f)),
                    (at + "ffn_down_exps.bias", (experts, d), "F32", small(experts, d))]
    arch = "gpt-oss"
    metadata = [("general.architecture", g.STRING, arch), ("general.name", g.STRING, "random gpt-oss-20b shapes"),
                ("general.file_type", g.UINT32, 38), (arch + ".rope.scaling.type", g.STRING, "yarn")]
    for key, value in (("block_count", layers), ("context_length", 131072), ("embedding_length", d),
                       ("feed_forward_length", f), ("attention.head_count", heads),
                       ("attention.head_count_kv", kv_heads), ("expert_count", experts), ("expert_used_count", used),
                       ("attention.key_length", head), ("attention.value_length", head),
                       ("attention.sliding_window", 128), ("expert_feed_forward_length", f),
                       ("rope.scaling.original_context_length", 4096), ("vocab_size", v)):
        metadata.append((arch + "." + key, g.UINT32, value))
    for key, value in (("rope.freq_base", 150000.0), ("attention.layer_norm_rms_epsilon", 1e-5),
                       ("rope.scaling.factor", 32.0), ("rope.scaling.yarn_beta_fast", 32.0),
                       ("rope.scaling.yarn_beta_slow", 1.0)):
        metadata.append((arch + "." + key, g.FLOAT32, value))
    metadata.append(("tokenizer.ggml.model", g.STRING, "no_vocab"))

    def write_data(out, name, shape, type_name, data, size):
        if data is not None:
            out.write(data)
            return
        pool = pool_f16 if type_name == "F16" else pool_mxfp4
        block = g.GGML_TYPES[type_name][2]
        position = int(rng.integers(0, len(pool) // block)) * block   # the pool repeated from a random block
        while size > 0:
            piece = pool[position:position + size]
            out.write(piece)
            size -= len(piece)
            position = 0

    write_gguf(args.path, metadata, tensors, write_data)
    print("%s: %.2f GB, %d layers" % (args.path, os.path.getsize(args.path) / 1e9, layers))


if __name__ == "__main__":
    main()

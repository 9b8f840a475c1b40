#!/usr/bin/python3
"""Writes a Hugging Face Llama folder of random BF16 weights with the shapes of a real model, for the memory and
speed measurements of docs/performance.md (never for the tests).

Default shapes are Llama-3-8B's: 32 layers, hidden 4096, 32 heads, 8 key/value heads, MLP 14336, vocabulary 128256
(16.1 GB in 4 shards, like the released checkpoint). Weights are N(0, 0.02²) rounded to bfloat16 (nearest even),
norm weights 1. Drawing 8 billion normals takes about an hour on a busy 2-core machine, so by default one block of
2^26 + 1 random bfloat16 values is drawn and every weight tensor is that block repeated from its own random offset
(the values of each row are still N(0, 0.02²) samples, only not independent across tensors); --independent draws
every value. Needs numpy. Usage:

    bench/make_llama_folder.py DIR [--layers N] [--shards N] [--seed S] [--independent]
                               [--hidden D] [--heads H] [--kv-heads K] [--mlp F] [--vocab V] [--positions P]

The shape options make smaller Llama-shaped folders (e.g. --layers 1 --hidden 256 --heads 4 --kv-heads 4 --mlp 512
--vocab 1000 --positions 16384: head size 64, for the streaming forward's time per (query, key) pair at long L).
"""
import argparse
import json
import os
import struct

import numpy as np

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def tensors(config):
    """(name, shape, kind) in checkpoint order; kind is 'normal' or 'ones'."""
    d, f, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    head = d // config["num_attention_heads"]
    kv = head * config["num_key_value_heads"]
    yield "model.embed_tokens.weight", (v, d), "normal"
    for layer in range(config["num_hidden_layers"]):
        at = f"model.layers.{layer}."
        yield at + "input_layernorm.weight", (d,), "ones"
        yield at + "self_attn.q_proj.weight", (d, d), "normal"
        yield at + "self_attn.k_proj.weight", (kv, d), "normal"
        yield at + "self_attn.v_proj.weight", (kv, d), "normal"
        yield at + "self_attn.o_proj.weight", (d, d), "normal"
        yield at + "post_attention_layernorm.weight", (d,), "ones"
        yield at + "mlp.gate_proj.weight", (f, d), "normal"
        yield at + "mlp.up_proj.weight", (f, d), "normal"
        yield at + "mlp.down_proj.weight", (d, f), "normal"
    yield "model.norm.weight", (d,), "ones"
    yield "lm_head.weight", (v, d), "normal"


def bfloat16_bytes(values):
    """float32 array -> bfloat16 bytes, rounded to nearest even."""
    bits = values.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return rounded.astype("<u2").tobytes()


def write_shard(path, entries, rng, block):
    header, offset = {}, 0
    for name, shape, _ in entries:
        size = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    chunk = 1 << 26
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for name, shape, kind in entries:
            count = int(np.prod(shape))
            if kind == "ones":
                out.write(bfloat16_bytes(np.ones(count, dtype=np.float32)))
                continue
            if block is not None:  # the shared block, repeated from a random offset
                offset = int(rng.integers(len(block)))
                for start in range(0, count, chunk):
                    size = min(chunk, count - start)
                    index = (offset + start) % len(block)
                    piece = block[index:index + size]
                    if len(piece) < size:
                        piece = np.concatenate([piece, block[:size - len(piece)]])
                    out.write(piece.tobytes())
                continue
            for start in range(0, count, chunk):
                values = rng.standard_normal(min(chunk, count - start), dtype=np.float32)
                values *= np.float32(0.02)
                out.write(bfloat16_bytes(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--layers", type=int, default=CONFIG["num_hidden_layers"])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--independent", action="store_true", help="draw every weight (slow)")
    parser.add_argument("--hidden", type=int, default=CONFIG["hidden_size"], help="hidden size")
    parser.add_argument("--heads", type=int, default=CONFIG["num_attention_heads"], help="attention heads")
    parser.add_argument("--kv-heads", type=int, default=CONFIG["num_key_value_heads"], help="key/value heads")
    parser.add_argument("--mlp", type=int, default=CONFIG["intermediate_size"], help="MLP (intermediate) size")
    parser.add_argument("--vocab", type=int, default=CONFIG["vocab_size"], help="vocabulary size")
    parser.add_argument("--positions", type=int, default=CONFIG["max_position_embeddings"],
                        help="trained positions (max_position_embeddings)")
    args = parser.parse_args()
    if args.hidden % args.heads or args.heads % args.kv_heads:
        parser.error("--hidden must be a multiple of --heads, and --heads of --kv-heads")
    config = dict(CONFIG, num_hidden_layers=args.layers, hidden_size=args.hidden, num_attention_heads=args.heads,
                  num_key_value_heads=args.kv_heads, intermediate_size=args.mlp, vocab_size=args.vocab,
                  max_position_embeddings=args.positions)
    os.makedirs(args.folder, exist_ok=True)
    with open(os.path.join(args.folder, "config.json"), "w") as out:
        json.dump(config, out, indent=2)
    entries = list(tensors(config))
    total = sum(2 * int(np.prod(shape)) for _, shape, _ in entries)
    shards, current, size = [], [], 0
    for entry in entries:  # cut into shards of about total / shards bytes, in checkpoint order
        current.append(entry)
        size += 2 * int(np.prod(entry[1]))
        if size >= total / args.shards and len(shards) < args.shards - 1:
            shards.append(current)
            current, size = [], 0
    shards.append(current)
    rng = np.random.default_rng(args.seed)
    block = None
    if not args.independent:
        values = rng.standard_normal((1 << 26) + 1, dtype=np.float32) * np.float32(0.02)
        block = np.frombuffer(bfloat16_bytes(values), dtype="<u2")
    weight_map = {}
    for i, shard in enumerate(shards):
        file_name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_shard(os.path.join(args.folder, file_name), shard, rng, block)
        weight_map.update({name: file_name for name, _, _ in shard})
        print(f"wrote {file_name}", flush=True)
    with open(os.path.join(args.folder, "model.safetensors.index.json"), "w") as out:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, out, indent=1)
    print(f"{args.folder}: {len(entries)} tensors, {total / 1e9:.2f} GB", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""GPT-2-small side by side: makes a random-weight GPT-2-small Hugging Face folder and times PyTorch's eager
float32 forward over it, the peer of bench/bench_hf_forward.cpp (run both with bench/gpt2_side_by_side.sh).

  gpt2_small_peer.py make DIR              writes DIR/config.json + DIR/model.safetensors (float32, ~500 MB):
                                           12 layers, 12 heads, 768 wide, 1024 positions, vocabulary 50257,
                                           weights N(0, 0.02) as GPT-2's initializer, LayerNorm weights 1, biases 0
  gpt2_small_peer.py time DIR [--tokens L] [--repetitions R]
                                           single-threaded eager forward over L tokens (default 1024) keeping every
                                           layer's scores and attention (what `attnscope capture` keeps), prints
                                           JSON: best and median seconds, peak RSS

The forward is the plain-PyTorch GPT-2 of tests/fixtures/make_hf_fixtures.py (layer_norm, gelu_new,
causal_attention, split_heads; the fixtures' independent reference), run in float32. The token ids are
(7919 · p) mod vocab for position p, the same as the C++ benchmark. Needs Debian's python3-torch; install
libopenblas0-pthread first, or torch's matrix products run at the reference BLAS's speed.
"""
import json
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from make_hf_fixtures import causal_attention, gelu_new, layer_norm, safetensors_bytes, split_heads  # noqa: E402

LAYERS, HEADS, WIDTH, POSITIONS, VOCAB = 12, 12, 768, 1024, 50257


def make(folder):
    generator = torch.Generator().manual_seed(124)
    normal = lambda *shape: 0.02 * torch.randn(*shape, generator=generator, dtype=torch.float32)  # noqa: E731
    tensors = [("wte.weight", normal(VOCAB, WIDTH)), ("wpe.weight", normal(POSITIONS, WIDTH))]
    for i in range(LAYERS):
        p = "h.%d." % i
        tensors += [(p + "ln_1.weight", torch.ones(WIDTH)), (p + "ln_1.bias", torch.zeros(WIDTH)),
                    (p + "attn.c_attn.weight", normal(WIDTH, 3 * WIDTH)), (p + "attn.c_attn.bias", torch.zeros(3 * WIDTH)),
                    (p + "attn.c_proj.weight", normal(WIDTH, WIDTH)), (p + "attn.c_proj.bias", torch.zeros(WIDTH)),
                    (p + "ln_2.weight", torch.ones(WIDTH)), (p + "ln_2.bias", torch.zeros(WIDTH)),
                    (p + "mlp.c_fc.weight", normal(WIDTH, 4 * WIDTH)), (p + "mlp.c_fc.bias", torch.zeros(4 * WIDTH)),
                    (p + "mlp.c_proj.weight", normal(4 * WIDTH, WIDTH)), (p + "mlp.c_proj.bias", torch.zeros(WIDTH))]
    tensors += [("ln_f.weight", torch.ones(WIDTH)), ("ln_f.bias", torch.zeros(WIDTH))]
    os.makedirs(folder, exist_ok=True)
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": VOCAB, "n_positions": POSITIONS,
              "n_ctx": POSITIONS, "n_embd": WIDTH, "n_layer": LAYERS, "n_head": HEADS, "n_inner": None,
              "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(safetensors_bytes(tensors))


def load(folder):
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        data = f.read()
    header_length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + header_length])
    buffer = memoryview(data)[8 + header_length:]
    weights = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        weights[name] = torch.frombuffer(buffer[begin:end], dtype=torch.float32).reshape(info["shape"]).clone()
    return weights


def forward(w, tokens):
    """Eager GPT-2 forward in float32; returns logits and every layer's scores and attention (kept, as a capture)."""
    length = tokens.shape[0]
    h = w["wte.weight"][tokens] + w["wpe.weight"][torch.arange(length)]
    kept = []
    for i in range(LAYERS):
        p = "h.%d." % i
        qkv = layer_norm(h, w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5) @ w[p + "attn.c_attn.weight"] \
            + w[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(WIDTH, dim=1)
        q, k, v = split_heads(q, HEADS), split_heads(k, HEADS), split_heads(v, HEADS)
        output, probabilities = causal_attention(q, k, v)
        scores = q @ k.transpose(1, 2) / (WIDTH // HEADS) ** 0.5  # kept like the capture's layer{i}.scores
        kept.append((q, k, v, scores, probabilities))
        h = h + output @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        inner = gelu_new(layer_norm(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5) @ w[p + "mlp.c_fc.weight"]
                         + w[p + "mlp.c_fc.bias"])
        h = h + inner @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    logits = layer_norm(h, w["ln_f.weight"], w["ln_f.bias"], 1e-5) @ w["wte.weight"].T
    return logits, kept


def time_forward(folder, length, repetitions):
    torch.set_num_threads(1)
    weights = load(folder)
    tokens = torch.tensor([(7919 * p) % VOCAB for p in range(length)], dtype=torch.long)
    seconds = []
    with torch.no_grad():
        for _ in range(repetitions):
            start = time.perf_counter()
            logits, kept = forward(weights, tokens)
            seconds.append(time.perf_counter() - start)
            del logits, kept
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peer": "pytorch-eager-float32", "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "tokens": length, "best_s": min(seconds), "median_s": statistics.median(seconds),
                      "peak_rss_mb": peak_kb / 1024.0}))


def main(argv):
    if len(argv) >= 3 and argv[1] == "make":
        make(argv[2])
    elif len(argv) >= 3 and argv[1] == "time":
        length = int(argv[argv.index("--tokens") + 1]) if "--tokens" in argv else 1024
        repetitions = int(argv[argv.index("--repetitions") + 1]) if "--repetitions" in argv else 3
        time_forward(argv[2], length, repetitions)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Get attention out of a plain PyTorch transformer and save it for `attnscope report`.

A tiny causal transformer (token embedding, learned positions, pre-LayerNorm blocks of multi-head self-attention and
an MLP) with seeded random weights stands in for your model. Its attention module computes the attention explicitly
and, while `record` is on, keeps for every head
  - the scaled scores q.k/sqrt(d_head) with -inf at masked (future) keys   -> layer{i}.scores  [heads, L, L]
  - the attention probabilities softmax(scores)                            -> layer{i}.attention [heads, L, L]
  - the values v                                                           -> layer{i}.v  [heads, L, d_head]
of batch element 0. They are saved with np.savez under the names `attnscope report` reads (docs/guide.md).
To use your own model, record the same three tensors in its attention module (see docs/guide.md).

Usage: /usr/bin/python3 scripts/export_attention_torch.py --out attention.npz [--layers 2] [--heads 4]
       [--length 64] [--width 64] [--seed 0]
then:  attnscope report attention.npz
Needs torch and numpy."""
import argparse
import math

import numpy as np
import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        assert width % heads == 0, "width must be a multiple of heads"
        self.heads, self.head_width = heads, width // heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.record = False
        self.recorded = {}

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=-1)
        # [batch, length, width] -> [batch, heads, length, head_width]
        q, k, v = (t.view(batch, length, self.heads, self.head_width).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_width)
        future = torch.triu(torch.ones(length, length, dtype=torch.bool, device=x.device), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
        attention = torch.softmax(scores, dim=-1)
        if self.record:  # batch element 0, as float32 numpy arrays
            self.recorded = {name: t[0].detach().cpu().float().numpy()
                             for name, t in (("scores", scores), ("attention", attention), ("v", v))}
        mixed = (attention @ v).transpose(1, 2).reshape(batch, length, width)
        return self.out(mixed)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = SelfAttention(width, heads)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    def __init__(self, vocab, width, heads, layers, max_length):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Embedding(max_length, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def export_attention(model, tokens, path):
    """Runs the model once with recording on and saves layer{i}.attention, .scores and .v with np.savez."""
    for block in model.blocks:
        block.attention.record = True
    with torch.no_grad():
        model(tokens)
    arrays = {}
    for i, block in enumerate(model.blocks):
        for name, array in block.attention.recorded.items():
            arrays["layer%d.%s" % (i, name)] = array
        block.attention.record = False
    np.savez(path, **arrays)
    return arrays


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="the .npz file to write")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--length", type=int, default=64, help="sequence length L")
    parser.add_argument("--width", type=int, default=64, help="model width (a multiple of --heads)")
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    model = TinyTransformer(args.vocab, args.width, args.heads, args.layers, args.length).eval()
    tokens = torch.randint(0, args.vocab, (1, args.length))
    arrays = export_attention(model, tokens, args.out)
    print("wrote %s: %d arrays (%s)" % (args.out, len(arrays), ", ".join(
        "%s %s" % (name, list(array.shape)) for name, array in list(arrays.items())[:3])) + ", ...")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Notebook-style analysis of attention heads with attnscope from Python.

Gets the attention of every head of a model, then computes per head:
  - the mean row entropy (attnscope.row_entropy),
  - the sink/content split (attnscope.composition.channel_summary: sink mass, content entropy, sink share of H),
  - the exact Jacobian norms ||J||_2 of the softmax rows (attnscope.jacobian_spectral_norm, O(n) per row),
  - a separability curve N_s/N against N (attnscope.capacity.separability_rows, Alg. 4 of arXiv:2508.17821).

Sources of attention:
  --source stories   stories260K (llama2.c) run by attnscope.model on its own greedy text (default when the data
                     folder has stories260K.bin);
  --source torch     a random multi-head attention layer built in PyTorch (q, k, v of random inputs; numpy when
                     torch is not importable).

It plots with matplotlib when available (unless --no-plot) and always prints a table.
Run from a build:  PYTHONPATH=build/python /usr/bin/python3 examples/python/analyse_attention.py
"""
import argparse
import os
import pathlib
import sys

import numpy as np

import attnscope


def stories_heads(data_dir, length):
    """(attention, scores, values) of every layer and head of stories260K on its greedy continuation of BOS."""
    model = attnscope.model.load_model(str(data_dir / "stories260K.bin"))
    tokens = model.generate_greedy([1], length - 1)
    capture = model.capture(tokens, ["scores", "attention", "v"])
    heads = []
    for layer in range(model.config["n_layers"]):
        for head in range(model.config["n_heads"]):
            heads.append((f"L{layer}H{head}", capture[f"layer{layer}.attention"][head],
                          capture[f"layer{layer}.scores"][head], capture[f"layer{layer}.v"][head]))
    return heads


def numpy_heads(length, seed=0, n_heads=4, model_dim=64):
    """The same random layer in numpy, for machines without PyTorch."""
    rng = np.random.default_rng(seed)
    head_dim = model_dim // n_heads
    x = rng.standard_normal((length, model_dim), dtype=np.float32)
    x[0] *= 4
    q, k, v = (x @ (rng.standard_normal((model_dim, model_dim), dtype=np.float32) / model_dim ** 0.5) for _ in range(3))
    future = np.triu(np.ones((length, length), dtype=bool), 1)
    heads = []
    for h in range(n_heads):
        part = slice(h * head_dim, (h + 1) * head_dim)
        scores = np.where(future, -np.inf, q[:, part] @ k[:, part].T / head_dim ** 0.5).astype(np.float32)
        heads.append((f"H{h}", attnscope.softmax(scores, causal=True), scores, np.ascontiguousarray(v[:, part])))
    return heads


def torch_heads(length, seed=0, n_heads=4, model_dim=64):
    """A random causal multi-head attention layer in PyTorch (the usual q k^T / sqrt(d) and softmax)."""
    try:
        import torch
    except ImportError:
        print("torch not importable: the random layer is built with numpy instead", file=sys.stderr)
        return numpy_heads(length, seed, n_heads, model_dim)

    generator = torch.Generator().manual_seed(seed)
    head_dim = model_dim // n_heads
    x = torch.randn(length, model_dim, generator=generator)
    x[0] *= 4  # a large first token, as BOS often is: a sink candidate
    weights = [torch.randn(model_dim, model_dim, generator=generator) / model_dim ** 0.5 for _ in range(3)]
    q, k, v = (x @ w for w in weights)
    future = torch.triu(torch.ones(length, length, dtype=torch.bool), 1)
    heads = []
    for h in range(n_heads):
        part = slice(h * head_dim, (h + 1) * head_dim)
        scores = (q[:, part] @ k[:, part].T / head_dim ** 0.5).masked_fill(future, float("-inf"))
        attention = torch.softmax(scores, dim=-1)
        heads.append((f"H{h}", attention.numpy(), scores.numpy(), v[:, part].numpy()))
    return heads


def analyse(heads, counts):
    rows = []
    for name, attention, scores, values in heads:
        entropy = attnscope.row_entropy(attention, causal=True)
        # rows 1.. have a content key besides the sink (key 0): causal offset 1 for the shifted rows
        channels = attnscope.composition.channel_summary(attention[1:], causal=True, causal_offset=1)
        norms = attnscope.jacobian_spectral_norm(scores, "softmax", causal=True)
        curve = attnscope.capacity.separability_rows(attention, values, counts, causal=True)
        rows.append({
            "head": name,
            "entropy": float(entropy.mean()),
            "sink_mass": channels.mean_sink_mass,
            "content_entropy": channels.mean_content_entropy,
            "sink_share": channels.sink_share_of_entropy,
            "jacobian_mean": float(norms.mean()),
            "jacobian_max": float(norms.max()),
            "separability": [entry.mean_fraction for entry in curve],
        })
    return rows


def print_table(rows, counts):
    header = (f"{'head':>6} {'entropy':>8} {'sink':>6} {'H(c)':>6} {'sink%H':>7} {'mean|J|':>8} {'max|J|':>7}  "
              + " ".join(f"Ns/N@{n:<3}" for n in counts))
    print(header)
    print("-" * len(header))
    for r in rows:
        curve = " ".join(f"{value:8.3f}" for value in r["separability"])
        print(f"{r['head']:>6} {r['entropy']:8.3f} {r['sink_mass']:6.3f} {r['content_entropy']:6.3f} "
              f"{r['sink_share']:7.3f} {r['jacobian_mean']:8.4f} {r['jacobian_max']:7.4f}  {curve}")


def plot(rows, counts, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(15, 4))
    names = [r["head"] for r in rows]
    index = np.arange(len(rows))
    axes[0].bar(index, [r["entropy"] for r in rows], label="H(a)")
    axes[0].bar(index, [r["sink_share"] * r["entropy"] for r in rows], label="sink part of H(a)")
    axes[0].set_title("per-head entropy and its sink part")
    axes[0].legend()
    axes[1].scatter([r["sink_mass"] for r in rows], [r["jacobian_mean"] for r in rows])
    axes[1].set_xlabel("mean sink mass")
    axes[1].set_ylabel("mean exact ||J||_2")
    axes[1].set_title("Jacobian norm vs sink mass")
    for r in rows:
        axes[2].plot(counts, r["separability"], alpha=0.4)
    axes[2].set_xscale("log")
    axes[2].set_xlabel("N")
    axes[2].set_ylabel("N_s / N")
    axes[2].set_title("separability curves")
    for axis in axes[:1]:
        axis.set_xticks(index)
        axis.set_xticklabels(names, rotation=90, fontsize=6)
    figure.tight_layout()
    figure.savefig(out, dpi=120)
    print(f"wrote {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_data = os.environ.get("ATTNSCOPE_DATA", pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "data")
    parser.add_argument("--data", type=pathlib.Path, default=pathlib.Path(default_data))
    parser.add_argument("--source", choices=["stories", "torch"], default=None)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--no-plot", action="store_true", help="print the table only")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("analyse_attention.png"))
    args = parser.parse_args()

    source = args.source or ("stories" if (args.data / "stories260K.bin").exists() else "torch")
    heads = stories_heads(args.data, args.length) if source == "stories" else torch_heads(args.length)
    counts = [n for n in (1, 2, 4, 8, 16) if n < args.length // 2]
    rows = analyse(heads, counts)
    print(f"source: {source}, L = {args.length}, {len(rows)} heads")
    print_table(rows, counts)
    if not args.no_plot:
        try:
            plot(rows, counts, args.out)
        except ImportError:
            print("matplotlib not available: table only", file=sys.stderr)


if __name__ == "__main__":
    main()

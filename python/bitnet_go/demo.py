"""``python -m bitnet_go demo``: quantize a random weight and compare with PyTorch.

Example:
    $ python -m bitnet_go demo --shape 1024,1024
"""

from __future__ import annotations

import argparse

import numpy as np

import bitnet_go

from .bench._common import median, timeit, torch_or_none, torch_quantize


def main(args: argparse.Namespace) -> int:
    """Run the demo; returns the process exit code."""
    shape = tuple(int(v) for v in args.shape.split(","))
    rng = np.random.default_rng(0)
    w = rng.standard_normal(shape, dtype=np.float32) * 0.02
    feats = bitnet_go.cpu_features()
    print(
        f"bitnet_go {bitnet_go.__version__}  threads={bitnet_go.get_num_threads()}  "
        f"cpu={feats['brand']!r}  kernels={feats['kernels']}"
    )
    t = bitnet_go.quantize_i2s(w, block_size=args.block_size)
    print(t)
    v = t.values()
    total = v.size
    print("ternary histogram:")
    for q in (-1, 0, 1):
        c = int((v == q).sum())
        print(f"  {q:+d}: {c:>10d}  {100 * c / total:5.1f}%  {'#' * round(40 * c / total)}")
    rec = t.dequantize()
    err = float(np.linalg.norm(rec - w) / np.linalg.norm(w))
    print(f"reconstruction error ||dequantize(q) - w|| / ||w|| = {err:.4f}")
    print(f"storage: {t.nbytes} bytes ({t.bits_per_weight:.3f} bits/weight) vs {w.nbytes} bytes float32")

    ours = median(timeit(lambda: bitnet_go.quantize_i2s(w, block_size=args.block_size)))
    line = f"speed: bitnet_go {ours * 1e3:.2f} ms ({w.nbytes / ours / 1e9:.1f} GB/s)"
    torch = torch_or_none()
    if torch is not None:
        torch.set_num_threads(bitnet_go.get_num_threads())
        wt = torch.from_numpy(w)
        q, s = torch_quantize(torch, wt, args.block_size, "absmean")
        same = bool(np.array_equal(q.numpy().astype(np.int8), v.reshape(-1))) and np.array_equal(s.numpy(), t.scales)
        tt = median(timeit(lambda: torch_quantize(torch, wt, args.block_size, "absmean")))
        line += f", PyTorch expression {tt * 1e3:.2f} ms: {tt / ours:.1f}x faster; identical result: {same}"
    print(line)
    return 0

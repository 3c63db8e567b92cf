"""``python -m bitnet_go demo``: quantize a random weight, explain the numbers, compare with PyTorch.

Example:
    $ python -m bitnet_go demo --shape 1024,1024
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import bitnet_go

from .bench._common import median, parse_dims, spread_text, timeit, torch_or_none, torch_quantize


def expected_for_normal() -> tuple[float, float]:
    """Zero fraction and relative reconstruction error of absmean ternary quantization of N(0, 1).

    absmean's scale is s = E|w| = sqrt(2/pi) (about 0.80 sigma); a weight becomes 0 where
    |w| < s/2 and +-s elsewhere. Both numbers follow from the normal distribution's
    integrals (no sampling).

    Example:
        >>> zero, err = expected_for_normal()
        >>> round(zero, 3), round(err, 3)
        (0.31, 0.513)
    """
    s = math.sqrt(2 / math.pi)
    t = s / 2  # the rounding threshold
    phi = math.exp(-t * t / 2) / math.sqrt(2 * math.pi)  # the density at t
    tail = 0.5 * math.erfc(t / math.sqrt(2))  # P(w > t)
    zero = 1 - 2 * tail
    # E[(w - s q)^2] = E[w^2] - 2 s E[|w|; |w| > t] + s^2 P(|w| > t); E[|w|; |w| > t] = 2 phi(t)
    mse = 1 - 2 * s * (2 * phi) + s * s * (2 * tail)
    return zero, math.sqrt(mse)


_LABEL = {-1: "-1", 0: " 0", 1: "+1"}

_NO_TORCH = "demo: torch is not installed; the comparison with PyTorch is skipped (pip install 'bitnet_go[bench]')"


def main(args: argparse.Namespace) -> int:
    """Run the demo (``args.shape``: ``"4096,4096"``, ``args.block_size``: None or a count); returns the exit status."""
    shape = parse_dims(args.shape)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(shape, dtype=np.float32) * 0.02
    feats = bitnet_go.cpu_features()
    print(
        f"bitnet_go {bitnet_go.__version__}  threads={bitnet_go.get_num_threads()}  "
        f"cpu={feats['brand']!r}  kernels={feats['kernels']}"
    )
    print(f"\nweight: {'x'.join(map(str, shape))} float32 drawn from a normal distribution (sigma 0.02)")
    t = bitnet_go.quantize_i2s(w, block_size=args.block_size)
    print(t)
    v = t.values()
    total = v.size
    zero_exp, err_exp = expected_for_normal()
    print("\nternary values (each weight becomes -scale, 0 or +scale):")
    for q in (-1, 0, 1):
        c = int((v == q).sum())
        print(f"  {_LABEL[q]}: {c:>10d}  {100 * c / total:5.1f}%  {'#' * round(40 * c / total)}")
    print(
        f"  absmean's scale is the mean |w| (about 0.80 sigma); weights below half of it round to 0,\n"
        f"  which for a normal distribution is {100 * zero_exp:.1f}% of them, the rest split evenly."
    )
    rec = t.dequantize()
    err = float(np.linalg.norm(rec - w) / np.linalg.norm(w))
    print(f"\nreconstruction error ||dequantize(q) - w|| / ||w|| = {err:.4f}")
    print(
        f"  about {err_exp:.3f} is expected for a normal distribution: three levels cannot follow a\n"
        f"  continuous weight closely (the best possible 3-level quantizer of a normal distribution\n"
        f"  still errs by 0.436). BitNet b1.58 models are trained with this quantization in the loop,\n"
        f"  so they learn weights that work in ternary; a float model quantized after training loses accuracy."
    )
    print(
        f"\nstorage: {t.nbytes} bytes ({t.bits_per_weight:.3f} bits/weight) vs {w.nbytes} bytes float32 "
        f"({w.nbytes / t.nbytes:.1f}x smaller)\n"
        f"  I2_S packs four ternary values per byte (2 bits each) plus one float32 scale per block."
    )

    ts_ours = timeit(lambda: bitnet_go.quantize_i2s(w, block_size=args.block_size))
    ours = median(ts_ours)
    print(
        f"\nspeed: bitnet_go {ours * 1e3:.2f} ms (range {spread_text(ts_ours)} ms over 7 calls, "
        f"{w.nbytes / ours / 1e9:.1f} GB/s of float32 read)"
    )
    torch = torch_or_none(_NO_TORCH)
    if torch is not None:
        torch.set_num_threads(bitnet_go.get_num_threads())
        wt = torch.from_numpy(w)
        q, s = torch_quantize(torch, wt, args.block_size, "absmean")
        same = bool(np.array_equal(q.numpy().astype(np.int8), v.reshape(-1))) and np.array_equal(s.numpy(), t.scales)
        ts_torch = timeit(lambda: torch_quantize(torch, wt, args.block_size, "absmean"))
        tt = median(ts_torch)
        print(
            f"  the same quantization as PyTorch ops: {tt * 1e3:.2f} ms (range {spread_text(ts_torch)} ms), "
            f"so bitnet_go is {tt / ours:.1f}x faster\n"
            f"  (PyTorch makes several passes with temporary tensors and does not pack; bitnet_go\n"
            f"  computes the scale and writes the packed bytes in compiled kernels)\n"
            f"  identical values and scales: {same}"
        )
    return 0

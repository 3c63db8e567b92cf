"""``bench quantize``: quantize_i2s against the PyTorch expression and ``sum()``.

For each size and thread count, side by side in one process with the same
thread count for both libraries (``torch.set_num_threads``):

- ours: ``bitnet_go.quantize_i2s`` (scales + packed I2_S bytes);
- torch expr: the same quantization written in PyTorch (scales and ternary
  values, no packing: the comparison favours torch);
- torch sum: ``x.sum()``, one read of the input, the read-bandwidth ceiling.

Reported: median ms, GB/s of input read (4 bytes per element, once), the
speed-up over the PyTorch expression, and our bandwidth as a fraction of
``sum()``'s.

Example:
    $ python -m bitnet_go bench quantize --sizes 1M,16M --threads 1,2
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import bitnet_go

from ._common import (
    Table,
    median,
    parse_int_list,
    parse_sizes,
    restored_threads,
    timeit,
    torch_or_none,
    torch_quantize,
)
from .quantize_cuda import add_cuda_arguments, run_cuda


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """Options of the quantize suite."""
    g.add_argument("--sizes", default="1M,16M,64M", help="element counts (default 1M,16M,64M)")
    g.add_argument("--block-size", type=int, default=None, help="elements per scale (default: one per tensor)")
    g.add_argument("--method", default="absmean", choices=["absmean", "absmax"])
    g.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cuda: GPU benchmark (bitnet_go.cuda)")
    add_cuda_arguments(g)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the suite and print its table; returns the rows."""
    if getattr(args, "device", "cpu") == "cuda":
        return run_cuda(args)
    torch = torch_or_none()
    table = Table(_TITLE, _COLUMNS)
    rng = np.random.default_rng(0)
    with restored_threads(torch):
        for n in parse_sizes(args.sizes):
            x = rng.standard_normal(n, dtype=np.float32)
            xt = torch.from_numpy(x) if torch else None
            gb = x.nbytes / 1e9
            for th in parse_int_list(args.threads):
                bitnet_go.set_num_threads(th)
                t_ours = median(
                    timeit(
                        lambda x=x: bitnet_go.quantize_i2s(x, block_size=args.block_size, method=args.method),
                        repeat=args.repeat,
                    )
                )
                row: dict[str, Any] = {
                    "n": n,
                    "threads": th,
                    "block_size": args.block_size,
                    "method": args.method,
                    "ours_ms": t_ours * 1e3,
                    "ours_gbs": gb / t_ours,
                }
                if torch:
                    torch.set_num_threads(th)
                    t_expr = median(
                        timeit(
                            lambda xt=xt: torch_quantize(torch, xt, args.block_size, args.method),
                            repeat=max(3, args.repeat // 2),
                        )
                    )
                    t_sum = median(timeit(lambda xt=xt: xt.sum(), repeat=args.repeat))
                    row.update(
                        torch_expr_ms=t_expr * 1e3,
                        speedup_vs_expr=t_expr / t_ours,
                        torch_sum_ms=t_sum * 1e3,
                        sum_gbs=gb / t_sum,
                        frac_of_sum=t_sum / t_ours,
                    )
                table.add(row)
    return table.done()


_TITLE = "quantize_i2s vs PyTorch (median ms; GB/s of float32 input read)"
_COLUMNS = [
    ("n", "elements", "d"),
    ("threads", "thr", "d"),
    ("ours_ms", "ours ms", ".2f"),
    ("ours_gbs", "ours GB/s", ".1f"),
    ("torch_expr_ms", "torch expr ms", ".2f"),
    ("speedup_vs_expr", "x vs expr", ".1f"),
    ("torch_sum_ms", "sum() ms", ".2f"),
    ("sum_gbs", "sum GB/s", ".1f"),
    ("frac_of_sum", "of sum bw", ".2f"),
]

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
    block_size_arg,
    cli_type,
    median,
    parse_sizes,
    parse_threads,
    put_timings,
    restored_threads,
    timeit,
    torch_or_none,
    torch_quantize,
)
from .quantize_cuda import add_cuda_arguments, run_cuda

QUICK: dict[str, object] = {"sizes": "1M"}
"""``bench --quick``: this suite's options for a few seconds on tiny inputs."""

DEVICES = ("cpu", "cuda")
"""``--device`` values this suite runs on (``cuda``: :mod:`bitnet_go.bench.quantize_cuda`)."""


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """Options of the quantize suite (and ``--device``, which every suite reads)."""
    g.add_argument(
        "--sizes", type=cli_type(parse_sizes), default="1M,16M,64M", help="element counts (default 1M,16M,64M)"
    )
    g.add_argument(
        "--block-size", type=block_size_arg, default=None, help="elements per scale (default: one per tensor)"
    )
    g.add_argument("--method", default="absmean", choices=["absmean", "absmax"])
    g.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="cuda: GPU benchmarks (bitnet_go.cuda) of the quantize, conv and linear suites; the others run on the CPU",
    )
    add_cuda_arguments(g)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the suite and print its table; returns the rows."""
    if getattr(args, "device", "cpu") == "cuda":
        return run_cuda(args)
    torch = torch_or_none()
    sizes, threads = parse_sizes(args.sizes), parse_threads(args.threads)
    table = Table(_TITLE, _COLUMNS, total=len(sizes) * len(threads), notes=_NOTES)
    rng = np.random.default_rng(0)
    with restored_threads(torch):
        for n in sizes:
            x = rng.standard_normal(n, dtype=np.float32)
            xt = torch.from_numpy(x) if torch else None
            gb = x.nbytes / 1e9
            for th in threads:
                table.start(f"quantize_i2s of {n} elements, {th} thread(s)")
                bitnet_go.set_num_threads(th)
                ts_ours = timeit(
                    lambda x=x: bitnet_go.quantize_i2s(x, block_size=args.block_size, method=args.method),
                    repeat=args.repeat,
                )
                t_ours = median(ts_ours)
                row: dict[str, Any] = {
                    "n": n,
                    "threads": th,
                    "block_size": args.block_size,
                    "method": args.method,
                    "ours_gbs": gb / t_ours,
                }
                put_timings(row, "ours", ts_ours)
                if torch:
                    torch.set_num_threads(th)
                    ts_expr = timeit(
                        lambda xt=xt: torch_quantize(torch, xt, args.block_size, args.method),
                        repeat=max(3, args.repeat // 2),
                    )
                    t_expr = median(ts_expr)
                    t_sum = median(timeit(lambda xt=xt: xt.sum(), repeat=args.repeat))
                    put_timings(row, "torch_expr", ts_expr)
                    row.update(
                        speedup_vs_expr=t_expr / t_ours,
                        torch_sum_ms=t_sum * 1e3,
                        sum_gbs=gb / t_sum,
                        frac_of_sum=t_sum / t_ours,
                    )
                table.add(row)
    return table.done()


_TITLE = "quantize_i2s vs PyTorch (median ms of the timed calls, range = their min-max)"
_COLUMNS = [
    ("n", "elements", "d", "float32 elements quantized (one call)"),
    ("threads", "thr", "d", "threads, the same for bitnet_go and torch"),
    ("ours_ms", "ours ms", ".2f", "bitnet_go.quantize_i2s: scales and packed I2_S bytes"),
    ("ours_spread", "range", "s", "min-max ms of the timed calls, next to each median"),
    ("ours_gbs", "ours GB/s", ".1f", "float32 input read per second (4 bytes per element, once)"),
    ("torch_expr_ms", "torch expr ms", ".2f", "the same quantization as PyTorch ops (no packing: favours torch)"),
    ("torch_expr_spread", "range", "s", ""),
    ("speedup_vs_expr", "x vs expr", ".1f", "torch expr ms / ours ms: how many times faster we are"),
    ("torch_sum_ms", "sum() ms", ".2f", "torch x.sum(): one read of the input, the memory-bandwidth ceiling"),
    ("sum_gbs", "sum GB/s", ".1f", "sum()'s read bandwidth"),
    ("frac_of_sum", "of sum bw", ".2f", "our bandwidth as a fraction of sum()'s (1.00: as fast as one read)"),
]
_NOTES = [
    "x vs expr divides medians; torch's expression allocates temporaries. Before timing, the bench",
    "frees one 24 MiB buffer so glibc reuses heap blocks for them in every run, as in a long-running",
    "process (without it, whole runs of 1M floats took 8-12 ms instead of 1.2-1.6 ms; see settle_allocator).",
]

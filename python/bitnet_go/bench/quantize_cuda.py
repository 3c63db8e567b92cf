"""``bench quantize --device cuda``: quantize_i2s on an NVIDIA GPU.

For each size (1M to 256M float32 elements by default) and block size, in one
process on one GPU:

- kernel: our kernels alone, timed with CUDA events around ``--repeat``
  back-to-back launches on one stream (no finite check, no Python);
- copy: a device-to-device copy of the input's size (``cuMemcpyDtoDAsync``),
  same events: the bandwidth ceiling (it reads and writes 4 bytes per element);
- e2e torch: ``bitnet_go.quantize_i2s(x_cuda)`` from Python with its default
  ``check_finite=True`` (which waits for the stream), host clock;
- e2e numpy: ``quantize_i2s(x_numpy, device="cuda")``: copy in, kernels, copy
  out (pageable host memory), host clock;
- torch expr: the quantization written in PyTorch ops on the GPU (scales and
  ternary values, no packing), CUDA events;
- cpu: our CPU path on the same data (all threads), host clock.

Bandwidth (GB/s, 1e9 bytes) counts bytes read + written: for the kernel, the
input once (4 bytes per element) plus the packed codes and scales written
(``kernel GB/s``); plans that read the input twice (one scale per tensor, or
blocks that do not fit a shared-memory tile) also get ``traffic GB/s``, with
the second read counted. ``of copy`` is the kernel's bandwidth over the
copy's. Ratios: ``cpu/e2e`` is our CPU time over the end-to-end torch-CUDA
time, ``expr/kernel`` and ``expr/e2e`` the PyTorch expression's time over ours.

Example:
    $ python -m bitnet_go bench quantize --device cuda --cuda-sizes 1M,64M,256M --cuda-block-sizes none,128
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

import bitnet_go

from .. import cuda
from ..diagnostics import cuda_plan, cuda_time_copy, cuda_time_quantize
from ._common import (
    Table,
    cli_type,
    median,
    parse_block_sizes,
    parse_sizes,
    put_timings,
    timeit,
    torch_quantize,
)

if TYPE_CHECKING:  # the bench's optional dependency, for annotations only
    import torch

DEFAULT_SIZES = "1M,4M,16M,64M,256M"
DEFAULT_BLOCK_SIZES = "none,128"


def add_cuda_arguments(g: argparse._ArgumentGroup) -> None:
    """Options of the GPU benchmark (added to the quantize suite's group)."""
    g.add_argument(
        "--cuda-sizes",
        type=cli_type(parse_sizes),
        default=DEFAULT_SIZES,
        help=f"GPU element counts (default {DEFAULT_SIZES})",
    )
    g.add_argument(
        "--cuda-block-sizes",
        type=cli_type(parse_block_sizes),
        default=None,
        help=f"GPU block sizes, 'none' for one scale (default: --block-size if given, else {DEFAULT_BLOCK_SIZES})",
    )


def _events_ms(torch: ModuleType, fn: Callable[[], object], repeat: int) -> float:
    """Mean GPU milliseconds of fn() over repeat calls, timed with torch CUDA events."""
    fn()  # warm-up (allocator, cuBLAS/JIT)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / repeat


def _sizes(args: argparse.Namespace) -> list[int]:
    return parse_sizes(getattr(args, "cuda_sizes", None) or DEFAULT_SIZES)


def _block_sizes(args: argparse.Namespace) -> list[int | None]:
    s = getattr(args, "cuda_block_sizes", None)
    if s:
        return parse_block_sizes(s)
    if getattr(args, "block_size", None) is not None:
        return [args.block_size]
    return parse_block_sizes(DEFAULT_BLOCK_SIZES)


def run_cuda(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the GPU benchmark and print its table; returns the rows ([] without a GPU).

    Example:
        >>> import argparse
        >>> a = argparse.Namespace(cuda_sizes="1M,64M", cuda_block_sizes="none,128")
        >>> _sizes(a), _block_sizes(a)
        ([1048576, 67108864], [None, 128])
    """
    reason = cuda.unavailable_reason()
    if reason is not None:
        print(f"bench quantize --device cuda: no CUDA GPU available, nothing measured ({reason})")
        return []
    try:
        import torch
    except ImportError:
        print("bench quantize --device cuda: needs torch with CUDA (pip install 'bitnet_go[bench]'); nothing measured")
        return []
    if not torch.cuda.is_available():
        print("bench quantize --device cuda: this torch build sees no CUDA GPU; nothing measured")
        return []
    dev = torch.device("cuda", torch.cuda.current_device())
    name = cuda.device_name(dev.index)
    method = getattr(args, "method", "absmean")
    repeat = max(3, int(getattr(args, "repeat", 7)))
    table = Table(_TITLE, _COLUMNS, total=len(_sizes(args)) * len(_block_sizes(args)), notes=_NOTES)
    gen = torch.Generator(device=dev).manual_seed(0)
    print(f"\nGPU: {name} (cuda:{dev.index}), driver CUDA {cuda.driver_version()}, torch {torch.__version__}")
    for n in _sizes(args):
        x = torch.randn(n, device=dev, generator=gen, dtype=torch.float32)
        x_host = x.cpu().numpy()
        dst = torch.empty_like(x)
        copy_ms = cuda_time_copy(dst, x, repeat=repeat)
        copy_gbs = 8 * n / copy_ms / 1e6
        for bs in _block_sizes(args):
            table.start(f"{n} elements, block size {bs or 'tensor'}")
            row = _measure(torch, dev, x, x_host, n, bs, method, repeat)
            row.update(gpu=name, copy_ms=copy_ms, copy_gbs=copy_gbs, frac_of_copy=row["kernel_gbs"] / copy_gbs)
            table.add(row)
        del x, dst, x_host
        torch.cuda.empty_cache()
        cuda.empty_cache()
    return table.done()


def _measure(
    torch: ModuleType,
    dev: torch.device,
    x: torch.Tensor,
    x_host: np.ndarray,
    n: int,
    bs: int | None,
    method: str,
    repeat: int,
) -> dict[str, Any]:
    plan = cuda_plan(n, bs)
    kernel_ms = cuda_time_quantize(x, block_size=bs, method=method, repeat=repeat)  # type: ignore[arg-type]
    written = bitnet_go.quantize_i2s(x, block_size=bs, method=method).nbytes  # packed codes + scales
    logical = 4 * n + written
    traffic = logical + (4 * n if plan["passes"] == 2 else 0)

    def e2e_torch() -> None:
        bitnet_go.quantize_i2s(x, block_size=bs, method=method)
        torch.cuda.synchronize(dev)

    ts_e2e = timeit(e2e_torch, repeat=repeat)
    ts_np = timeit(
        lambda: bitnet_go.quantize_i2s(x_host, block_size=bs, method=method, device="cuda"),
        repeat=max(3, repeat // 2),
    )
    t_e2e = median(ts_e2e)
    expr_ms = _events_ms(torch, lambda: torch_quantize(torch, x, bs, method), max(3, repeat // 2))
    t0 = time.perf_counter()
    bitnet_go.quantize_i2s(x_host, block_size=bs, method=method)
    cpu_runs = 1 if time.perf_counter() - t0 > 1.0 else 3
    ts_cpu = timeit(lambda: bitnet_go.quantize_i2s(x_host, block_size=bs, method=method), repeat=cpu_runs, warmup=0)
    t_cpu = median(ts_cpu)
    row: dict[str, Any] = {
        "n": n,
        "block_size": bs,
        "method": method,
        "passes": plan["passes"],
        "kernel_ms": kernel_ms,
        "kernel_gbs": logical / kernel_ms / 1e6,
        "traffic_gbs": traffic / kernel_ms / 1e6,
        "torch_expr_ms": expr_ms,
        "cpu_threads": bitnet_go.get_num_threads(),
        "cpu_over_e2e": t_cpu / t_e2e,
        "expr_over_kernel": expr_ms / kernel_ms,
        "expr_over_e2e": expr_ms / (t_e2e * 1e3),
    }
    for key, ts in (("e2e_torch", ts_e2e), ("e2e_numpy", ts_np), ("cpu", ts_cpu)):
        put_timings(row, key, ts)
    return row


_TITLE = "quantize_i2s on the GPU (ms, range = min-max of the host-timed calls; GB/s = 1e9 bytes read + written / s)"
_COLUMNS = [
    ("n", "elements", "d", "float32 elements quantized"),
    ("block_size", "block", "", "elements per scale (None: one scale per tensor)"),
    ("passes", "pass", "d", "kernel launches over the data (2: scales first, then the codes)"),
    ("kernel_ms", "kernel ms", ".3f", "the kernels alone: mean of --repeat back-to-back launches (CUDA events)"),
    ("kernel_gbs", "kernel GB/s", ".0f", "bytes read once + written, per kernel second"),
    ("traffic_gbs", "traffic GB/s", ".0f", "... counting the second pass's read too"),
    ("copy_gbs", "copy GB/s", ".0f", "a device-to-device copy of the input: the memory ceiling"),
    ("frac_of_copy", "of copy", ".2f", "kernel GB/s / copy GB/s"),
    ("e2e_torch_ms", "e2e torch ms", ".3f", "quantize_i2s(torch cuda tensor) end to end, synchronized, median"),
    ("e2e_torch_spread", "range", "s", "min-max ms of the timed calls, next to each median"),
    ("e2e_numpy_ms", "e2e numpy ms", ".2f", 'quantize_i2s(numpy array, device="cuda"): with the copies to and from'),
    ("e2e_numpy_spread", "range", "s", ""),
    ("torch_expr_ms", "torch expr ms", ".3f", "the same quantization as PyTorch ops on the GPU (CUDA events, mean)"),
    ("cpu_ms", "cpu ms", ".1f", "quantize_i2s on the CPU, all threads, median"),
    ("cpu_spread", "range", "s", ""),
    ("cpu_over_e2e", "cpu/e2e", ".1f", "cpu ms / e2e torch ms"),
    ("expr_over_kernel", "expr/kernel", ".1f", "torch expr ms / kernel ms"),
    ("expr_over_e2e", "expr/e2e", ".1f", "torch expr ms / e2e torch ms"),
]
_NOTES = [
    "kernel ms and torch expr ms are means over back-to-back launches between two CUDA events:",
    "there are no per-call times to give a range of; the host-timed columns have theirs.",
]

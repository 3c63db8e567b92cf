"""GPU timing of quantize_i2s against a device-to-device copy.

usage: PYTHONPATH=python python3 cuda/bench_fused.py [--sizes 16M,64M,256M]
           [--blocks none,128,1000] [--method absmean] [--check] [--reps 30]

Times quantize_i2s on torch CUDA float32 tensors with CUDA events (median of
--reps calls after warm-up) and a torch copy of the same tensor (read + write
counted), and prints elements, block, ms, GB/s (4.25 bytes per value: 4 read,
0.25 written; scales not counted) and the fraction of the copy bandwidth.
check_finite is off unless --check (it adds a small device-to-host read and
a wait). A ~1 ms spin kernel before each timed call lets the host enqueue the
call while the GPU is busy, so the Python call overhead is not in the time.
Needs the Go library: `make lib` first.
Exits 0 with a message when there is no CUDA GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from typing import Any


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def time_ms(torch: Any, fn: Callable[[], object], reps: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    sleep = getattr(torch.cuda, "_sleep", None)
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if sleep is not None:
            sleep(1_000_000)  # keep the GPU busy so the host's call overhead is not timed
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def bench_size(torch: Any, quantize: Callable[..., object], n: int, blocks: list[int | None], args: Any) -> None:
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(n, device="cuda", dtype=torch.float32, generator=gen)
    y = torch.empty_like(x)
    copy_ms = time_ms(torch, lambda: y.copy_(x), args.reps)
    copy_gbs = 8 * n / copy_ms / 1e6  # read + write
    print(f"{n:>12} {'copy':>6} {copy_ms:>9.4f} {copy_gbs:>8.0f} {copy_gbs:>10.0f} {1:>8.2f}")
    for bs in blocks:
        ms = time_ms(
            torch, lambda bs=bs: quantize(x, block_size=bs, method=args.method, check_finite=args.check), args.reps
        )
        gbs = 4.25 * n / ms / 1e6
        print(f"{n:>12} {str(bs):>6} {ms:>9.4f} {gbs:>8.0f} {copy_gbs:>10.0f} {gbs / copy_gbs:>8.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="16M,64M,256M")
    ap.add_argument("--blocks", default="none,128,1000")
    ap.add_argument("--method", default="absmean", choices=["absmean", "absmax"])
    ap.add_argument("--check", action="store_true", help="check_finite=True")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("bench_fused: torch is not installed: nothing to time")
        return 0
    if not torch.cuda.is_available():
        print("bench_fused: no CUDA GPU visible to torch: nothing to time")
        return 0
    try:
        import bitnet_go
        from bitnet_go import cuda
    except ImportError as e:
        print(f"bench_fused: {e}")
        return 1
    if not cuda.is_available():
        print(f"bench_fused: bitnet_go sees no GPU: {cuda.unavailable_reason()}")
        return 0
    blocks = [None if b.strip().lower() == "none" else int(b) for b in args.blocks.split(",")]
    print(f"device: {torch.cuda.get_device_name()}  method: {args.method}  check_finite: {args.check}")
    print(f"{'elements':>12} {'block':>6} {'ms':>9} {'GB/s':>8} {'copy GB/s':>10} {'of copy':>8}")
    for s in args.sizes.split(","):
        bench_size(torch, bitnet_go.quantize_i2s, parse_size(s), blocks, args)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``bench conv --device cuda`` and ``bench linear --device cuda``: conv2d_quantized on an NVIDIA GPU.

For each layer (``bench conv``: the conv suite's layers; ``bench linear``:
weight shapes rows x k as 1x1 convolutions of N rows) and batch size, in one
process on one GPU, all times in GPU milliseconds measured with CUDA events:

- ours A8: ``conv2d_quantized(x, w.to("cuda"), act_bits=8)``'s kernels alone
  (activation scales, int8 quantization, the implicit GEMM or GEMV), the mean
  of ``--repeat`` back-to-back runs between two events (no finite check, no
  Python between them: the library's ``cuda_time_conv2d`` entry);
- ours f32: the same with float32 activations (``act_bits=None``);
- torch fp16: ``F.conv2d`` (``F.linear`` for linear layers) in float16, the
  input and weight in ``channels_last`` for convolutions, with
  ``torch.backends.cudnn.benchmark = True``; the mean of back-to-back calls;
- torch fp32: the same in float32 (cuDNN benchmark mode, contiguous NCHW).

Ratios: ``fp16/A8`` and ``fp32/A8`` are torch's time over ours (above 1: we
are faster), with their geometric means over the rows under the table and
the targets of issue 20 (conv: fp16/A8 >= 1 and fp32/A8 >= 2 as geomeans;
linear at batch 1: fp16/A8 >= 3 and at least 70% of the copy bandwidth).

Bandwidth: ``read GB/s`` counts the bytes our A8 kernels read at least once
(the 2-bit weight and its scales, x in float32 twice: the scale pass and
the quantization pass, the int8 copy of x once, the bias) per kernel second;
``copy GB/s`` is a device-to-device copy of 64 MiB counted as the bytes it
reads and writes (as ``bench quantize --device cuda`` counts it), and
``of copy`` = read GB/s / copy GB/s (the outputs our kernels write are not
counted: for a linear layer at batch 1 they are a few KiB).

Without a CUDA GPU (or without a torch build that sees one) nothing is
measured: the suite says why and returns no rows.

Example:
    $ python -m bitnet_go bench conv --device cuda --cuda-batches 1,32
    $ python -m bitnet_go bench linear --device cuda --linear-batches 1
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

import bitnet_go

from .. import cuda
from ..diagnostics import conv2d_with_info, cuda_time_conv2d, cuda_time_copy
from ._common import Table, cli_type, geomean, parse_batches
from .quantize_cuda import _events_ms

DEFAULT_BATCHES = "1,32"
"""Batch sizes of ``bench conv --device cuda`` (issue 20's targets: batch 1 and 32)."""

TARGET_FP16 = 1.0
"""Conv: the geomean of torch fp16 time over ours must reach this."""

TARGET_FP32 = 2.0
"""Conv: the geomean of torch fp32 time over ours must reach this."""

TARGET_LINEAR_FP16 = 3.0
"""Linear layers at batch 1: torch fp16 matmul time over ours."""

TARGET_LINEAR_COPY = 0.7
"""Linear layers at batch 1: our read bandwidth over the copy's."""

COPY_BYTES = 64 << 20
"""Bytes of the device-to-device copy that gives the bandwidth ceiling."""


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """Options of the GPU conv benchmark (added to the conv suite's group; ``--device`` is the quantize suite's)."""
    g.add_argument(
        "--cuda-batches",
        type=cli_type(parse_batches),
        default=DEFAULT_BATCHES,
        help=f"batch sizes with --device cuda (default {DEFAULT_BATCHES}; 1 with --conv-quick unless set to others)",
    )


def check_device(args: argparse.Namespace, suite: str) -> tuple[ModuleType | None, str | None]:
    """``(torch, None)`` when the GPU suite can run here, else ``(None, why)``.

    Example:
        >>> import argparse
        >>> torch, why = check_device(argparse.Namespace(repeat=2), "conv")
        >>> (torch is None) == (why is not None)
        True
    """
    reason = cuda.unavailable_reason()
    if reason is not None:
        return None, f"bench {suite} --device cuda: no CUDA GPU found, nothing measured ({reason})"
    try:
        import torch
    except ImportError:
        return (
            None,
            f"bench {suite} --device cuda: needs torch with CUDA (pip install 'bitnet_go[bench]'); nothing measured",
        )
    if not torch.cuda.is_available():
        return None, f"bench {suite} --device cuda: this torch build sees no CUDA GPU; nothing measured"
    return torch, None


def read_bytes(n: int, c: int, h: int, w: int, o: int, k: int, groups: int, n_scales: int, bias: bool) -> int:
    """Bytes our A8 kernels read at least once: the 2-bit weight and scales, x twice in float32, int8 x once, bias.

    Example:
        >>> read_bytes(1, 4096, 1, 1, 4096, 1, 1, 1, False)  # a 4096x4096 linear layer, batch 1
        4231172
    """
    weight = o * (c // groups) * k * k
    packed = 32 * ((weight + 127) // 128)
    x = n * c * h * w
    return packed + 4 * n_scales + 2 * 4 * x + x + (4 * o if bias else 0)


def _measure(
    torch: ModuleType, dev: Any, shape: tuple[int, int, int, int], o: int, k: int, stride: int, pad: int,  # noqa: ANN401
    repeat: int, rng: np.random.Generator, linear: bool,
) -> dict[str, Any]:  # fmt: skip
    """One layer at one batch: our kernels and torch's, CUDA events."""
    n, c, h, w = shape
    x_host = rng.standard_normal(shape, dtype=np.float32)
    w_host = rng.standard_normal((o, c, k, k), dtype=np.float32)
    wt = bitnet_go.quantize_conv_weight(w_host, per_channel=True).to(f"cuda:{dev.index}")
    x = torch.from_numpy(x_host).to(dev)

    def ours(act_bits: int | None) -> tuple[float, str]:
        info = conv2d_with_info(x, wt, stride=stride, padding=pad, act_bits=act_bits, check_finite=False)[1]
        ms = cuda_time_conv2d(x, wt, stride=stride, padding=pad, act_bits=act_bits, repeat=repeat)
        return ms, str(info.kernel)

    a8_ms, kernel = ours(8)
    f32_ms, _ = ours(None)
    wf = torch.from_numpy(wt.cpu().dequantize()).to(dev)
    F = torch.nn.functional  # noqa: N806 (torch's own spelling)
    if linear:
        x2, w2 = x.reshape(n, c), wf.reshape(o, c)
        x16, w16 = x2.half(), w2.half()
        fp16: Callable[[], object] = lambda: F.linear(x16, w16)  # noqa: E731
        fp32: Callable[[], object] = lambda: F.linear(x2, w2)  # noqa: E731
    else:
        x16 = x.half().contiguous(memory_format=torch.channels_last)
        w16 = wf.half().contiguous(memory_format=torch.channels_last)
        fp16 = lambda: F.conv2d(x16, w16, None, stride, pad)  # noqa: E731
        fp32 = lambda: F.conv2d(x, wf, None, stride, pad)  # noqa: E731
    fp16(), fp32()  # cuDNN benchmark mode picks its algorithms here
    fp16_ms = _events_ms(torch, fp16, repeat)
    fp32_ms = _events_ms(torch, fp32, repeat)
    nbytes = read_bytes(n, c, h, w, o, k, 1, int(wt.scales.numel()), False)
    return {
        "n": n, "kernel": kernel, "a8_ms": a8_ms, "f32_ms": f32_ms, "fp16_ms": fp16_ms, "fp32_ms": fp32_ms,
        "fp16_over_a8": fp16_ms / a8_ms, "fp32_over_a8": fp32_ms / a8_ms, "read_bytes": nbytes,
        "read_gbs": nbytes / a8_ms / 1e6,
    }  # fmt: skip


def _run(
    args: argparse.Namespace, suite: str, cases: list[tuple[str, tuple[int, ...]]], batches: list[int]
) -> list[dict[str, Any]]:
    torch, why = check_device(args, suite)
    if torch is None:
        print(why)
        return []
    dev = torch.device("cuda", torch.cuda.current_device())
    repeat = max(3, int(getattr(args, "repeat", 7)))
    name = cuda.device_name(dev.index)
    print(f"\nGPU: {name} (cuda:{dev.index}), driver CUDA {cuda.driver_version()}, torch {torch.__version__}")
    src = torch.empty(COPY_BYTES // 4, device=dev)
    dst = torch.empty_like(src)
    copy_gbs = 2 * COPY_BYTES / cuda_time_copy(dst, src, repeat=repeat) / 1e6  # read + written
    del src, dst
    linear = suite == "linear"
    table = Table(_TITLE[suite], _COLUMNS, total=len(cases) * len(batches), notes=_NOTES)
    rng = np.random.default_rng(0)
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        for label, (c, o, k, stride, pad, hw) in cases:  # type: ignore[misc]
            for n in batches:
                table.start(f"{label}, batch {n}")
                row = _measure(torch, dev, (n, c, hw, hw), o, k, stride, pad, repeat, rng, linear)
                row.update(layer=label, gpu=name, copy_gbs=copy_gbs, of_copy=row["read_gbs"] / copy_gbs)
                table.add(row)
                torch.cuda.empty_cache()
    finally:
        torch.backends.cudnn.benchmark = old
    rows = table.done()
    _summary(rows, linear)
    return rows


def _met(v: float, target: float) -> str:
    return f"{v:.2f} (target >= {target}: {'met' if v >= target else 'missed'})"


def _summary(rows: list[dict[str, Any]], linear: bool) -> None:
    """Print the geomeans and issue 20's targets: met or missed, by how much."""
    if linear:
        b1 = [r for r in rows if r["n"] == 1]
        if b1:
            g16 = geomean([r["fp16_over_a8"] for r in b1])
            copy = min(r["of_copy"] for r in b1)
            print(f"batch 1: torch fp16 / ours geomean {_met(g16, TARGET_LINEAR_FP16)}; "
                  f"lowest of copy {_met(copy, TARGET_LINEAR_COPY)}")  # fmt: skip
        return
    g16 = geomean([r["fp16_over_a8"] for r in rows])
    g32 = geomean([r["fp32_over_a8"] for r in rows])
    print(f"geomean torch fp16 / ours {_met(g16, TARGET_FP16)}, torch fp32 / ours {_met(g32, TARGET_FP32)}")


def run_conv(args: argparse.Namespace, layers: list[tuple[str, int, int, int, int, int, int]]) -> list[dict[str, Any]]:
    """``bench conv --device cuda`` on the conv suite's ``layers`` (name, C, O, k, stride, padding, H = W).

    Returns the rows ([] without a GPU, saying why). Batches: ``--cuda-batches``; with ``--conv-quick``
    1 unless ``--cuda-batches`` differs from its default.
    """
    cases = [(ly[0], (ly[1], ly[2], ly[3], ly[4], ly[5], ly[6])) for ly in layers]
    text = getattr(args, "cuda_batches", None) or DEFAULT_BATCHES
    quick = getattr(args, "conv_quick", False) and text == DEFAULT_BATCHES
    batches = [1] if quick else parse_batches(text)
    return _run(args, "conv", cases, batches)  # type: ignore[arg-type]


def run_linear(args: argparse.Namespace, shapes: list[tuple[int, int]], batches: list[int]) -> list[dict[str, Any]]:
    """``bench linear --device cuda``: weight ``shapes`` (rows, k) at ``batches`` ([] without a GPU, saying why)."""
    cases = [(f"linear {r}x{k}", (k, r, 1, 1, 0, 1)) for r, k in shapes]
    return _run(args, "linear", cases, batches)  # type: ignore[arg-type]


_TITLE = {
    "conv": "bench conv --device cuda: conv2d_quantized on the GPU vs torch (GPU ms, CUDA events)",
    "linear": "bench linear --device cuda: ternary linear layers on the GPU vs torch matmul (GPU ms, CUDA events)",
}
_COLUMNS = [
    ("layer", "layer", "s", "the layer (linear: rows x k, as a 1x1 convolution of N rows)"),
    ("n", "N", "d", "batch size"),
    ("kernel", "kernel", "s", "our kernel for act_bits=8"),
    ("a8_ms", "ours A8", ".4f", "our W1.58A8 kernels alone, mean of back-to-back runs"),
    ("f32_ms", "ours f32", ".4f", "our float32-activation kernel (act_bits=None)"),
    ("fp16_ms", "torch fp16", ".4f", "torch float16 (channels_last, cudnn.benchmark for convolutions)"),
    ("fp32_ms", "torch fp32", ".4f", "torch float32"),
    ("fp16_over_a8", "fp16/A8", ".2f", "torch fp16 time over ours (above 1: we are faster)"),
    ("fp32_over_a8", "fp32/A8", ".2f", "torch fp32 time over ours"),
    ("read_gbs", "read GB/s", ".0f", "bytes our A8 kernels read at least once, per kernel second"),
    ("copy_gbs", "copy GB/s", ".0f", "a 64 MiB device-to-device copy, bytes read + written per second"),
    ("of_copy", "of copy", ".2f", "read GB/s / copy GB/s"),
]
_NOTES = [
    "All times are means over back-to-back launches between two CUDA events (no per-call times, no range);",
    "run on a quiet GPU: another process's kernels would be counted.",
]

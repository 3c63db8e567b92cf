"""``bench conv``: conv2d_quantized on ResNet layers, side by side with PyTorch.

For each layer, batch size and thread count, in one process with the same
thread count for every library (``torch.set_num_threads``):

- torch fp32: ``F.conv2d`` on the dequantized weight;
- torch int8: ``torch.ao.nn.quantized.functional.conv2d`` (quint8 input,
  qint8 weight holding the ternary values with the weight's scales, the
  engine torch picks; the functional form prepacks the weight on every call,
  as ours unpacks it), where it runs;
- naive: our seven-loop reference, on the small cases only;
- ours: ``conv2d_quantized`` with ``act_bits=None`` and ``act_bits=8``
  (``algorithm="auto"``; the kernel the planner picked is shown);
- int8 multiply-add vs lookup tables: ``act_bits=8`` with the multiply-add
  kernel (``"im2col"``, or ``"direct"`` = the 1x1 GEMM on 1x1 layers) on the
  I2_S weight, and ``algorithm="lut"`` on the same values packed as TL1
  (pair tables) and TL2 (triple tables); ``madd/lut`` is the multiply-add
  time over the faster LUT time (above 1: LUT wins). ``madd@TL1`` is
  multiply-add on the TL1 weight (converted to I2_S on every call), and
  ``kernel TL1`` what the planner runs for the TL1 weight.

In both tables, ours and torch's (fp32, int8) are timed in ``--conv-rounds`` alternating rounds
(default 3; ``--repeat`` calls in all, split over the rounds, each block after a
warm-up call: :func:`bitnet_go.bench._common.alternate`), so that a noisy period
of a shared machine falls on both libraries' calls; the int8 kernel variants and
naive are timed in one block each.

Printed as three tables (the times against torch, the int8 kernels, rates and
memory), each once at the end with a legend of its headings, after a progress
line per measurement on stderr. Reported: median ms with the range (min-max of
the timed calls), GFLOP/s (2*N*O*C/groups*kH*kW*H_out*W_out), time ratios
to torch fp32 and torch int8 (ours / theirs: above 1 is slower), our rates as
a fraction of the machine's peak (``%pk``: threads times one core's rate
for the kernels' instruction mix, measured at the start by
``bitnet_go.diagnostics.peak_rates``), the speed-up over naive, and the peak
extra memory of our call next to input + output +
packed weight. Memory is measured in a fresh process per call: the peak
resident set (``VmHWM``, reset by writing 5 to ``/proc/self/clear_refs``)
during one call, minus the resident set before it and minus the output
array, after a tiny warm-up convolution has loaded the code. Last, a summary
line per thread count (:func:`summary_lines`): the geomeans of torch's time
over ours against issue 15's targets (int8 at least 3x torch fp32 and 1.5x
torch int8, float32 at least 1.0x torch fp32), over the convolution rows (the
GEMV-like ``gemv1x1`` rows left out) and over the five rows the issue names.

``--conv-depthwise`` runs a separate table instead: depthwise layers
(groups = C: MobileNet/EfficientNet 3x3 and 5x5, :data:`DW_LAYERS`) against
torch fp32 ``F.conv2d(groups=C)`` and torch int8 (the quantized conv2d with
groups), both ours f32 and ours i8 (the depthwise kernel, op ``conv_dw``).

Example:
    $ python -m bitnet_go bench conv --threads 1,2 --json conv.json --plot conv.png
    $ python -m bitnet_go bench conv --conv-quick --repeat 1
    $ python -m bitnet_go bench conv --conv-depthwise --threads 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import bitnet_go

from ..diagnostics import conv2d_with_info, peak_rates
from . import conv_cuda
from ._common import (
    Table,
    alternate,
    cli_type,
    geomean,
    median,
    parse_batches,
    parse_threads,
    positive_int,
    print_table,
    progress,
    put_timings,
    restored_threads,
    timeit,
    torch_or_none,
)

# name, C, O, k, stride, padding, H (= W)
LAYERS: list[tuple[str, int, int, int, int, int, int]] = [
    ("conv3x3 64->64 @56", 64, 64, 3, 1, 1, 56),
    ("conv3x3 128->128 @28", 128, 128, 3, 1, 1, 28),
    ("conv3x3 256->256 @14", 256, 256, 3, 1, 1, 14),
    ("conv3x3 512->512 @7", 512, 512, 3, 1, 1, 7),
    ("conv1x1 256->64 @56", 256, 64, 1, 1, 0, 56),
    ("conv1x1 64->256 @56", 64, 256, 1, 1, 0, 56),
    ("stem7x7/2 3->64 @224", 3, 64, 7, 2, 3, 224),
    ("gemv1x1 4096->4096 @1", 4096, 4096, 1, 1, 0, 1),
    ("gemv1x1 4096->4096 @4", 4096, 4096, 1, 1, 0, 4),
    ("gemv1x1 1024->1024 @1", 1024, 1024, 1, 1, 0, 1),
]
"""ResNet-18/50 layers of the full suite, then GEMV-like 1x1 layers (a linear layer of a
language model, batch 1), where lookup-table kernels are known to win."""

ISSUE15_ROWS: frozenset[tuple[str, int]] = frozenset({
    ("conv3x3 64->64 @56", 1),
    ("conv3x3 128->128 @28", 8),
    ("conv1x1 256->64 @56", 1),
    ("conv3x3 256->256 @14", 1),
    ("conv3x3 512->512 @7", 8),
})  # fmt: skip
"""The five (layer, batch) rows issue 15 names (the ResNet rows of its first table)."""

TARGETS: list[tuple[str, str, str, float]] = [
    ("i8 x torch f32", "torch_f32_ms", "ours_i8_ms", 3.0),
    ("i8 x torch i8", "torch_i8_ms", "ours_i8_ms", 1.5),
    ("f32 x torch f32", "torch_f32_ms", "ours_f32_ms", 1.0),
]
"""Issue 15's goals 1 and 2 for the convolutions: (label, torch's column, ours, the least geomean
of torch ms / ours ms)."""


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    r"""Per thread count, the geomeans of torch's time over ours (:data:`TARGETS`) over the
    convolution rows (the GEMV-like ``gemv1x1`` layers left out) and over the rows of
    :data:`ISSUE15_ROWS`, each with its target and whether it is met (more digits where two
    would round across the target; ``[n]`` where only n of the rows have that ratio); nothing
    for rows without torch's times.

    Example:
        >>> r = {"layer": "conv3x3 64->64 @56", "n": 1, "threads": 2, "ours_i8_ms": 1.0,
        ...      "ours_f32_ms": 4.0, "torch_f32_ms": 4.0, "torch_i8_ms": 2.0}
        >>> print(*summary_lines([r])[0].split(", "), sep="\n")
        bench conv: 2 thread(s)
        1 conv rows: i8 x torch f32 4.00 (>= 3: yes)
        i8 x torch i8 2.00 (>= 1.5: yes)
        f32 x torch f32 1.00 (>= 1: yes)
        >>> summary_lines([r])[1].startswith("bench conv: 2 thread(s), 1 of issue 15's rows: i8 x torch f32 4.00")
        True
    """
    lines = []
    for th in sorted({r["threads"] for r in rows}):
        conv = [r for r in rows if r["threads"] == th and not r["layer"].startswith("gemv")]
        named = [r for r in conv if (r["layer"], r["n"]) in ISSUE15_ROWS]
        for what, sub in (("conv rows", conv), ("of issue 15's rows", named)):
            parts = []
            for label, theirs, ours, target in TARGETS:
                ratios = [r[theirs] / r[ours] for r in sub if r.get(theirs) and r.get(ours)]
                if ratios:
                    gm, digits = geomean(ratios), 2
                    while digits < 6 and (round(gm, digits) >= target) != (gm >= target):
                        digits += 1  # never "3.00 (>= 3: no)"
                    n = f" [{len(ratios)}]" if len(ratios) != len(sub) else ""
                    parts.append(f"{label} {gm:.{digits}f}{n} (>= {target:g}: {'yes' if gm >= target else 'no'})")
            if parts:
                lines.append(f"bench conv: {th} thread(s), {len(sub)} {what}: " + ", ".join(parts))
    return lines


QUICK_LAYERS: list[tuple[str, int, int, int, int, int, int]] = [
    ("quick3x3 8->8 @12", 8, 8, 3, 1, 1, 12),
    ("quick1x1 16->8 @10", 16, 8, 1, 1, 0, 10),
    ("quickgemv 256->256 @1", 256, 256, 1, 1, 0, 1),
]
"""Tiny layers of ``--conv-quick`` (a smoke test of the suite in seconds)."""


# name, C, k, stride, H (= W); padding k // 2
DW_LAYERS: list[tuple[str, int, int, int, int]] = [
    ("dw3x3 32 @112", 32, 3, 1, 112),
    ("dw3x3/2 96 @112", 96, 3, 2, 112),
    ("dw3x3 144 @56", 144, 3, 1, 56),
    ("dw3x3 192 @28", 192, 3, 1, 28),
    ("dw3x3 384 @14", 384, 3, 1, 14),
    ("dw3x3 576 @14", 576, 3, 1, 14),
    ("dw3x3 960 @7", 960, 3, 1, 7),
    ("dw5x5 240 @14", 240, 5, 1, 14),
]
"""Depthwise layers of ``--conv-depthwise`` (MobileNetV2 / EfficientNet-B0 shapes)."""

QUICK_DW_LAYERS: list[tuple[str, int, int, int, int]] = [
    ("quickdw3x3 8 @12", 8, 3, 1, 12),
    ("quickdw3x3/2 8 @13", 8, 3, 2, 13),
]
"""Tiny depthwise layers of ``--conv-depthwise --conv-quick``."""

QUICK: dict[str, object] = {"conv_quick": True, "conv_no_mem": True, "conv_rounds": 1}
"""``bench --quick``: this suite's options for a few seconds on tiny inputs."""

DEVICES = ("cpu", "cuda")
"""``--device`` values this suite runs on (``cuda``: :func:`bitnet_go.bench.conv_cuda.run_conv`)."""


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """Options of the conv suite."""
    g.add_argument(
        "--conv-quick", action="store_true", help="tiny layers, batch 1 unless --conv-batches is given (a smoke test)"
    )
    g.add_argument(
        "--conv-batches",
        type=cli_type(parse_batches),
        default=None,
        help="batch sizes (default 1,8; 1 with --conv-quick)",
    )
    g.add_argument("--conv-layers", default="", help="comma-separated layer name prefixes (default: all)")
    g.add_argument(
        "--conv-naive-gflop", type=float, default=0.25, help="run naive where the call is at most this many GFLOP"
    )
    g.add_argument("--conv-no-mem", action="store_true", help="skip the peak-memory measurements")
    g.add_argument(
        "--conv-rounds",
        type=positive_int,
        default=3,
        help="alternating rounds of timed blocks for ours and torch's (default 3; --repeat calls in all, split over "
        "the rounds)",
    )
    g.add_argument(
        "--conv-depthwise", action="store_true", help="the depthwise table (groups = C) instead of the ResNet layers"
    )
    conv_cuda.add_arguments(g)  # --device cuda (the GPU suite: bench/conv_cuda.py)


def _layer_set(args: argparse.Namespace) -> tuple[str, list[Any]]:
    """The layers the options pick before ``--conv-layers`` filters them, and what a message calls that set."""
    quick = getattr(args, "conv_quick", False)
    if getattr(args, "conv_depthwise", False) and getattr(args, "device", "cpu") != "cuda":
        return ("--conv-depthwise --conv-quick", QUICK_DW_LAYERS) if quick else ("--conv-depthwise", DW_LAYERS)
    return ("--conv-quick", QUICK_LAYERS) if quick else ("the suite", LAYERS)


def select_layers(args: argparse.Namespace) -> list[Any]:
    """The layers the suite runs: those of :func:`_layer_set` whose names start with a ``--conv-layers`` prefix.

    Raises ValueError (``--conv-layers: ...``, listing the layers) for a prefix that matches none.

    Example:
        >>> import argparse
        >>> [ly[0] for ly in select_layers(argparse.Namespace(conv_quick=True, conv_layers="quick1x1"))]
        ['quick1x1 16->8 @10']
        >>> select_layers(argparse.Namespace(conv_quick=True, conv_layers="conv3x3"))
        Traceback (most recent call last):
        ValueError: --conv-layers: no layer of --conv-quick starts with 'conv3x3' (its layers: quick3x3 8->8 @12, ...)
    """
    what, layers = _layer_set(args)
    prefixes = [p.strip() for p in (getattr(args, "conv_layers", "") or "").split(",") if p.strip()]
    for p in prefixes:
        if not any(ly[0].startswith(p) for ly in layers):
            names = ", ".join(ly[0] for ly in layers)
            raise ValueError(f"--conv-layers: no layer of {what} starts with {p!r} (its layers: {names})")
    return [ly for ly in layers if any(ly[0].startswith(p) for p in prefixes)] if prefixes else list(layers)


def _batches(args: argparse.Namespace) -> list[int]:
    """``--conv-batches``, else 1 with ``--conv-quick`` and 1, 8 without."""
    text = getattr(args, "conv_batches", None)
    if text:
        return parse_batches(text)
    return [1] if getattr(args, "conv_quick", False) else [1, 8]


def check_args(args: argparse.Namespace) -> None:
    """Refuse (ValueError, ``--option: why``) a ``--conv-layers`` prefix that matches no layer, and
    ``--conv-depthwise`` with ``--device cuda`` (the GPU suite has no depthwise table).

    Example:
        >>> import argparse
        >>> check_args(argparse.Namespace(conv_depthwise=True, device="cuda"))
        Traceback (most recent call last):
        ValueError: --conv-depthwise: the GPU suite (--device cuda) has no depthwise table
    """
    if getattr(args, "conv_depthwise", False) and getattr(args, "device", "cpu") == "cuda":
        raise ValueError("--conv-depthwise: the GPU suite (--device cuda) has no depthwise table")
    select_layers(args)


def gflop(n: int, c: int, o: int, k: int, ho: int, wo: int, groups: int = 1) -> float:
    """GFLOP of one convolution: 2*N*O*(C/groups)*k*k*H_out*W_out / 1e9.

    Example:
        >>> gflop(1, 64, 64, 3, 56, 56)
        0.231211008
    """
    return 2 * n * o * (c // groups) * k * k * ho * wo / 1e9


_MEM_SCRIPT = r"""
import json, sys
import numpy as np, bitnet_go
cfg = json.loads(sys.argv[1])
def status():
    d = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                k, v = line.split(":")
                d[k] = int(v.split()[0]) * 1024
    return d
rng = np.random.default_rng(0)
n, c, o, k, s, p, h = (cfg[key] for key in ("n", "c", "o", "k", "stride", "padding", "h"))
x = rng.standard_normal((n, c, h, h), dtype=np.float32)
w = bitnet_go.quantize_conv_weight(rng.standard_normal((o, c, k, k), dtype=np.float32))
tiny = bitnet_go.quantize_conv_weight(np.ones((1, 1, 3, 3), np.float32))
bitnet_go.conv2d_quantized(np.ones((1, 1, 5, 5), np.float32), tiny, act_bits=cfg["act_bits"])
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status()
out = bitnet_go.conv2d_quantized(x, w, stride=s, padding=p, act_bits=cfg["act_bits"])
after = status()
print(json.dumps({"extra": after["VmHWM"] - before["VmRSS"] - out.nbytes}))
"""


def measure_extra_memory(cfg: dict[str, Any], threads: int) -> int | None:
    """Peak extra resident bytes of one conv2d_quantized call, in a fresh process.

    Returns None where /proc/self/clear_refs is not available (not Linux).

    Example:
        >>> cfg = dict(n=1, c=4, o=4, k=3, stride=1, padding=1, h=8, act_bits=None)
        >>> v = measure_extra_memory(cfg, 1)
        >>> v is None or v >= -(1 << 20)
        True
    """
    if not os.path.exists("/proc/self/clear_refs"):
        return None
    env = dict(os.environ, BITNET_GO_NUM_THREADS=str(threads))
    root = str(Path(bitnet_go.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    try:
        res = subprocess.run(
            [sys.executable, "-c", _MEM_SCRIPT, json.dumps(cfg)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        return int(json.loads(res.stdout.strip().splitlines()[-1])["extra"])
    except (subprocess.SubprocessError, OSError, ValueError, KeyError, IndexError) as e:
        print(f"bench conv: memory measurement failed: {e}")
        return None


def _torch_int8(
    torch: ModuleType, x: np.ndarray, t: bitnet_go.TernaryTensor, stride: int, padding: int, groups: int = 1
) -> Callable[[], object] | None:
    """A closure running torch's quantized conv2d on quantized copies of x and t, or None."""
    try:
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*deprecated")
        from torch.ao.nn.quantized import functional as qF

        xt = torch.from_numpy(x)
        xs = float(xt.abs().max()) / 127 or 1.0
        xq = torch.quantize_per_tensor(xt, xs, 128, torch.quint8)
        vals = torch.from_numpy(t.values()).float()
        if t.scales.size == vals.shape[0]:
            sc = torch.from_numpy(np.array(t.scales, np.float64))
            wq = torch.quantize_per_channel(
                vals * sc.float().reshape(-1, 1, 1, 1), sc, torch.zeros(vals.shape[0], dtype=torch.long), 0, torch.qint8
            )
        else:
            wq = torch.quantize_per_tensor(vals * float(t.scales[0]), float(t.scales[0]), 0, torch.qint8)
        import torch.nn.functional as F

        ref = F.conv2d(xt, torch.from_numpy(t.dequantize()), None, stride, padding, 1, groups)
        oscale = float(ref.abs().max()) / 127 or 1.0

        def fn() -> object:
            return qF.conv2d(xq, wq, None, stride=stride, padding=padding, groups=groups, scale=oscale, zero_point=128)

        fn()
        return fn
    except Exception as e:  # the engine may not support a shape or this build
        print(f"bench conv: torch int8 conv unavailable here ({type(e).__name__}: {e})")
        return None


def _record(row: dict[str, Any], timed: dict[str, list[float]], gf: float) -> None:
    """Each of ``timed``'s timings (:func:`alternate`'s, by key) into ``row``
    (:func:`~bitnet_go.bench._common.put_timings`) with ``<key>_gflops`` (``gf`` GFLOP per median call)."""
    for key, ts in timed.items():
        put_timings(row, key, ts)
        row[f"{key}_gflops"] = gf / median(ts)


def _ran(x: np.ndarray, w: bitnet_go.TernaryTensor, **kw: int | None) -> str:
    """The algorithm (and kernel, once the library reports it) a call runs, for the table."""
    info = conv2d_with_info(x, w, **kw)[1]  # type: ignore[arg-type]
    return info.algorithm if info.kernel is None else f"{info.algorithm}:{info.kernel}"


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the suite and print its table; returns the rows."""
    if getattr(args, "device", "cpu") == "cuda":
        return conv_cuda.run_conv(args, select_layers(args))
    torch = torch_or_none()
    if getattr(args, "conv_depthwise", False):
        return run_depthwise(args, torch)
    layers = select_layers(args)
    batches = _batches(args)
    naive_gflop = getattr(args, "conv_naive_gflop", 0.25)
    do_mem = not getattr(args, "conv_no_mem", False)
    repeat = max(1, args.repeat)
    rounds = max(1, getattr(args, "conv_rounds", 3))
    threads = parse_threads(args.threads)
    table = Table(_TITLE, _COLUMNS, total=len(layers) * len(batches) * len(threads), notes=_NOTES)
    rng = np.random.default_rng(0)
    progress("bench conv: measuring one core's peak rates (a few seconds) ...")
    peak = peak_rates()
    if peak["i8"] > 0:
        print(
            f"peak of one core ({peak['family']}): float32 {peak['f32']:.0f} GFLOP/s ({peak['f32_mix']}), "
            f"int8 {peak['i8']:.0f} GOP/s ({peak['i8_mix']}); '%pk' columns are our rate over threads x these"
        )
    with restored_threads(torch):
        for name, c, o, k, s, p, h in layers:
            w = bitnet_go.quantize_conv_weight(rng.standard_normal((o, c, k, k), dtype=np.float32))
            w1, w2 = w.to("tl1"), w.to("tl2")
            ho = (h + 2 * p - k) // s + 1
            for n in batches:
                x = rng.standard_normal((n, c, h, h), dtype=np.float32)
                gf = gflop(n, c, o, k, ho, ho)
                base = x.nbytes + n * o * ho * ho * 4 + w.packed.nbytes + w.scales.nbytes
                xt = torch.from_numpy(x) if torch else None
                wt = torch.from_numpy(w.dequantize()) if torch else None
                q8 = _torch_int8(torch, x, w, s, p) if torch else None
                for th in threads:
                    table.start(f"{name} N={n} thr={th}")
                    bitnet_go.set_num_threads(th)
                    row: dict[str, Any] = {"layer": name, "n": n, "threads": th, "gflop": gf, "base_mb": base / 1e6}
                    kern = {}
                    # ours and torch's, in alternating rounds (torch's thread count set first)
                    fns: dict[str, Callable[[], object]] = {}
                    for key, ab in (("f32", None), ("i8", 8)):
                        kern[key] = _ran(x, w, stride=s, padding=p, act_bits=ab)
                        fns[f"ours_{key}"] = partial(conv2d_with_info, x, w, stride=s, padding=p, act_bits=ab)
                    if torch:
                        torch.set_num_threads(th)
                        fns["torch_f32"] = partial(torch.nn.functional.conv2d, xt, wt, None, s, p)
                        if q8 is not None:
                            fns["torch_i8"] = q8
                    timed = alternate(fns, repeat=repeat, rounds=rounds)
                    _record(row, timed, gf)
                    row["kernel"] = kern["f32"]
                    row["kernel_i8"] = kern["i8"]
                    for key in ("f32", "i8"):
                        row[f"peak_{key}_gops"] = peak[key] * th
                        if peak[key] > 0:
                            row[f"{key}_of_peak"] = row[f"ours_{key}_gflops"] / (peak[key] * th)
                    # int8 path: multiply-add (the kernel the planner picks without LUT) vs the LUT
                    # kernels on the same values packed as TL1 (pairs) and TL2 (triples)
                    madd = "direct" if (k, s, p) == (1, 1, 0) else "im2col"
                    variants = (("madd", w, madd), ("madd1", w1, madd), ("lut1", w1, "lut"), ("lut2", w2, "lut"))
                    for key, wq, alg in variants:
                        f = partial(conv2d_with_info, x, wq, stride=s, padding=p, act_bits=8, algorithm=alg)
                        row[f"i8_{key}_ms"] = median(timeit(f, repeat=repeat)) * 1e3
                    row["lut_speedup"] = row["i8_madd_ms"] / min(row["i8_lut1_ms"], row["i8_lut2_ms"])
                    row["kernel_tl1"] = _ran(x, w1, stride=s, padding=p, act_bits=8)
                    if gf <= naive_gflop:
                        t = median(
                            timeit(
                                partial(conv2d_with_info, x, w, stride=s, padding=p, algorithm="naive"),
                                repeat=min(repeat, 3),
                                warmup=0,
                            )
                        )
                        row["naive_ms"] = t * 1e3
                        row["naive_gflops"] = gf / t
                        row["speedup_vs_naive"] = t * 1e3 / row["ours_f32_ms"]
                        row["speedup_i8_vs_naive"] = t * 1e3 / row["ours_i8_ms"]
                    if torch:
                        row["ratio_f32"] = row["ours_f32_ms"] / row["torch_f32_ms"]
                        if q8 is not None:
                            row["ratio_i8"] = row["ours_i8_ms"] / row["torch_i8_ms"]
                    row["mem_extra_mb"] = None
                    if do_mem:
                        cfg = dict(n=n, c=c, o=o, k=k, stride=s, padding=p, h=h)
                        m32 = measure_extra_memory(dict(cfg, act_bits=None), th)
                        m8 = measure_extra_memory(dict(cfg, act_bits=8), th)
                        if m32 is not None and m8 is not None:
                            row["mem_f32_mb"], row["mem_i8_mb"] = m32 / 1e6, m8 / 1e6
                            row["mem_extra_mb"] = max(m32, m8, 0) / 1e6
                            row["mem_ratio"] = max(m32, m8, 0) / base
                    table.add(row)
    rows = table.done()
    print_table(rows, _LUT_COLUMNS, title=_LUT_TITLE)
    print_table(rows, _RATE_COLUMNS, title=_RATE_TITLE)
    for line in summary_lines(rows):
        print(line)
    return rows


def run_depthwise(args: argparse.Namespace, torch: ModuleType | None) -> list[dict[str, Any]]:
    """The ``--conv-depthwise`` table: depthwise layers, ours vs torch fp32 and int8; returns the rows."""
    layers = select_layers(args)
    batches = _batches(args)
    repeat = max(1, args.repeat)
    rounds = max(1, getattr(args, "conv_rounds", 3))
    threads = parse_threads(args.threads)
    table = Table(_DW_TITLE, _DW_COLUMNS, total=len(layers) * len(batches) * len(threads))
    rng = np.random.default_rng(0)
    with restored_threads(torch):
        for name, c, k, s, h in layers:
            p = k // 2
            w = bitnet_go.quantize_conv_weight(rng.standard_normal((c, 1, k, k), dtype=np.float32))
            ho = (h + 2 * p - k) // s + 1
            for n in batches:
                x = rng.standard_normal((n, c, h, h), dtype=np.float32)
                gf = gflop(n, c, c, k, ho, ho, groups=c)
                xt = torch.from_numpy(x) if torch else None
                wt = torch.from_numpy(w.dequantize()) if torch else None
                q8 = _torch_int8(torch, x, w, s, p, groups=c) if torch else None
                for th in threads:
                    table.start(f"{name} N={n} thr={th}")
                    bitnet_go.set_num_threads(th)
                    row: dict[str, Any] = {"layer": name, "n": n, "threads": th, "gflop": gf}
                    fns: dict[str, Callable[[], object]] = {}
                    for key, ab in (("f32", None), ("i8", 8)):
                        kw = dict(stride=s, padding=p, groups=c, act_bits=ab)
                        row[f"kernel_{key}"] = _ran(x, w, **kw)
                        fns[f"ours_{key}"] = partial(conv2d_with_info, x, w, **kw)
                    if torch:
                        torch.set_num_threads(th)
                        fns["torch_f32"] = partial(torch.nn.functional.conv2d, xt, wt, None, s, p, 1, c)
                        if q8 is not None:
                            fns["torch_i8"] = q8
                    _record(row, alternate(fns, repeat=repeat, rounds=rounds), gf)
                    if torch:
                        row["ratio_f32"] = row["ours_f32_ms"] / row["torch_f32_ms"]
                        if q8 is not None:
                            row["ratio_i8"] = row["ours_i8_ms"] / row["torch_i8_ms"]
                            row["ratio_i8_f32"] = row["ours_i8_ms"] / row["torch_f32_ms"]
                    table.add(row)
    return table.done()


def plot(rows: list[dict[str, Any]], path: str) -> None:
    """Bar charts of GFLOP/s per layer, one panel per (batch, threads).

    Example:
        >>> import os, tempfile
        >>> rows = [{"layer": "a", "n": 1, "threads": 1, "ours_f32_gflops": 1.0, "ours_i8_gflops": 2.0}]
        >>> plot(rows, os.path.join(tempfile.mkdtemp(), "c.png"))  # doctest: +ELLIPSIS
        bench: wrote .../c.png
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["n"], r["threads"]) for r in rows})
    series = [
        ("torch_f32_gflops", "torch fp32"),
        ("torch_i8_gflops", "torch int8"),
        ("naive_gflops", "ours naive"),
        ("ours_f32_gflops", "ours act_bits=None"),
        ("ours_i8_gflops", "ours act_bits=8"),
    ]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.2 * len(panels)), squeeze=False)
    for ax, (n, th) in zip(axes[:, 0], panels):
        sub = [r for r in rows if r["n"] == n and r["threads"] == th]
        xs = np.arange(len(sub))
        width = 0.16
        for i, (key, label) in enumerate(series):
            vals = [r.get(key) or 0.0 for r in sub]
            ax.bar(xs + (i - 2) * width, vals, width, label=label)
        ax.set_xticks(xs)
        ax.set_xticklabels([r["layer"] for r in sub], fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"conv2d, batch {n}, {th} thread{'s' if th > 1 else ''}", fontsize=9)
        ax.legend(fontsize=7, ncol=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"bench: wrote {path}")


_KEY: list[tuple[str, ...]] = [
    ("layer", "layer", "s", "ResNet layer (kernel, in->out channels @ input height = width) or GEMV-like 1x1 layer"),
    ("n", "N", "d", "batch size"),
    ("threads", "thr", "d", "threads, the same for every library"),
]
_TITLE = "conv2d_quantized vs PyTorch (median ms of the timed calls; range = their min-max ms)"
_COLUMNS: list[tuple[str, ...]] = [
    *_KEY,
    ("torch_f32_ms", "torch f32", ".2f", "F.conv2d in float32 on the dequantized weight, ms"),
    ("torch_f32_spread", "range", "s", "min-max ms of the timed calls, next to each median"),
    ("ours_f32_ms", "ours f32", ".2f", "conv2d_quantized(act_bits=None): float32 activations, ternary weight, ms"),
    ("ours_f32_spread", "range", "s", ""),
    ("ratio_f32", "f32 ratio", ".2f", "ours f32 / torch f32 (below 1: ours is faster)"),
    ("torch_i8_ms", "torch i8", ".2f", "torch.ao quantized conv2d: quint8 input, qint8 weight, ms (- where it fails)"),
    ("torch_i8_spread", "range", "s", ""),
    ("ours_i8_ms", "ours i8", ".2f", "conv2d_quantized(act_bits=8): int8 activations, ms"),
    ("ours_i8_spread", "range", "s", ""),
    ("ratio_i8", "i8 ratio", ".2f", "ours i8 / torch i8 (below 1: ours is faster)"),
    ("naive_ms", "naive", ".0f", "our seven-loop reference, ms (small layers only)"),
    ("speedup_vs_naive", "x naive", ".0f", "naive / ours f32"),
    ("kernel", "kernel f32", "s", "algorithm:kernel the planner picked for act_bits=None"),
    ("kernel_i8", "kernel i8", "s", "... and for act_bits=8"),
]
_NOTES: list[str] = []

_LUT_TITLE = "the same layers, int8 activations: multiply-add vs lookup-table kernels (median ms)"
_LUT_COLUMNS: list[tuple[str, ...]] = [
    *[c[:3] for c in _KEY],
    ("i8_madd_ms", "madd", ".2f", "multiply-add kernel (im2col; direct on 1x1 layers) on the I2_S weight"),
    ("i8_madd1_ms", "madd@TL1", ".2f", "the same kernel given the TL1 weight (converted to I2_S on every call)"),
    ("i8_lut1_ms", "LUT TL1", ".2f", 'algorithm="lut" on the TL1 weight (tables of weight pairs)'),
    ("i8_lut2_ms", "LUT TL2", ".2f", 'algorithm="lut" on the TL2 weight (tables of weight triples)'),
    ("lut_speedup", "madd/LUT", ".2f", "madd / the faster LUT time (above 1: a lookup-table kernel wins)"),
    ("kernel_tl1", "kernel TL1", "s", "algorithm:kernel the planner runs for act_bits=8 on the TL1 weight"),
]

_RATE_TITLE = "the same layers: rates and memory"
_RATE_COLUMNS: list[tuple[str, ...]] = [
    *[c[:3] for c in _KEY],
    ("gflop", "GFLOP", ".3f", "2*N*O*C*kH*kW*H_out*W_out / 1e9 of one call"),
    ("ours_f32_gflops", "f32 GF/s", ".1f", "ours f32: GFLOP per second"),
    ("f32_of_peak", "f32 %pk", ".0%", "... as a fraction of thr x one core's float32 peak (measured at the start)"),
    ("ours_i8_gflops", "i8 GOP/s", ".1f", "ours i8: giga operations per second"),
    ("i8_of_peak", "i8 %pk", ".0%", "... as a fraction of thr x one core's int8 peak"),
    ("mem_extra_mb", "mem MB", ".2f", "peak extra resident MB of our call (fresh process; - with --conv-no-mem)"),
    ("base_mb", "base MB", ".2f", "input + output + packed weight MB"),
    ("mem_ratio", "mem/base", ".2f", "mem MB / base MB"),
]

_DW_TITLE = "depthwise conv2d_quantized (groups = C) vs PyTorch (median ms of the timed calls; range = min-max ms)"
_DW_COLUMNS: list[tuple[str, ...]] = [
    ("layer", "layer", "s", "depthwise layer (kernel[/stride], channels @ input height = width), padding k // 2"),
    ("n", "N", "d", "batch size"),
    ("threads", "thr", "d", "threads, the same for every library"),
    ("torch_f32_ms", "torch f32", ".3f", "F.conv2d(groups=C) in float32 on the dequantized weight, ms"),
    ("torch_f32_spread", "range", "s", "min-max ms of the timed calls, next to each median"),
    ("ours_f32_ms", "ours f32", ".3f", "conv2d_quantized(groups=C, act_bits=None), ms"),
    ("ours_f32_spread", "range", "s", ""),
    ("ratio_f32", "f32 ratio", ".2f", "ours f32 / torch f32 (below 1: ours is faster)"),
    ("torch_i8_ms", "torch i8", ".3f", "torch.ao quantized conv2d with groups=C: quint8 input, qint8 weight, ms"),
    ("torch_i8_spread", "range", "s", ""),
    ("ours_i8_ms", "ours i8", ".3f", "conv2d_quantized(groups=C, act_bits=8), ms"),
    ("ours_i8_spread", "range", "s", ""),
    ("ratio_i8", "i8 ratio", ".2f", "ours i8 / torch i8 (below 1: ours is faster)"),
    ("ratio_i8_f32", "i8/t f32", ".2f", "ours i8 / torch f32"),
    ("ours_f32_gflops", "f32 GF/s", ".1f", "ours f32: 2*N*C*k*k*H_out*W_out / 1e9 per second"),
    ("kernel_f32", "kernel f32", "s", "algorithm:kernel of act_bits=None"),
    ("kernel_i8", "kernel i8", "s", "... and of act_bits=8"),
]

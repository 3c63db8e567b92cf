"""``bench families``: every kernel family of every op, timed, and the one dispatch picks.

For each op of ``cpu_features()["kernels"]`` and each family it may run here
(``cpu_features()["kernel_families"]``: the CPU, the build and
``BITNET_GO_DISABLE`` allow it), representative calls through the public API
are timed in a fresh process per family: the library reads
``BITNET_GO_DISABLE`` and ``BITNET_GO_DISPATCH`` once at start-up, so the
child runs with ``BITNET_GO_DISPATCH=best-first`` and every family above the
one timed switched off (``BITNET_GO_DISABLE``, added to this process's own
setting); it checks that each op it times runs that family.

Workloads per op (``--families-quick``: smaller ones, for the test):

- ``quantize_i2s``: ``quantize_i2s`` of 16M floats, and of 16M bfloat16 values as
  ``bitnet-go convert`` quantizes a bf16 checkpoint's weight (one scale, read as bf16);
- ``quantize_tq``: ``quantize_tq2_0`` of 16M floats (one row of 16M);
- ``quant_quantize`` / ``quant_dequantize``: ``quantize(x, "int8", ...)`` per
  tensor and its ``dequantize()``, 16M;
- ``quant_minmax`` / ``quant_histogram``: ``MinMaxObserver`` and
  ``HistogramObserver`` ``update`` on 16M floats;
- ``conv_gemm``: the ResNet rows of the conv suite that the AVX-512 speed
  issue measured (3x3 64@56 N=1, 3x3 128@28 N=8, 1x1 256->64 @56 N=1,
  3x3 256@14 N=1, 3x3 512@7 N=8), float32 activations, ``algorithm="im2col"``
  (the op's GEMM; ``auto`` runs ``conv_directf`` on these layers and int8
  runs ``conv_i8``);
- ``conv_i8``: ``act_bits=8`` on the conv suite's ResNet layers that run the
  int8 implicit GEMM, at N = 1 and 8, and the stem (:data:`CONV_I8_ROWS`);
- ``conv_directf``: ``conv_gemm``'s layers and the 7x7/2 stem (3->64 @224
  N=1) with float32 activations (the implicit float32 kernel's layers);
- ``conv_dw``: depthwise layers (groups = C) of ``bench conv --conv-depthwise``
  at N = 1 and 8, float32 and int8 activations (:data:`DW_ROWS`);
- ``conv_lut``: ``algorithm="lut"`` on the conv suite's GEMV-like 1x1 layers,
  TL1 and TL2 weights;
- ``qelem``: the quantized ``add`` of two uint8 tensors (``bitnet_go._qelem``), 16M;
- ``cast_bf16``: bfloat16 bits widened to float32 (``_core.ops.cast``, the converter's widening);
- ``cast_f16``: bfloat16 bits rounded to float16 (``_core.ops.cast``, the converter's
  embedding and output tensors);
- ``qlinear_dot``: ``bitnet_go.functional`` ``linear`` (uint8 x int8 per
  channel) on LLM shapes at 1, 8 and 64 rows and ``conv2d`` on 3x3 64@56 and
  3x3 256@14 (:data:`QLINEAR_ROWS`);
- ``linear_gemv``: ``act_bits=8`` linear layers (1x1 layers on (N, k, 1, 1))
  of ``bench linear``: 4096x4096 and BitNet-2B's 2560x6912 at N = 1 and 8
  (quick: 2048x2048 at N = 1 and 8: smaller layers time the Python call
  more than the kernels).

The families run in rounds (``--families-rounds``, the order rotated each
round), each workload ``--repeat`` calls a round (fewer for a call over
``--families-max-s`` seconds). Reported per workload: the median over the
rounds of each round's median ms, with the spread (the range of the round
medians over their median; the calls' quartile range with one round), the
fastest family and the dispatcher's pick; per op: the geometric mean over
its workloads of each family's ms, the fastest family by that score, the
pick (``cpu_features()["kernels"]`` of this process), ``pick/best`` and
``ok``: the pick within ``TOLERANCE`` (10%) of the best.

Example:
    $ nice -n -10 python -m bitnet_go bench families --threads 2 --families-rounds 5
    $ python -m bitnet_go bench --families --families-quick --threads 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._common import Table, cli_type, parse_size, parse_threads, positive_int, progress

FAMILIES = ("avx512vnni", "avx512", "avx2", "generic")
"""Every kernel family, best first (the order ``BITNET_GO_DISABLE`` is written against)."""

TOLERANCE = 0.10
"""The pick's score may be at most this much above the best family's."""

CONV_ROWS: list[tuple[str, int, int, int, int, int, int, int]] = [
    # name, C, O, k, stride, padding, H (= W), N
    ("conv3x3 64->64 @56", 64, 64, 3, 1, 1, 56, 1),
    ("conv3x3 128->128 @28", 128, 128, 3, 1, 1, 28, 8),
    ("conv1x1 256->64 @56", 256, 64, 1, 1, 0, 56, 1),
    ("conv3x3 256->256 @14", 256, 256, 3, 1, 1, 14, 1),
    ("conv3x3 512->512 @7", 512, 512, 3, 1, 1, 7, 8),
]
"""conv_gemm's layers: the ResNet rows of the AVX-512 speed issue (the conv suite's layers)."""

QUICK_CONV_ROWS: list[tuple[str, int, int, int, int, int, int, int]] = [
    ("conv3x3 64->64 @56", 64, 64, 3, 1, 1, 56, 1),
    ("conv1x1 256->64 @56", 256, 64, 1, 1, 0, 56, 1),
    ("conv3x3 256->256 @14", 256, 256, 3, 1, 1, 14, 1),
]

CONV_I8_ROWS: list[tuple[str, int, int, int, int, int, int, int]] = [
    ("conv3x3 64->64 @56", 64, 64, 3, 1, 1, 56, 1),
    ("conv3x3 64->64 @56", 64, 64, 3, 1, 1, 56, 8),
    ("conv3x3 128->128 @28", 128, 128, 3, 1, 1, 28, 8),
    ("conv3x3 256->256 @14", 256, 256, 3, 1, 1, 14, 8),
    ("conv3x3 512->512 @7", 512, 512, 3, 1, 1, 7, 8),
    ("conv1x1 256->64 @56", 256, 64, 1, 1, 0, 56, 8),
    ("conv1x1 64->256 @56", 64, 256, 1, 1, 0, 56, 8),
    ("stem7x7/2 3->64 @224", 3, 64, 7, 2, 3, 224, 1),
]
"""conv_i8's layers: the conv suite's rows of the int8 implicit GEMM, ``act_bits=8``."""

QUICK_CONV_I8_ROWS: list[tuple[str, int, int, int, int, int, int, int]] = [
    ("conv3x3 64->64 @56", 64, 64, 3, 1, 1, 56, 1),
    ("conv3x3 128->128 @28", 128, 128, 3, 1, 1, 28, 2),
]

DW_ROWS: list[tuple[str, int, int, int, int, int]] = [
    ("dw3x3 32 @112", 32, 3, 1, 112, 1),
    ("dw3x3/2 96 @112", 96, 3, 2, 112, 1),
    ("dw3x3 144 @56", 144, 3, 1, 56, 8),
    ("dw3x3 576 @14", 576, 3, 1, 14, 8),
    ("dw3x3 960 @7", 960, 3, 1, 7, 8),
    ("dw5x5 240 @14", 240, 5, 1, 14, 1),
]
"""conv_dw's layers: (name, C, k, stride, H = W, N), groups = C, padding k // 2."""

QUICK_DW_ROWS: list[tuple[str, int, int, int, int, int]] = [("dw3x3 32 @28", 32, 3, 1, 28, 1)]

LUT_ROWS: list[tuple[str, int, int, int, int, int, int, int]] = [
    ("gemv1x1 4096->4096 @1", 4096, 4096, 1, 1, 0, 1, 1),
    ("gemv1x1 4096->4096 @4", 4096, 4096, 1, 1, 0, 4, 1),
    ("gemv1x1 1024->1024 @1", 1024, 1024, 1, 1, 0, 1, 1),
]
"""conv_lut's layers: the conv suite's GEMV-like 1x1 layers."""

QUICK_LUT_ROWS = LUT_ROWS[1:2]
"""conv_lut's quick layer: 4x4 pixels, where the LUT kernels do most of the call's work (on one pixel the
call's weight handling, common to every family, dominates: avx2 and generic came within 10-30% of each other
there and the order flipped between runs, while 4x4 separates them 5-10x)."""

QLINEAR_ROWS: list[tuple[str, int, int, int, int]] = [
    ("linear 4096x4096", 4096, 4096, 1, 1),
    ("linear 11008x4096", 11008, 4096, 8, 1),
    ("linear 4096x4096", 4096, 4096, 64, 1),
    ("conv3x3 64->64 @56", 64, 64, 3, 56),
    ("conv3x3 256->256 @14", 256, 256, 3, 14),
]
"""qlinear_dot's workloads: (name, out, in, rows or kernel size, 1 or image size): linear
(out x in, rows) when the last value is 1, else conv2d (in -> out channels, kernel, image)."""

QUICK_QLINEAR_ROWS: list[tuple[str, int, int, int, int]] = [
    ("linear 64x96", 64, 96, 8, 1),
    ("conv3x3 8->8 @12", 8, 8, 3, 12),
]


LINEAR_ROWS: list[tuple[str, int, int, int, int, int, int, int]] = [
    ("linear 4096x4096 N=1", 4096, 4096, 1, 1, 0, 1, 1),
    ("linear 4096x4096 N=8", 4096, 4096, 1, 1, 0, 1, 8),
    ("linear 2560x6912 N=1", 6912, 2560, 1, 1, 0, 1, 1),
    ("linear 2560x6912 N=8", 6912, 2560, 1, 1, 0, 1, 8),
]
"""linear_gemv's layers: ``bench linear``'s shapes (rows x k) as 1x1 layers, int8 activations."""

QUICK_LINEAR_ROWS: list[tuple[str, int, int, int, int, int, int, int]] = [
    ("linear 2048x2048 N=1", 2048, 2048, 1, 1, 0, 1, 1),
    ("linear 2048x2048 N=8", 2048, 2048, 1, 1, 0, 1, 8),
]


QUICK: dict[str, object] = {
    "families_quick": True,
    "families_rounds": 1,
    "families_ops": "quantize_i2s",
    "families_size": "1M",
}
"""``bench --quick``: this suite's options for a few seconds on tiny inputs."""


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """Options of the families suite."""
    g.add_argument("--families-ops", default="", help="comma-separated ops to time (default: every registered op)")
    g.add_argument("--families-rounds", type=positive_int, default=3, help="rounds over the families (default 3)")
    g.add_argument(
        "--families-size",
        type=cli_type(parse_size),
        default=None,
        help="elements of the element-wise ops' input (default 16M, 4M with quick)",
    )
    g.add_argument("--families-quick", action="store_true", help="smaller workloads (4M elements, fewer layers)")
    g.add_argument(
        "--families-max-s", type=float, default=2.0, help="fewer calls where one takes longer than this / --repeat"
    )


def selected_ops(args: argparse.Namespace) -> list[str]:
    """The ops ``--families-ops`` names ([]: every registered op); ValueError for an op not registered.

    Example:
        >>> import argparse
        >>> selected_ops(argparse.Namespace(families_ops="quantize_i2s")), selected_ops(argparse.Namespace())
        (['quantize_i2s'], [])
        >>> selected_ops(argparse.Namespace(families_ops="nosuch"))
        Traceback (most recent call last):
        ValueError: --families-ops: unknown op 'nosuch' (registered: ...)
    """
    import bitnet_go

    ops = [op.strip() for op in (getattr(args, "families_ops", "") or "").split(",") if op.strip()]
    if not ops:
        return []
    registered = sorted(bitnet_go.cpu_features()["kernels"])
    for op in ops:
        if op not in registered:
            raise ValueError(f"--families-ops: unknown op {op!r} (registered: {', '.join(registered)})")
    return ops


def check_args(args: argparse.Namespace) -> None:
    """Refuse (ValueError) a ``--families-ops`` op that is not registered (see :func:`selected_ops`)."""
    selected_ops(args)


def workloads(op: str, quick: bool, size: int) -> list[dict[str, Any]]:
    """The calls that time ``op``: one dict per workload (``name`` and what the child builds).

    Example:
        >>> [w["name"] for w in workloads("quantize_i2s", False, 1 << 20)]
        ['quantize_i2s 1M', 'quantize_i2s bfloat16 1M (convert)']
        >>> workloads("no_such_op", False, 1)
        []
    """
    label = f"{size >> 20}M" if size % (1 << 20) == 0 else str(size)
    simple = {
        "quantize_i2s": f"quantize_i2s {label}",
        "quantize_tq": f"quantize_tq2_0 {label}",
        "quant_quantize": f"quantize int8 per tensor {label}",
        "quant_dequantize": f"dequantize int8 per tensor {label}",
        "quant_minmax": f"MinMaxObserver.update {label}",
        "quant_histogram": f"HistogramObserver.update {label}",
        "qelem": f"quantized add uint8 {label}",
        "cast_bf16": f"cast bfloat16 -> float32 {label}",
        "cast_f16": f"cast bfloat16 -> float16 {label}",
    }
    out: list[dict[str, Any]] = []
    if op in simple:
        out.append({"name": simple[op], "op": op, "n": size})
        if op == "quantize_i2s":
            out.append({"name": f"quantize_i2s bfloat16 {label} (convert)", "op": op, "n": size, "bf16": True})
        return out
    if op == "conv_gemm":
        for name, c, o, k, s, p, h, n in QUICK_CONV_ROWS if quick else CONV_ROWS:
            layer = dict(c=c, o=o, k=k, stride=s, padding=p, h=h, n=n)
            out.append({"name": f"{name} N={n} float32 im2col", "op": op, "act_bits": None, "qtype": "i2_s", **layer})
    elif op == "conv_i8":
        for name, c, o, k, s, p, h, n in QUICK_CONV_I8_ROWS if quick else CONV_I8_ROWS:
            layer = dict(c=c, o=o, k=k, stride=s, padding=p, h=h, n=n)
            out.append({"name": f"{name} N={n} int8", "op": op, "act_bits": 8, "qtype": "i2_s", **layer})
    elif op == "conv_directf":
        stem = [] if quick else [("stem7x7/2 3->64 @224", 3, 64, 7, 2, 3, 224, 1)]
        for name, c, o, k, s, p, h, n in (QUICK_CONV_ROWS if quick else CONV_ROWS) + stem:
            layer = dict(c=c, o=o, k=k, stride=s, padding=p, h=h, n=n)
            out.append({"name": f"{name} N={n} float32", "op": op, "act_bits": None, "qtype": "i2_s", **layer})
    elif op == "conv_dw":
        for name, c, k, s, h, n in QUICK_DW_ROWS if quick else DW_ROWS:
            layer = dict(c=c, o=c, k=k, stride=s, padding=k // 2, h=h, n=n, groups=c)
            for bits, label in ((None, "float32"), (8, "int8")):
                out.append({"name": f"{name} N={n} {label}", "op": op, "act_bits": bits, "qtype": "i2_s", **layer})
    elif op == "conv_lut":
        for name, c, o, k, s, p, h, n in QUICK_LUT_ROWS if quick else LUT_ROWS:
            for qt in ("tl1", "tl2"):
                layer = dict(c=c, o=o, k=k, stride=s, padding=p, h=h, n=n)
                out.append({"name": f"{name} lut {qt}", "op": op, "act_bits": 8, "qtype": qt, **layer})
    elif op == "qlinear_dot":
        for name, o, i, r, h in QUICK_QLINEAR_ROWS if quick else QLINEAR_ROWS:
            label = f"{name} N={r}" if h == 1 else name
            out.append({"name": label, "op": op, "o": o, "i": i, "r": r, "h": h})
    elif op == "linear_gemv":
        for name, c, o, k, s, p, h, n in QUICK_LINEAR_ROWS if quick else LINEAR_ROWS:
            layer = dict(c=c, o=o, k=k, stride=s, padding=p, h=h, n=n)
            out.append({"name": name, "op": op, "act_bits": 8, "qtype": "i2_s", **layer})
    return out


def _build(w: dict[str, Any]) -> Callable[[], object]:
    """A closure running workload ``w`` through the public API (in the child)."""
    import numpy as np

    import bitnet_go
    from bitnet_go import quantization as bq

    rng = np.random.default_rng(0)
    op = w["op"]
    if op == "qelem":
        from bitnet_go import _qelem

        qa, qb = (bitnet_go.quantize(rng.standard_normal(w["n"], dtype=np.float32), "uint8") for _ in range(2))
        return lambda: _qelem.add(qa, qb, scale=0.05, zero_point=128)
    if op in ("cast_bf16", "cast_f16"):
        from bitnet_go._core.ops import cast

        bits = rng.integers(0, 1 << 16, w["n"], dtype=np.uint16)
        return lambda: cast(bits, "bfloat16", "float32" if op == "cast_bf16" else "float16")
    if op in ("quantize_i2s", "quantize_tq", "quant_quantize", "quant_dequantize", "quant_minmax", "quant_histogram"):
        x = rng.standard_normal(w["n"], dtype=np.float32)
        if op == "quantize_i2s" and w.get("bf16"):
            from bitnet_go.convert._convert import _quantize_bf16

            bits = np.ascontiguousarray((x.view(np.uint32) >> 16).astype(np.uint16))
            return lambda: _quantize_bf16(bits, None, "absmean")
        if op == "quantize_i2s":
            return lambda: bitnet_go.quantize_i2s(x)
        if op == "quantize_tq":
            return lambda: bitnet_go.quantize_tq2_0(x)
        if op == "quant_minmax":
            return lambda: bq.MinMaxObserver().update(x)
        if op == "quant_histogram":
            return lambda: bq.HistogramObserver().update(x)
        scale, zp = bitnet_go.choose_qparams(float(x.min()), float(x.max()), "int8")
        if op == "quant_quantize":
            return lambda: bitnet_go.quantize(x, "int8", scale=scale, zero_point=zp)
        q = bitnet_go.quantize(x, "int8", scale=scale, zero_point=zp)
        return q.dequantize
    if op == "qlinear_dot":
        from bitnet_go import functional as F
        from bitnet_go.bench.qops import _codes, _weight

        if w["h"] == 1:
            lw, lx = _weight(rng, (w["o"], w["i"])), _codes(rng, (w["r"], w["i"]), "uint8")
            return lambda: F.linear(lx, lw, scale=0.5, zero_point=128)
        r = w["r"]
        cw, cx = _weight(rng, (w["o"], w["i"], r, r)), _codes(rng, (1, w["i"], w["h"], w["h"]), "uint8")
        return lambda: F.conv2d(cx, cw, padding=r // 2, scale=0.5, zero_point=128)
    c, o, k, h, n = w["c"], w["o"], w["k"], w["h"], w["n"]
    groups = w.get("groups", 1)
    wt = bitnet_go.quantize_conv_weight(rng.standard_normal((o, c // groups, k, k), dtype=np.float32))
    if w["qtype"] != "i2_s":
        wt = wt.to(w["qtype"])
    x = rng.standard_normal((n, c, h, h), dtype=np.float32)
    kw: dict[str, Any] = dict(stride=w["stride"], padding=w["padding"], act_bits=w["act_bits"], groups=groups)
    if op == "conv_lut":
        kw["algorithm"] = "lut"
    elif op == "conv_gemm":
        kw["algorithm"] = "im2col"
    return lambda: bitnet_go.conv2d_quantized(x, wt, **kw)


def _child(cfg: dict[str, Any]) -> dict[str, Any]:
    """Time ``cfg``'s workloads in this process (one family); returns the calls' seconds."""
    import bitnet_go

    feats = bitnet_go.cpu_features()
    wrong = {op: feats["kernels"][op] for op in cfg["ops"] if feats["kernels"][op] != cfg["family"]}
    if wrong:
        off = os.environ.get("BITNET_GO_DISABLE")
        raise RuntimeError(f"family {cfg['family']}: ops run {wrong} (BITNET_GO_DISABLE={off})")
    out: dict[str, Any] = {"family": cfg["family"], "kernels": feats["kernels"], "times": {}}
    for w in cfg["workloads"]:
        fn = _build(w)
        for th in cfg["threads"]:
            bitnet_go.set_num_threads(th)
            t0 = time.perf_counter()
            fn()  # warm-up: code, caches, the weight-layout cache
            first = time.perf_counter() - t0
            calls = max(2, min(cfg["repeat"], int(cfg["max_s"] / max(first, 1e-9))))
            ts = []
            for _ in range(calls):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            out["times"][f"{w['name']}|{th}"] = ts
    return out


def _disable_above(family: str, already: list[str]) -> str:
    """The ``BITNET_GO_DISABLE`` setting that leaves ``family`` the best one (with ``already`` off too).

    Example:
        >>> _disable_above("avx2", [])
        'avx512vnni,avx512'
        >>> _disable_above("generic", ["avx512"])
        'avx512,all'
    """
    if family == "generic":
        return ",".join([*already, "all"])
    above = list(FAMILIES[: FAMILIES.index(family)])
    return ",".join(dict.fromkeys([*already, *above]))


def _run_child(family: str, cfg: dict[str, Any], disabled: list[str]) -> dict[str, Any]:
    """Run ``_child`` in a fresh process where ``family`` is the best family."""
    import bitnet_go

    env = dict(os.environ, BITNET_GO_DISABLE=_disable_above(family, disabled), BITNET_GO_DISPATCH="best-first")
    root = str(Path(bitnet_go.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    code = (
        "import json, sys\nfrom bitnet_go.bench.families import _child\n"
        "print(json.dumps(_child(json.loads(sys.stdin.read()))))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(dict(cfg, family=family)),
        env=env,
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise RuntimeError(f"bench families: the {family} child failed:\n{res.stderr[-4000:]}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def _summary(round_medians: list[float], calls: list[float]) -> tuple[float, float]:
    """Median ms and relative spread: the range of the round medians, or the calls' quartile range."""
    med = statistics.median(round_medians)
    if len(round_medians) > 1:
        spread = (max(round_medians) - min(round_medians)) / med
    elif len(calls) >= 4:
        q = statistics.quantiles(calls, n=4)
        spread = (q[2] - q[0]) / med
    else:
        spread = (max(calls) - min(calls)) / med
    return med * 1e3, spread


def measure(
    ops: list[str] | None = None,
    *,
    threads: list[int],
    rounds: int = 3,
    repeat: int = 7,
    quick: bool = False,
    size: int = 16 << 20,
    max_s: float = 2.0,
    verbose: bool = True,
) -> list[dict[str, Any]]:
    """Time every family of every op (``ops``: all registered); the rows ``run`` prints.

    Rows of ``"row": "workload"`` hold ``<family>_ms`` and ``<family>_spread``
    per workload and thread count; rows of ``"row": "op"`` the per-op verdict:
    ``<family>_score`` (geometric mean ms), ``fastest``, ``pick``,
    ``pick_over_best`` and ``ok``.
    """
    import bitnet_go

    feats = bitnet_go.cpu_features()
    ops = [op for op in (ops or sorted(feats["kernels"])) if op in feats["kernels"]]
    fams_of = {op: feats["kernel_families"][op] for op in ops}
    wls = {op: workloads(op, quick, size) for op in ops}
    ops = [op for op in ops if wls[op]]
    samples: dict[tuple[str, str, str, int], list[list[float]]] = {}
    order = [f for f in FAMILIES if any(f in fams_of[op] for op in ops)]
    step, total = 0, max(1, rounds) * len(order)
    for r in range(max(1, rounds)):
        rot = order[r % len(order) :] + order[: r % len(order)]
        for fam in rot:
            step += 1
            fops = [op for op in ops if fam in fams_of[op]]
            cfg = {
                "ops": fops,
                "workloads": [w for op in fops for w in wls[op]],
                "threads": threads,
                "repeat": repeat,
                "max_s": max_s,
            }
            if verbose:
                progress(f"[{step}/{total}] round {r + 1}/{rounds}: family {fam}, ops {', '.join(fops)} ...")
            got = _run_child(fam, cfg, feats["disabled"])
            for op in fops:
                for w in wls[op]:
                    for th in threads:
                        samples.setdefault((op, w["name"], fam, th), []).append(got["times"][f"{w['name']}|{th}"])
    rows: list[dict[str, Any]] = []
    for op in ops:
        pick = feats["kernels"][op]
        scores: dict[str, list[float]] = {f: [] for f in fams_of[op]}
        for w in wls[op]:
            for th in threads:
                row: dict[str, Any] = {"row": "workload", "op": op, "workload": w["name"], "threads": th, "pick": pick}
                for fam in fams_of[op]:
                    per_round = samples[(op, w["name"], fam, th)]
                    ms, spread = _summary(
                        [statistics.median(ts) for ts in per_round], [t for ts in per_round for t in ts]
                    )
                    row[f"{fam}_ms"], row[f"{fam}_spread"] = ms, spread
                    row[fam] = f"{ms:.3f} ±{spread * 100:.0f}%"
                    scores[fam].append(ms)
                best = min(fams_of[op], key=lambda f: row[f"{f}_ms"])
                row["fastest"] = best
                row["pick_over_best"] = row[f"{pick}_ms"] / row[f"{best}_ms"] if pick in fams_of[op] else None
                rows.append(row)
        geo = {f: math.exp(statistics.fmean(math.log(v) for v in vs)) for f, vs in scores.items()}
        best = min(geo, key=lambda f: geo[f])
        over = geo[pick] / geo[best] if pick in geo else None
        summary: dict[str, Any] = {
            "row": "op",
            "op": op,
            "families": fams_of[op],
            "fastest": best,
            "pick": pick,
            "pick_over_best": over,
            "ok": over is not None and over <= 1 + TOLERANCE,
            "reason": feats["kernel_reasons"][op],
        }
        for f, v in geo.items():
            summary[f"{f}_score"] = v
            summary[f] = f"{v:.3f} ({v / geo[best]:.2f}x)"
        rows.append(summary)
    return rows


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the suite and print its tables; returns the rows."""
    import bitnet_go

    feats = bitnet_go.cpu_features()
    ops = selected_ops(args)
    quick = getattr(args, "families_quick", False)
    cid = feats["cpu_id"]
    print(
        f"bench families: {feats['brand']} ({cid['vendor']} family {cid['family']} model {cid['model']}), "
        f"kind {feats['cpu_kind']}, dispatch {feats['dispatch']}, disabled {feats['disabled'] or 'none'}"
    )
    rows = measure(
        ops or None,
        threads=parse_threads(args.threads),
        rounds=getattr(args, "families_rounds", 3),
        repeat=max(1, args.repeat),
        quick=quick,
        size=parse_size(getattr(args, "families_size", None) or ("4M" if quick else "16M")),
        max_s=getattr(args, "families_max_s", 2.0),
    )
    if rows:
        progress("", end=True)
    verdict = [
        ("fastest", "fastest", "s", "the family with the lowest time"),
        ("pick", "pick", "s", "the family this CPU runs by default (cpu_features()['kernels'])"),
        ("pick_over_best", "pick/best", ".2f", "the pick's time / the fastest's (1.00: the pick is the fastest)"),
    ]
    wt = Table(
        "kernel families per workload (median ms over rounds ±spread)",
        [
            ("op", "op", "s", "the registered op"),
            ("workload", "workload", "s", "its input"),
            ("threads", "thr", "d", "threads"),
            *[(f, f"{f} ms", "s") for f in FAMILIES],
            *verdict,
        ],
        notes=[
            "<family> ms: the median over the rounds of each round's median, ± the range of the round medians",
            "over their median (the calls' quartile range with one round); - where the family has no such kernel",
        ],
    )
    wt.rows = [r for r in rows if r["row"] == "workload"]
    wt.done()
    ot = Table(
        f"kernel families per op (geomean ms over workloads, x the best); pick ok within {TOLERANCE:.0%} of the best",
        [
            ("op", "op", "s"),
            *[(f, f, "s") for f in FAMILIES],
            *[c[:3] for c in verdict],
            ("ok", "ok", "", f"pick/best <= {1 + TOLERANCE:.2f}"),
        ],
        notes=["<family>: geometric mean ms over the op's workloads (x the fastest family's)"],
    )
    ot.rows = [r for r in rows if r["row"] == "op"]
    ot.done()
    for r in ot.rows:
        print(f"  {r['op']}: {r['reason']}")
    return rows

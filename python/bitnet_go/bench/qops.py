"""``python -m bitnet_go bench qops``: bitnet_go.functional's linear and conv2d against torch's fbgemm ops.

Per shape and thread count: torch's quantized op (fbgemm engine, prepacked weight), ours on the
same codes (uint8 activations, int8 per-channel weights), ours with a ternary weight, and torch
float32 on the dequantized operands. Shapes: the ResNet layers of the conv suite
(:data:`bitnet_go.bench.conv.LAYERS`, batch 1) and LLM linear shapes at batch 1, 8, 64. The
geometric means over the shapes close the table. A second table times the element-wise ops
(:mod:`bitnet_go.bench.qops_elem`). Each block of timed calls starts after a pause
(``_common.PAUSE_S``), so that the previous library's spinning threads sleep first.

Example::

    $ python -m bitnet_go bench qops --qops-quick --repeat 1
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

import numpy as np

import bitnet_go
from bitnet_go import functional as F

from ._common import (
    Table,
    cli_type,
    engine,
    geomean,
    parse_batches,
    parse_threads,
    restored_threads,
    time_into,
    torch_or_none,
)
from .conv import LAYERS
from .qops_elem import add_arguments as add_elem_arguments
from .qops_elem import check_args as check_elem_args
from .qops_elem import run_elementwise

LINEAR_SHAPES: list[tuple[int, int]] = [(4096, 4096), (11008, 4096), (4096, 11008)]
"""(out_features, in_features) of the LLM linear layers."""

QUICK_LINEAR: list[tuple[int, int]] = [(64, 96)]
QUICK_CONV: list[tuple[str, int, int, int, int, int, int]] = [("quick3x3 8->8 @12", 8, 8, 3, 1, 1, 12)]

QUICK: dict[str, object] = {"qops_quick": True, "qelem_sizes": "4K"}
"""``bench --quick``: this suite's options for a few seconds on tiny inputs."""


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """Options of the qops suite."""
    g.add_argument("--qops-quick", action="store_true", help="tiny shapes, batch 1 unless --qops-batches is given")
    g.add_argument(
        "--qops-batches",
        type=cli_type(parse_qops_batches),
        default=None,
        help="linear batch sizes (default 1,8,64, 1 with --qops-quick; 'none' skips the linear layers)",
    )
    g.add_argument("--qops-no-conv", action="store_true", help="skip the conv layers")
    add_elem_arguments(g)


def check_args(args: argparse.Namespace) -> None:
    """Refuse (ValueError, ``--option: why``) what ``--qelem-ops`` names that is not an element-wise op."""
    check_elem_args(args)


def parse_qops_batches(text: str) -> list[int]:
    """The linear batch sizes of ``--qops-batches``: positive counts, or none for ``none``.

    Example:
        >>> parse_qops_batches("1,8"), parse_qops_batches("none")
        ([1, 8], [])
        >>> parse_qops_batches("0")
        Traceback (most recent call last):
        ValueError: wants positive counts like 1,8,64 or 'none', got '0'
    """
    if text.strip().lower() == "none":
        return []
    try:
        return parse_batches(text)
    except ValueError:
        raise ValueError(f"wants positive counts like 1,8,64 or 'none', got {text!r}") from None


def _batches(text: str) -> list[int]:
    """:func:`parse_qops_batches`, refusing a bad value with SystemExit (``run`` given a hand-made namespace).

    Example:
        >>> _batches("1,8"), _batches("none")
        ([1, 8], [])
    """
    try:
        return parse_qops_batches(text)
    except ValueError as e:
        raise SystemExit(f"bench qops: --qops-batches {e}") from None


def _codes(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> bitnet_go.QuantizedTensor:
    lo, hi = (0, 256) if dtype == "uint8" else (-128, 128)
    zp = 128 if dtype == "uint8" else 0
    v = (rng.integers(lo, hi, shape).astype(np.float32) - zp) * 0.02
    return bitnet_go.quantize(v, dtype, scale=0.02, zero_point=zp)


def _weight(rng: np.random.Generator, shape: tuple[int, ...]) -> bitnet_go.QuantizedTensor:
    o = shape[0]
    v = rng.standard_normal(shape).astype(np.float32)
    s = (np.abs(v.reshape(o, -1)).max(axis=1) / 127).astype(np.float32)
    return bitnet_go.quantize(v, "int8", axis=0, scale=s, zero_point=np.zeros(o, np.int32))


def _torch_q(torch: Any, q: bitnet_go.QuantizedTensor) -> Any:  # noqa: ANN401
    codes = torch.from_numpy(q.int_repr())
    if q.axis is None:
        return torch._make_per_tensor_quantized_tensor(codes, float(q.scales[0]), int(q.zero_points[0]))
    return torch._make_per_channel_quantized_tensor(
        codes, torch.from_numpy(q.scales).double(), torch.from_numpy(q.zero_points.astype(np.int64)), q.axis
    )


def _ratios(row: dict[str, Any]) -> None:
    for key, a, b in (("vs_torch_i8", "torch_i8_ms", "ours_i8_ms"), ("vs_torch_f32", "torch_f32_ms", "ours_i8_ms"),
                      ("ternary_vs_i8", "ours_i8_ms", "ours_tern_ms")):  # fmt: skip
        if row.get(a) and row.get(b):
            row[key] = row[a] / row[b]


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the suite and print its table; returns the rows."""
    import warnings

    warnings.filterwarnings("ignore", message=".*quantized tensor creation.*")
    torch = torch_or_none()
    quick = getattr(args, "qops_quick", False)
    lin = QUICK_LINEAR if quick else LINEAR_SHAPES
    text = getattr(args, "qops_batches", None)
    batches = _batches(text) if text is not None else ([1] if quick else [1, 8, 64])
    convs = [] if getattr(args, "qops_no_conv", False) else (QUICK_CONV if quick else LAYERS)
    convs = [c for c in convs if not c[0].startswith("gemv")]
    threads = parse_threads(args.threads)
    repeat = max(1, args.repeat)
    rng = np.random.default_rng(0)
    table = Table(_TITLE, _COLUMNS, total=(len(lin) * len(batches) + len(convs)) * len(threads), notes=_NOTES)
    with restored_threads(torch), engine(torch, "fbgemm"):
        for o, k in lin:
            w = _weight(rng, (o, k))
            wt = bitnet_go.quantize_i2s(w.dequantize(), block_size=k)
            tw = _torch_q(torch, w) if torch else None
            packed = torch.ops.quantized.linear_prepack(tw, None) if torch else None
            wf = torch.from_numpy(w.dequantize()) if torch else None
            for n in batches:
                x = _codes(rng, (n, k), "uint8")
                tx = _torch_q(torch, x) if torch else None
                xf = torch.from_numpy(x.dequantize()) if torch else None
                for th in threads:
                    table.start(f"linear {o}x{k} N={n} thr={th}")
                    bitnet_go.set_num_threads(th)
                    row: dict[str, Any] = {"op": "linear", "shape": f"{o}x{k}", "n": n, "threads": th}
                    time_into(row, "ours_i8", partial(F.linear, x, w, scale=0.5, zero_point=128), repeat)
                    time_into(row, "ours_tern", partial(F.linear, x, wt, scale=0.5, zero_point=128), repeat)
                    if torch:
                        torch.set_num_threads(th)
                        time_into(row, "torch_i8", partial(torch.ops.quantized.linear, tx, packed, 0.5, 128), repeat)
                        time_into(row, "torch_f32", partial(torch.nn.functional.linear, xf, wf), repeat)
                    _ratios(row)
                    table.add(row)
        for name, c, o, kk, s, p, h in convs:
            w = _weight(rng, (o, c, kk, kk))
            wt = bitnet_go.quantize_i2s(w.dequantize(), block_size=c * kk * kk)
            x = _codes(rng, (1, c, h, h), "uint8")
            tw, tx = (_torch_q(torch, w), _torch_q(torch, x)) if torch else (None, None)
            tf = (torch.from_numpy(x.dequantize()), torch.from_numpy(w.dequantize())) if torch else None
            for th in threads:
                table.start(f"{name} thr={th}")
                bitnet_go.set_num_threads(th)
                row = {"op": "conv2d", "shape": name, "n": 1, "threads": th}
                for key, wq in (("ours_i8", w), ("ours_tern", wt)):
                    fn = partial(F.conv2d, x, wq, stride=s, padding=p, scale=0.5, zero_point=128)
                    time_into(row, key, fn, repeat)
                if torch:
                    torch.set_num_threads(th)
                    qconv = torch.ao.nn.quantized.functional.conv2d
                    time_into(row, "torch_i8", partial(qconv, tx, tw, None, s, p, scale=0.5, zero_point=128), repeat)
                    time_into(row, "torch_f32", partial(torch.nn.functional.conv2d, tf[0], tf[1], None, s, p), repeat)
                _ratios(row)
                table.add(row)
    rows = table.done()
    for th in threads:
        sub = [r for r in rows if r.get("threads") == th]
        parts = []
        for key in ("vs_torch_i8", "vs_torch_f32", "ternary_vs_i8"):
            vals = [r[key] for r in sub if r.get(key)]
            if vals:
                parts.append(f"{key} {geomean(vals):.2f}x")
        # the ternary target names linear ("they move a quarter of the bytes"): its rows apart
        vals = [r["ternary_vs_i8"] for r in sub if r.get("ternary_vs_i8") and r["op"] == "linear"]
        if vals and len(vals) < len(sub):
            parts.append(f"ternary_vs_i8 over the {len(vals)} linear rows {geomean(vals):.2f}x")
        print(f"geomean over {len(sub)} shapes, {th} thread(s): " + ", ".join(parts))
    return rows + run_elementwise(args)


_TITLE = "bitnet_go.functional vs torch fbgemm (quantized linear / conv2d)"
_COLUMNS: list[tuple[str, ...]] = [
    ("op", "op", "s", "linear (LLM shapes, out x in) or conv2d (ResNet layers, batch 1)"),
    ("shape", "shape", "s", ""),
    ("n", "N", "d", "batch (linear rows)"),
    ("threads", "thr", "d", "threads (ours and torch's)"),
    ("torch_i8_ms", "torch i8", ".3f", "torch.ops.quantized linear/conv2d, quint8 x qint8 per channel, fbgemm, ms"),
    ("torch_i8_spread", "range", "s", "min-max ms of the timed calls"),
    ("ours_i8_ms", "ours i8", ".3f", "bitnet_go.functional on the same codes, ms"),
    ("ours_i8_spread", "range", "s", ""),
    ("ours_tern_ms", "ours tern", ".3f", "bitnet_go.functional with a ternary (I2_S) weight, ms"),
    ("torch_f32_ms", "torch f32", ".3f", "torch float32 on the dequantized operands, ms"),
    ("vs_torch_i8", "x torch i8", ".2f", "torch i8 / ours i8 (above 1: ours is faster)"),
    ("vs_torch_f32", "x torch f32", ".2f", "torch f32 / ours i8"),
    ("ternary_vs_i8", "tern x i8", ".2f", "ours i8 / ours ternary"),
]
_NOTES = ["Times are medians; the machine may be shared, so ranges matter."]

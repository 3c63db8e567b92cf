"""The element-wise part of ``bench qops``: quantized add, add_relu, relu and requantize vs torch.

For each size (``--qelem-sizes``, uint8 codes, per tensor) and thread count, side by side in one
process with the same thread count for every library (torch's quantized engine ``fbgemm``):

- ours: ``bitnet_go._qelem.add`` / ``add_relu`` / ``relu`` / ``requantize`` on bitnet_go tensors;
- torch: ``torch.ops.quantized.add`` / ``add_relu``, ``torch.relu`` of a quantized tensor, and
  ``torch.quantize_per_tensor(q.dequantize(), ...)`` for requantize;
- ``torch.add`` of two float32 tensors of the same element count: the speed target's yardstick.

Each block of timed calls starts after a pause (``_common.PAUSE_S``), so that threads still
spinning after the previous library's calls (OpenMP's, ours) sleep before the next block: in one
run without it, our 2-thread add right after torch's float32 add took 0.39 ms, against 0.07-0.08.

Reported: median ms with the range (min-max of the timed calls), our bandwidth (bytes of codes
read and written: 3 per element for add, 2 for relu and requantize), ``torch.add``'s float32
bandwidth (12 bytes per element), our bandwidth as a fraction of it (target: >= 0.5 for add,
add_relu and relu), ``x torch`` (torch's quantized op ms / ours), ``x f32`` (``torch.add`` float32
ms / ours: the time ratio at equal element counts), and ``diff``: how many of our codes differ
from torch's (add: only where torch's scalar tail meets a rounding tie; see ``bitnet_go._qelem``).

Example:
    $ python -m bitnet_go bench qops --threads 1,2 --qelem-sizes 1M,16M
"""

from __future__ import annotations

import argparse
import warnings
from functools import partial
from typing import Any

import numpy as np

import bitnet_go
from bitnet_go import _qelem as qe
from bitnet_go._quantized import PlainTensor

from ._common import (
    Table,
    cli_type,
    engine,
    parse_names,
    parse_sizes,
    parse_threads,
    restored_threads,
    time_into,
    torch_or_none,
)

OPS = ("add", "add_relu", "relu", "requantize")
"""The element-wise ops, in table order."""

BYTES_PER_ELEMENT = {"add": 3, "add_relu": 3, "relu": 2, "requantize": 2}
"""Bytes of codes an op reads and writes per element."""

TARGET_OF_F32_ADD = 0.5
"""add, add_relu and relu: our bandwidth at least this fraction of torch.add's on float32."""


def add_arguments(parser: argparse._ActionsContainer) -> None:
    """Options of the element-wise part (``--qelem-*``)."""
    parser.add_argument(
        "--qelem-sizes", type=cli_type(parse_sizes), default="1M,16M", help="element counts (default 1M,16M)"
    )
    parser.add_argument("--qelem-ops", default=",".join(OPS), help="add,add_relu,relu,requantize (default all)")


def check_args(args: argparse.Namespace) -> None:
    """Refuse (ValueError, ``--qelem-ops: why``) an op not in :data:`OPS` (``run_elementwise``: SystemExit).

    Example:
        >>> import argparse
        >>> check_args(argparse.Namespace(qelem_ops="add,mul"))
        Traceback (most recent call last):
        ValueError: --qelem-ops: unknown element-wise op 'mul' (choose from add, add_relu, relu, requantize)
    """
    try:
        parse_names(args.qelem_ops, OPS, "element-wise op")
    except ValueError as e:
        raise ValueError(f"--qelem-ops: {e}") from None


def _codes(rng: np.random.Generator, n: int, scale: float, zp: int) -> PlainTensor:
    """A uint8 bitnet_go tensor of ``n`` random codes."""
    c = rng.integers(0, 256, n).astype(np.uint8)
    return PlainTensor._make("uint8", (n,), None, None, c, np.float32([scale]), np.int32([zp]))


def _torch_requantize(torch: Any, q: Any, scale: float, zp: int) -> Any:  # noqa: ANN401 (torch is optional)
    """torch's requantize: ``quantize_per_tensor(q.dequantize(), ...)``."""
    return torch.quantize_per_tensor(q.dequantize(), scale, zp, torch.quint8)


def run_elementwise(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the element-wise rows and print their table; returns the rows."""
    torch = torch_or_none()
    ops = [o.strip() for o in args.qelem_ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad or not ops:
        raise SystemExit(f"bench qops: unknown element-wise ops {bad}; known: {list(OPS)}")
    sizes, threads = parse_sizes(args.qelem_sizes), parse_threads(args.threads)
    table = Table(_TITLE, _COLUMNS, total=len(sizes) * len(threads) * len(ops), notes=_NOTES)
    rng = np.random.default_rng(0)
    sa, za, sb, zb, so, zo = 0.05, 128, 0.03, 100, 0.07, 120
    kernel = bitnet_go.cpu_features()["kernels"].get("qelem", "-")
    with restored_threads(torch), engine(torch, "fbgemm"):
        for n in sizes:
            qa, qb = _codes(rng, n, sa, za), _codes(rng, n, sb, zb)
            ours = {
                "add": partial(qe.add, qa, qb, scale=so, zero_point=zo),
                "add_relu": partial(qe.add_relu, qa, qb, scale=so, zero_point=zo),
                "relu": partial(qe.relu, qa),
                "requantize": partial(qe.requantize, qa, so, zo, "uint8"),
            }
            theirs: dict[str, Any] = {}
            if torch:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ta = torch._make_per_tensor_quantized_tensor(torch.from_numpy(qa.int_repr()), sa, za)
                    tb = torch._make_per_tensor_quantized_tensor(torch.from_numpy(qb.int_repr()), sb, zb)
                theirs = {
                    "add": partial(torch.ops.quantized.add, ta, tb, so, zo),
                    "add_relu": partial(torch.ops.quantized.add_relu, ta, tb, so, zo),
                    "relu": partial(torch.relu, ta),
                    "requantize": partial(_torch_requantize, torch, ta, so, zo),
                }
                fa, fb = torch.randn(n), torch.randn(n)
            for th in threads:
                bitnet_go.set_num_threads(th)
                f32: dict[str, Any] = {}  # torch.add float32's timings, the same in each op's row
                if torch:
                    torch.set_num_threads(th)
                    time_into(f32, "f32_add", partial(torch.add, fa, fb), args.repeat)
                for op in ops:
                    table.start(f"{op} uint8 n={n} thr={th}")
                    row: dict[str, Any] = {"op": op, "dtype": "uint8", "n": n, "threads": th, "kernel": kernel}
                    time_into(row, "ours", ours[op], args.repeat)
                    nbytes = BYTES_PER_ELEMENT[op] * n
                    row["ours_gbs"] = nbytes / (row["ours_ms"] * 1e6)
                    if torch:
                        time_into(row, "torch", theirs[op], args.repeat)
                        row["x_torch"] = row["torch_ms"] / row["ours_ms"]
                        row.update(f32)
                        row["f32_add_gbs"] = 12 * n / (row["f32_add_ms"] * 1e6)
                        row["of_f32_add"] = row["ours_gbs"] / row["f32_add_gbs"]
                        row["x_f32"] = row["f32_add_ms"] / row["ours_ms"]
                        got = ours[op]().int_repr().reshape(-1)
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            want = theirs[op]().int_repr().numpy().reshape(-1)
                        row["diff"] = int(np.count_nonzero(got != want))
                        if op != "requantize":
                            row["target_met"] = bool(row["of_f32_add"] >= TARGET_OF_F32_ADD)
                            row["target"] = "yes" if row["target_met"] else "no"
                    table.add(row)
    return table.done()


_TITLE = "quantized element-wise ops vs torch (median ms of the timed calls, range = their min-max)"
_COLUMNS = [
    ("op", "op", "s", "add, add_relu, relu, requantize (uint8 per tensor)"),
    ("n", "n", "d", "elements"),
    ("threads", "thr", "d", "threads, the same for every library"),
    ("ours_ms", "ours ms", ".3f", "bitnet_go._qelem (a new tensor each call)"),
    ("ours_spread", "range", "s", "min-max ms of the timed calls, next to each median"),
    ("torch_ms", "torch ms", ".3f", "torch.ops.quantized.add/add_relu, torch.relu, quantize_per_tensor(dequantize())"),
    ("torch_spread", "range", "s", ""),
    ("f32_add_ms", "f32 add ms", ".3f", "torch.add of two float32 tensors of n elements"),
    ("f32_add_spread", "range", "s", ""),
    ("ours_gbs", "ours GB/s", ".1f", "bytes of codes read and written per second (3 per element for add, 2 else)"),
    ("f32_add_gbs", "f32 GB/s", ".1f", "torch.add float32: 12 bytes per element"),
    ("of_f32_add", "of f32", ".2f", "our GB/s as a fraction of torch.add float32's"),
    ("x_f32", "x f32", ".2f", "torch.add float32 ms / ours ms (same element count)"),
    ("x_torch", "x torch", ".2f", "torch's quantized op ms / ours ms"),
    ("diff", "diff", "d", "codes that differ from torch's (add: torch's scalar tail at rounding ties)"),
    ("target", "target", "s", f"add, add_relu, relu: >= {TARGET_OF_F32_ADD} of torch.add float32's GB/s"),
    ("kernel", "kernel", "s", "the qelem kernel family that ran"),
]
_NOTES = ["torch runs with the fbgemm engine; the yardstick torch.add float32 is timed once per size and thread count"]

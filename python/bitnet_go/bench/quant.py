"""``bench quant``: int8/uint8/int4 quantize, dequantize and observers against torch and torchao.

For each thread count, side by side in one process with the same thread count
for every library (``torch.set_num_threads``; torch otherwise at its defaults,
quantized engine ``fbgemm``):

- quantize and dequantize, per tensor and per channel (axis 0 of a 2-D tensor,
  square-ish: 16M elements are 4096 x 4096), with scale and zero point given
  (chosen once from the tensor's range, affine, outside the timing):

  - ours: ``bitnet_go.quantize(x, dtype, scale=..., zero_point=..., axis=...)``
    and ``q.dequantize()``;
  - torch: ``torch.quantize_per_tensor`` / ``torch.quantize_per_channel`` and
    ``Tensor.dequantize()`` (int4 as ``torch.quint4x2`` with the zero point
    moved up by 8: the same bytes; torch has no per-channel ``quint4x2``);
  - torchao (when importable): ``quantize_affine`` / ``dequantize_affine``
    (int4 as int8 values in [-8, 7]: torchao does not pack them);
  - ``x.sum()`` on the same float32 tensor: one read, the bandwidth ceiling.

- observers over ``--quant-obs-size`` floats in ``--quant-obs-batches``
  batches (64M as 4 x 16M): a fresh observer, ``update`` on every batch, then
  ``calculate_qparams()``; ours (:mod:`bitnet_go.quantization`) against
  ``torch.ao.quantization``'s ``MinMaxObserver``, ``HistogramObserver``
  (2048 bins) and ``PerChannelMinMaxObserver`` (axis 0), all uint8 affine
  (their defaults).

Reported: median ms with the spread (min-max of the timed calls), GB/s of the
float32 data (4 bytes per element: read by quantize and the observers,
written by dequantize), the speed-ups ``x torch`` and ``x torchao`` (their time
over ours), our bandwidth as a fraction of ``sum()``'s, and whether the targets
are met (quantize/dequantize: >= 0.5 of ``sum()``'s bandwidth and >= 3x torch
and torchao; observers: >= 5x torch); a missed target names what missed.
``same`` says whether our integers equal torch's (torchao's where torch has no
such call), checked once per case outside the timing.

Example:
    $ python -m bitnet_go bench quant --threads 1,2 --json quant.json
    $ python -m bitnet_go bench quant --quant-sizes 64K --quant-obs-size 256K --repeat 2
"""

from __future__ import annotations

import argparse
import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np

import bitnet_go
from bitnet_go import quantization as bq

from ._common import (
    Table,
    cli_type,
    engine,
    median,
    parse_names,
    parse_size,
    parse_sizes,
    parse_threads,
    positive_int,
    restored_threads,
    time_into,
    timeit,
    torch_or_none,
)

DTYPES = ("int8", "uint8", "int4")
"""Element types of the quantize/dequantize part."""

QDQ_OPS = ("quantize", "dequantize", "dequantize(out=)")
"""The quantize/dequantize rows: ``dequantize(out=)`` writes into a buffer kept across calls (no
page faults: a new 64 MB array costs about as much to fault in as the dequantization); torch and
torchao allocate in both dequantize rows (they take no ``out``)."""

AoFns = tuple[Callable[..., Any], Callable[..., Any]]
"""torchao's ``(quantize_affine, dequantize_affine)``."""

TARGET_OF_SUM = 0.5
"""Quantize/dequantize: our bandwidth at least this fraction of ``sum()``'s."""
TARGET_X_TORCH = 3.0
"""Quantize/dequantize: at least this many times faster than torch and torchao."""
TARGET_X_OBSERVER = 5.0
"""Observers: at least this many times faster than torch's."""


QUICK: dict[str, object] = {"quant_sizes": "4K", "quant_obs_size": "4K", "quant_obs_batches": 1}
"""``bench --quick``: this suite's options for a few seconds on tiny inputs."""


PARTS = ("qdq", "observers")
"""``--quant-parts``: quantize/dequantize, and the observers."""


def _dtypes(s: str) -> list[str]:
    return parse_names(s, DTYPES, "dtype")


def _parts(s: str) -> list[str]:
    return parse_names(s, PARTS, "part")


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """Options of the quant suite."""
    g.add_argument(
        "--quant-sizes",
        type=cli_type(parse_sizes),
        default="16M",
        help="quantize/dequantize element counts (default 16M: 4096x4096)",
    )
    g.add_argument(
        "--quant-dtypes", type=cli_type(_dtypes), default=",".join(DTYPES), help="int8,uint8,int4 (default all)"
    )
    g.add_argument(
        "--quant-obs-size", type=cli_type(parse_size), default="64M", help="observer elements in all (default 64M)"
    )
    g.add_argument(
        "--quant-obs-batches", type=positive_int, default=4, help="batches the observer elements come in (default 4)"
    )
    g.add_argument(
        "--quant-parts",
        type=cli_type(_parts),
        default=",".join(PARTS),
        help="qdq (quantize/dequantize), observers (default both)",
    )


def shape_2d(n: int) -> tuple[int, int]:
    """The 2-D shape of about ``n`` elements: ``isqrt(n)`` rows (channels).

    Example:
        >>> shape_2d(1 << 24), shape_2d(10)
        ((4096, 4096), (3, 3))
    """
    r = max(1, math.isqrt(n))
    return r, max(1, n // r)


@contextmanager
def quiet() -> Iterator[None]:
    """torch's and torchao's deprecation and user warnings silenced inside (their quantized APIs warn)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", UserWarning)
        yield


def torchao_or_none() -> AoFns | None:
    """torchao's ``(quantize_affine, dequantize_affine)``, or None (with a note) where it does not import."""
    try:
        with quiet():
            from torchao.quantization.quant_primitives import dequantize_affine, quantize_affine
    except Exception as e:  # ImportError, or a torchao built for another torch
        print(f"bench quant: torchao is not importable ({type(e).__name__}: {e}); its column is left empty")
        return None
    return quantize_affine, dequantize_affine


def _finish(row: dict[str, Any], gb: float, sum_ms: float | None, x_target: float, of_sum: bool) -> None:
    """Bandwidth, speed-ups, fraction of sum() and the target verdict of a row."""
    ours = row["ours_ms"]
    row["ours_gbs"] = gb / (ours / 1e3)
    missed = []
    for k in ("torch", "torchao"):
        if row.get(f"{k}_ms") is not None:
            row[f"x_{k}"] = row[f"{k}_ms"] / ours
            if row[f"x_{k}"] < x_target:
                missed.append(k)
    if sum_ms is not None:
        row["sum_ms"] = sum_ms
        row["sum_gbs"] = gb / (sum_ms / 1e3)
        row["of_sum"] = sum_ms / ours
        if of_sum and row["of_sum"] < TARGET_OF_SUM:
            missed.append("sum")
    row["target_met"] = not missed
    row["target"] = "yes" if not missed else "no: " + ",".join(missed)


class _Case:
    """One quantize/dequantize case: the tensor, its qparams for each library, and the calls."""

    def __init__(
        self, torch: ModuleType | None, ao: AoFns | None, x: np.ndarray, dtype: str, per_channel: bool
    ) -> None:
        self.x, self.dtype, self.per_channel = x, dtype, per_channel
        self.axis = 0 if per_channel else None
        rows = x.shape[0]
        if per_channel:
            mn, mx = x.min(axis=1), x.max(axis=1)
        else:
            mn, mx = np.float32(x.min()), np.float32(x.max())
        self.scale, self.zp = bitnet_go.choose_qparams(mn, mx, dtype)  # type: ignore[arg-type]
        self.q = bitnet_go.quantize(x, dtype, scale=self.scale, zero_point=self.zp, axis=self.axis)  # type: ignore[arg-type]
        self.torch_q: Callable[[], Any] | None = None
        self.torch_dq: Callable[[], Any] | None = None
        self.ao_q: Callable[[], Any] | None = None
        self.ao_dq: Callable[[], Any] | None = None
        self.note = ""
        self.same: bool | None = None
        if torch is None:
            return
        xt = torch.from_numpy(x)
        tdt = {"int8": torch.qint8, "uint8": torch.quint8, "int4": torch.quint4x2}[dtype]
        shift = 8 if dtype == "int4" else 0  # quint4x2 is [0, 15]: our int4 with the zero point up 8
        with quiet():
            if per_channel:
                ts = torch.from_numpy(self.scale.astype(np.float64))
                tz = torch.from_numpy(self.zp.astype(np.int64) + shift)
                self.torch_q = partial(torch.quantize_per_channel, xt, ts, tz, 0, tdt)
            else:
                self.torch_q = partial(
                    torch.quantize_per_tensor, xt, float(self.scale[0]), int(self.zp[0]) + shift, tdt
                )
            try:
                tq = self.torch_q()
                self.torch_dq = tq.dequantize
                ti = tq.int_repr().numpy().ravel()
                ours = self.q.packed ^ np.uint8(0x88) if shift else self.q.int_repr().ravel().view(np.uint8)
                self.same = bool(np.array_equal(ours, ti.view(np.uint8)))
            except (NotImplementedError, RuntimeError) as e:  # no per-channel quint4x2
                self.torch_q = None
                self.note = f"torch: {type(e).__name__} for {'per channel' if per_channel else 'per tensor'} {tdt}"
        if ao is None:
            return
        quantize_affine, dequantize_affine = ao
        block = (1, x.shape[1]) if per_channel else tuple(x.shape)
        s = torch.from_numpy(self.scale.reshape(rows, 1) if per_channel else self.scale.reshape(1, 1))
        z = torch.from_numpy(self.zp.reshape(rows, 1) if per_channel else self.zp.reshape(1, 1))
        odt = torch.uint8 if dtype == "uint8" else torch.int8
        lo, hi = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7)}[dtype]
        with quiet():
            self.ao_q = partial(quantize_affine, xt, block, s, z, odt, lo, hi)
            aq = self.ao_q()
            self.ao_dq = partial(dequantize_affine, aq, block, s, z, odt, lo, hi)
            if self.same is None:
                self.same = bool(np.array_equal(aq.numpy(), self.q.int_repr()))


def _run_qdq(
    torch: ModuleType | None, ao: AoFns | None, args: argparse.Namespace, table: Table, eng: str | None
) -> None:
    rng = np.random.default_rng(0)
    dtypes = _dtypes(args.quant_dtypes)
    for n in parse_sizes(args.quant_sizes):
        shape = shape_2d(n)
        x = rng.standard_normal(shape, dtype=np.float32)
        gb = x.nbytes / 1e9
        xt = torch.from_numpy(x) if torch else None
        sums: dict[int, float] = {}
        for dtype in dtypes:
            for per_channel in (False, True):
                case = _Case(torch, ao, x, dtype, per_channel)
                for th in parse_threads(args.threads):
                    bitnet_go.set_num_threads(th)
                    if torch:
                        torch.set_num_threads(th)
                        if th not in sums:
                            sums[th] = median(timeit(xt.sum, repeat=args.repeat)) * 1e3  # type: ignore[union-attr]
                    for op in QDQ_OPS:
                        table.start(f"{op} {dtype} {'per channel' if per_channel else 'per tensor'} "
                                    f"{shape[0]}x{shape[1]} thr={th}")  # fmt: skip
                        row: dict[str, Any] = {
                            "op": op,
                            "dtype": dtype,
                            "scheme": "per_channel" if per_channel else "per_tensor",
                            "shape": f"{shape[0]}x{shape[1]}",
                            "n": x.size,
                            "threads": th,
                            "engine": eng,
                            "same": case.same,
                            "note": case.note,
                        }
                        if op == "quantize":
                            ours = partial(bitnet_go.quantize, x, dtype, scale=case.scale, zero_point=case.zp,
                                           axis=case.axis)  # fmt: skip
                            theirs, ao_fn = case.torch_q, case.ao_q
                        elif op == "dequantize":
                            ours, theirs, ao_fn = case.q.dequantize, case.torch_dq, case.ao_dq
                        else:  # into a kept buffer: no page faults (torch and torchao have no out=)
                            ours = partial(case.q.dequantize, out=np.empty(x.shape, np.float32))
                            theirs, ao_fn = case.torch_dq, case.ao_dq
                        time_into(row, "ours", ours, args.repeat)
                        with quiet():
                            if theirs is not None:
                                time_into(row, "torch", theirs, args.repeat)
                            if ao_fn is not None:
                                time_into(row, "torchao", ao_fn, args.repeat)
                        _finish(row, gb, sums.get(th), TARGET_X_TORCH, of_sum=True)
                        table.add(row)


def _observers(torch: ModuleType | None) -> list[tuple[str, Callable[[], Any], Callable[[], Any] | None, bool]]:
    """(name, our observer factory, torch's or None, per channel) of the observer part."""
    out: list[tuple[str, Callable[[], Any], Callable[[], Any] | None, bool]] = []
    tq = torch.ao.quantization if torch else None
    out.append(("MinMaxObserver", bq.MinMaxObserver, tq.MinMaxObserver if tq else None, False))
    out.append(("HistogramObserver", bq.HistogramObserver, tq.HistogramObserver if tq else None, False))
    theirs = partial(tq.PerChannelMinMaxObserver, ch_axis=0) if tq else None
    out.append(("PerChannelMinMaxObserver", partial(bq.PerChannelMinMaxObserver, ch_axis=0), theirs, True))
    return out


def _observe(make: Callable[[], Any], batches: list[Any]) -> tuple[Any, Any]:
    """A fresh observer fed every batch; its qparams."""
    obs = make()
    for b in batches:
        obs(b)
    return obs.calculate_qparams()


def _run_observers(torch: ModuleType | None, args: argparse.Namespace, table: Table) -> None:
    rng = np.random.default_rng(1)
    total = parse_size(args.quant_obs_size)
    nb = max(1, args.quant_obs_batches)
    shape = shape_2d(max(1, total // nb))
    # batches of different spread, so the histogram's range grows (torch re-bins then, as we do)
    batches = [rng.standard_normal(shape, dtype=np.float32) * np.float32(1 + 0.25 * i) for i in range(nb)]
    tbatches = [torch.from_numpy(b) for b in batches] if torch else []
    gb = sum(b.nbytes for b in batches) / 1e9
    for name, ours_make, torch_make, per_channel_obs in _observers(torch):
        same = None
        if torch_make is not None:
            with quiet():
                s1, z1 = _observe(ours_make, batches)
                s2, z2 = _observe(torch_make, tbatches)
            same = bool(np.array_equal(s1, s2.numpy().astype(np.float32)) and np.array_equal(z1, z2.numpy()))
        for th in parse_threads(args.threads):
            table.start(f"{name} {nb} batches of {shape[0]}x{shape[1]} thr={th}")
            bitnet_go.set_num_threads(th)
            row: dict[str, Any] = {
                "op": name,
                "dtype": "uint8",
                "scheme": "per_channel" if per_channel_obs else "per_tensor",
                "shape": f"{nb}x{shape[0]}x{shape[1]}",
                "n": nb * shape[0] * shape[1],
                "threads": th,
                "same": same,
                "note": "",
            }
            time_into(row, "ours", partial(_observe, ours_make, batches), args.repeat)
            sum_ms = None
            if torch_make is not None:
                torch.set_num_threads(th)  # type: ignore[union-attr]
                with quiet():
                    time_into(row, "torch", partial(_observe, torch_make, tbatches), max(3, args.repeat // 2))
                sum_ms = median(timeit(lambda: [b.sum() for b in tbatches], repeat=args.repeat)) * 1e3
            _finish(row, gb, sum_ms, TARGET_X_OBSERVER, of_sum=False)
            table.add(row)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the suite and print its table; returns the rows."""
    torch = torch_or_none()
    ao = torchao_or_none() if torch else None
    parts = set(_parts(args.quant_parts))
    nth = len(parse_threads(args.threads))
    ndt = len(_dtypes(args.quant_dtypes))
    total = ("qdq" in parts) * len(parse_sizes(args.quant_sizes)) * ndt * 2 * nth * len(QDQ_OPS)
    total += ("observers" in parts) * len(_observers(None)) * nth
    table = Table(_TITLE, _COLUMNS, total=total, notes=_NOTES)
    with restored_threads(torch), engine(torch, "fbgemm") as eng:
        if "qdq" in parts:
            _run_qdq(torch, ao, args, table, eng)
        if "observers" in parts:
            _run_observers(torch, args, table)
    if torch is not None and ao is None:
        print("bench quant: torchao column empty (torchao not importable)")
    return table.done()


_TITLE = "quantize/dequantize/observers vs torch and torchao (median ms of the timed calls, range = their min-max)"
_COLUMNS = [
    ("op", "op", "s", "quantize, dequantize (a new array), dequantize(out=) (into a kept buffer), or an observer"),
    ("dtype", "dtype", "s", "quantized element type"),
    ("scheme", "scheme", "s", "one scale per tensor or per channel (row)"),
    ("threads", "thr", "d", "threads, the same for every library"),
    ("ours_ms", "ours ms", ".2f", "bitnet_go (bitnet_go.quantize, .dequantize, bitnet_go.quantization observers)"),
    ("ours_spread", "range", "s", "min-max ms of the timed calls, next to each median"),
    ("torch_ms", "torch ms", ".2f", "torch.quantize_per_tensor/_per_channel, .dequantize, torch.ao observers"),
    ("torch_spread", "range", "s", ""),
    ("torchao_ms", "torchao ms", ".2f", "torchao quantize_affine / dequantize_affine"),
    ("torchao_spread", "range", "s", ""),
    ("x_torch", "x torch", ".1f", "torch ms / ours ms: how many times faster we are"),
    ("x_torchao", "x ao", ".1f", "torchao ms / ours ms"),
    ("ours_gbs", "ours GB/s", ".1f", "float32 data per second (input of quantize, output of dequantize)"),
    ("sum_gbs", "sum GB/s", ".1f", "torch x.sum()'s read bandwidth: the memory ceiling"),
    ("of_sum", "of sum", ".2f", "our GB/s as a fraction of sum()'s"),
    ("same", "same", "", "our integers (observers: qparams) bit-identical to torch's (or torchao's)"),
    ("target", "target", "s", "the targets below met, or which one was missed"),
    ("note", "note", "s", ""),
]
_NOTES = [
    f"targets: quantize/dequantize >= {TARGET_OF_SUM} of sum() bw and >= {TARGET_X_TORCH:g}x torch and torchao;",
    f"observers >= {TARGET_X_OBSERVER:g}x torch.",
]

"""``bench linear``: ternary linear layers (W1.58A8 GEMV/GEMM) against bitnet.cpp's I2_S kernel.

For each weight shape ``rows x k`` (output features x input features), batch
size N and thread count, in one process:

- ours: ``conv2d_quantized(x, w, act_bits=8)`` with ``x`` of shape (N, k, 1, 1)
  float32 and ``w`` a per-tensor I2_S ``TernaryTensor`` of shape (rows, k, 1, 1)
  (``algorithm="auto"``; the kernel the planner picked is shown). The call
  includes quantizing ``x`` to int8 and scaling the int32 sums to float32;
- bitnet.cpp: its kernel ``ggml_vec_dot_i2_i8_s`` (microsoft/BitNet
  ``src/ggml-bitnet-mad.cpp``, AVX2) on the same weights
  (:meth:`TernaryTensor.to_bitnet_cpp_bytes` without its tail) and the same
  int8 activations (quantized once, outside its timing), driven as
  bitnet.cpp's own GEMV/GEMM drivers drive it (one call per weight row for
  N = 1; blocks of 128 weight rows x 4 activations otherwise), the weight rows
  split across OpenMP threads. It is built out of tree by
  ``tools/bitnet_cpp/build.sh BITNET_SRC`` (``make bitnet-cpp
  BITNET_SRC=...``) into ``libbitnet_cpp_peer.so``, found through
  ``--bitnet-cpp PATH`` or ``$BITNET_CPP_PEER``; without it the bitnet.cpp
  columns are ``-``.

Before timing, each shape and batch is checked once: bitnet.cpp's int32 dot
products (its raw sums of codes 0/1/2 times the activations, minus each
activation row's sum) must equal ours (``same``). The input holds integers in
[-127, 127] with 127 in every sample and the weight's scale is 1, so the
activation scale is 1, the int8 activations equal ``x`` and our float32
outputs are the int32 sums exactly.

Timing alternates: ``--linear-rounds`` rounds of one block of calls of each
library (``--repeat`` calls after a warm-up call, and at least 20 ms of calls),
with a pause (``_common.PAUSE_S``) before each block so that neither library's idle worker
threads (OpenMP's, Go's) spin into the other's block.

Reported: median ms with the spread (min-max over all timed calls), GOP/s
(2*N*rows*k), ``x bnc`` = bitnet.cpp's time over ours (above 1: we are
faster; ``x bnc min``: the same for the fastest calls, steadier on a busy
machine, where the median can be anybody's), the speed-up of each library at this thread count over its 1-thread
time (``scale``), and whether the targets of issue 15 are met: ``x bnc`` at
least 1.5, and for more than one thread on a weight of 4 MiB or more, ours at
least 1.7x faster than at 1 thread.

Example:
    $ tools/bitnet_cpp/build.sh ~/src/BitNet
    $ BITNET_CPP_PEER=build/bitnet_cpp/libbitnet_cpp_peer.so python -m bitnet_go bench linear --threads 1,2
    $ python -m bitnet_go bench linear --linear-shapes 256x512 --linear-batches 1,4 --repeat 2
"""

from __future__ import annotations

import argparse
import ctypes
import os
import struct
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import bitnet_go

from ..diagnostics import conv2d_with_info
from ._common import (
    MAX_ELEMENTS,
    Table,
    alternate,
    cli_type,
    geomean,
    parse_batches,
    parse_shapes,
    parse_threads,
    positive_int,
    put_timings,
    restored_threads,
    size_text,
)
from .conv_cuda import run_linear

SHAPES: list[tuple[int, int]] = [(4096, 4096), (11008, 4096), (4096, 11008), (2560, 6912)]
"""Default weight shapes (rows = output features, k = input features): LLaMA-7B's
attention and MLP projections, and BitNet b1.58 2B's 2560x6912."""

BATCHES: list[int] = [1, 8, 64]
"""Default batch sizes N."""

TARGET_X_PEER = 1.5
"""At least this many times faster than bitnet.cpp's kernel (its time over ours)."""
TARGET_SCALING = 1.7
"""More than one thread: ours at least this many times faster than at 1 thread ..."""
SCALING_MIN_BYTES = 4 << 20
"""... on weights of at least this many packed bytes (4 MiB: 4096x4096 at 2 bits)."""

PEER_ENV = "BITNET_CPP_PEER"
"""Environment variable naming ``libbitnet_cpp_peer.so`` when ``--bitnet-cpp`` is not given."""

_BUILD_HINT = (
    "bitnet.cpp columns empty: build its kernel with tools/bitnet_cpp/build.sh BITNET_SRC "
    "(a microsoft/BitNet checkout) and pass --bitnet-cpp build/bitnet_cpp/libbitnet_cpp_peer.so "
    f"or set {PEER_ENV}"
)

_TITLE = "bench linear: W1.58A8 linear layers, ours vs bitnet.cpp I2_S (ggml_vec_dot_i2_i8_s)"
_COLUMNS = [
    ("shape", "rows x k", "s", "weight shape: output rows x input features (k)"),
    ("n", "N", "d", "batch size (activation rows)"),
    ("threads", "thr", "d", "threads, the same for both"),
    ("kernel", "kernel", "s", "algorithm:kernel our planner picked"),
    ("ours_ms", "ours ms", ".3f", "conv2d_quantized(act_bits=8) on a 1x1 layer (a linear layer), median ms"),
    ("ours_spread", "range", "s", "min-max ms of all timed calls, next to each median"),
    ("ours_gops", "GOP/s", ".0f", "2*N*rows*k / 1e9 per second"),
    ("peer_ms", "bnc ms", ".3f", "bitnet.cpp's I2_S kernel (ggml_vec_dot_i2_i8_s) on the same weight, median ms"),
    ("peer_spread", "range", "s", ""),
    ("peer_gops", "GOP/s", ".0f", ""),
    ("x_peer", "x bnc", ".2f", "bnc ms / ours ms: above 1, ours is faster"),
    ("x_peer_min", "x bnc min", ".2f", "the same ratio of the fastest calls"),
    ("ours_scaling", "scale", ".2f", "our 1-thread ms / this row's ms"),
    ("peer_scaling", "bnc scale", ".2f", "bitnet.cpp's 1-thread ms / this row's ms"),
    ("same", "same", "", "both give identical integer dot products"),
    ("target", "target", "s", "the targets met (x bnc, scale), or which was missed; ? without bitnet.cpp"),
]


QUICK: dict[str, object] = {"linear_shapes": "128x128", "linear_batches": "1", "linear_rounds": 1}
"""``bench --quick``: this suite's options for a few seconds on tiny inputs."""

DEVICES = ("cpu", "cuda")
"""``--device`` values this suite runs on (``cuda``: :func:`bitnet_go.bench.conv_cuda.run_linear`)."""


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """Options of the linear suite."""
    g.add_argument(
        "--linear-shapes",
        type=cli_type(parse_shapes),
        default=",".join(f"{r}x{k}" for r, k in SHAPES),
        help="weight shapes rows x k (default: 4096x4096,11008x4096,4096x11008,2560x6912); k a multiple of 128",
    )
    g.add_argument(
        "--linear-batches",
        type=cli_type(parse_batches),
        default=",".join(map(str, BATCHES)),
        help="batch sizes N (default 1,8,64)",
    )
    g.add_argument(
        "--linear-rounds", type=positive_int, default=3, help="alternating rounds of timed blocks (default 3)"
    )
    g.add_argument(
        "--bitnet-cpp",
        metavar="PATH",
        default=None,
        help=f"libbitnet_cpp_peer.so from tools/bitnet_cpp/build.sh (default: ${PEER_ENV})",
    )


def check_args(args: argparse.Namespace) -> None:
    """Refuse (ValueError, ``--option: why``) what would fail only once the suite runs: on the CPU a
    ``k`` off bitnet.cpp's group of 128, an input over :data:`MAX_ELEMENTS`, a ``--bitnet-cpp`` that
    does not load.

    Example:
        >>> import argparse
        >>> a = argparse.Namespace(linear_shapes="128x100", linear_batches="1", bitnet_cpp=None, device="cpu")
        >>> check_args(a)
        Traceback (most recent call last):
        ValueError: --linear-shapes: k must be a multiple of 128 (bitnet.cpp's I2_S group), got 128x100
    """
    shapes, batches = parse_shapes(args.linear_shapes), parse_batches(args.linear_batches)
    for rows, k in shapes:
        if max(batches) * k > MAX_ELEMENTS:
            raise ValueError(
                f"--linear-batches: batch {max(batches)} of {rows}x{k} is over {size_text(MAX_ELEMENTS)} input elements"
            )
    if getattr(args, "device", "cpu") == "cuda":
        return
    for rows, k in shapes:
        if k % 128:
            raise ValueError(f"--linear-shapes: k must be a multiple of 128 (bitnet.cpp's I2_S group), got {rows}x{k}")
    if args.bitnet_cpp is not None:
        try:
            Peer(args.bitnet_cpp)
        except (OSError, AttributeError) as e:
            raise ValueError(f"--bitnet-cpp: cannot load {args.bitnet_cpp} ({e})") from None


def gop(n: int, rows: int, k: int) -> float:
    """Giga-operations of one call: 2*N*rows*k / 1e9 (a multiply and an add per weight and sample).

    Example:
        >>> gop(1, 4096, 4096)
        0.033554432
    """
    return 2 * n * rows * k / 1e9


class Peer:
    """bitnet.cpp's kernel through ``libbitnet_cpp_peer.so`` (tools/bitnet_cpp/peer.cpp)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(Path(path).resolve())
        lib = ctypes.CDLL(self.path)
        fn = lib.peer_gemm_i2_i8
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 4 + [ctypes.c_void_p]
        fn.restype = ctypes.c_int
        self._fn = fn
        cfg = lib.peer_config
        cfg.argtypes = [ctypes.POINTER(ctypes.c_int)] * 3
        cfg.restype = ctypes.c_int
        rb, cb, ps = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        qk = cfg(ctypes.byref(rb), ctypes.byref(cb), ctypes.byref(ps))
        self.config = {"qk": qk, "row_block": rb.value, "col_block": cb.value, "parallel_size": ps.value}
        commit = Path(self.path).with_name("bitnet_commit.txt")
        self.commit = commit.read_text().strip() if commit.exists() else None
        self._keep: list[np.ndarray] = []

    def call(self, w: np.ndarray, act: np.ndarray, rows: int, threads: int, out: np.ndarray) -> None:
        """``out[n, r]`` = the kernel's raw sum over j of code(w[r, j]) * act[n, j] (codes 0, 1, 2)."""
        n, k = act.shape
        rc = self._fn(w.ctypes.data, act.ctypes.data, rows, k, n, threads, out.ctypes.data)
        if rc != 0:
            raise ValueError(f"bitnet.cpp peer: bad arguments rows={rows} k={k} n={n} threads={threads}")

    def dots(self, w: np.ndarray, act: np.ndarray, rows: int, threads: int = 1) -> np.ndarray:
        """The int32 dot products ``act @ values.T`` (N, rows) from the kernel's sums."""
        out = np.empty((act.shape[0], rows), np.float32)
        self.call(w, act, rows, threads, out)
        return out.astype(np.int64) - act.astype(np.int64).sum(axis=1, keepdims=True)


def load_peer(path: str | None) -> Peer | None:
    """The peer library at ``path`` (or ``$BITNET_CPP_PEER``), or None (with a note) when there is none.

    Example:
        >>> load_peer("/nonexistent/libbitnet_cpp_peer.so") is None
        bench linear: cannot load /nonexistent/libbitnet_cpp_peer.so (...); bitnet.cpp columns empty: ...
        True
    """
    path = path or os.environ.get(PEER_ENV) or ""
    if not path:
        print(f"bench linear: {_BUILD_HINT}")
        return None
    try:
        return Peer(path)
    except (OSError, AttributeError) as e:
        print(f"bench linear: cannot load {path} ({e}); {_BUILD_HINT}")
        return None


def make_case(rows: int, k: int, n: int, seed: int = 0) -> tuple[bitnet_go.TernaryTensor, np.ndarray, np.ndarray]:
    """A random ternary weight (rows, k, 1, 1) with scale 1, its bitnet.cpp rows, and an input (N, k, 1, 1).

    The input holds integers in [-127, 127] with 127 in every sample, so that
    ``act_bits=8`` quantizes it to itself (activation scale 1) and our float32
    outputs are the int32 dot products exactly.

    Example:
        >>> w, wb, x = make_case(4, 128, 2)
        >>> w.shape, wb.nbytes, x.shape, float(np.abs(x).max(axis=(1, 2, 3)).min())
        ((4, 128, 1, 1), 128, (2, 128, 1, 1), 127.0)
    """
    if k % 128:
        raise ValueError(f"k must be a multiple of 128 (bitnet.cpp's I2_S group), got {k}")
    rng = np.random.default_rng(seed)
    vals = rng.integers(-1, 2, (rows, k)).astype(np.float32)
    vals[:, 0] = 1  # a non-zero value in every row
    raw = bitnet_go.quantize_i2s(vals.reshape(rows, k, 1, 1)).to_bitnet_cpp_bytes()
    data = raw[:-32] + struct.pack("<f", 1.0) + bytes(28)
    w = bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(data, (rows, k, 1, 1))
    wb = np.frombuffer(data[:-32], np.uint8)
    x = rng.integers(-127, 128, (n, k)).astype(np.float32)
    x[:, 0] = 127
    return w, wb, x.reshape(n, k, 1, 1)


def _target(row: dict[str, Any], weight_bytes: int) -> None:
    """Fill ``target`` and ``target_met`` (None when bitnet.cpp's time is unknown and nothing missed)."""
    missed, unknown = [], False
    if row.get("x_peer") is None:
        unknown = True
    elif row["x_peer"] < TARGET_X_PEER:
        missed.append(f"x bnc {row['x_peer']:.2f} < {TARGET_X_PEER}")
    if row["threads"] > 1 and weight_bytes >= SCALING_MIN_BYTES:
        s = row.get("ours_scaling")
        if s is None:
            unknown = True
        elif s < TARGET_SCALING:
            missed.append(f"scale {s:.2f} < {TARGET_SCALING}")
    if missed:
        row["target"], row["target_met"] = "no: " + "; ".join(missed), False
    elif unknown:
        row["target"], row["target_met"] = "?", None
    else:
        row["target"], row["target_met"] = "yes", True


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the suite; returns its rows (one per shape, batch size and thread count)."""
    if getattr(args, "device", "cpu") == "cuda":
        return run_linear(args, parse_shapes(args.linear_shapes), parse_batches(args.linear_batches))
    peer = load_peer(args.bitnet_cpp)
    if peer is not None:
        print(f"bench linear: bitnet.cpp peer {peer.path} (microsoft/BitNet {peer.commit}, {peer.config})")
    threads = parse_threads(args.threads)
    shapes, batches = parse_shapes(args.linear_shapes), parse_batches(args.linear_batches)
    table = Table(_TITLE, _COLUMNS, total=len(shapes) * len(batches) * len(threads))
    with restored_threads(None):
        for rows, k in shapes:
            for n in batches:
                w, wb, x = make_case(rows, k, n)
                act = np.ascontiguousarray(x.reshape(n, k).astype(np.int8))
                ours_fn = partial(bitnet_go.conv2d_quantized, x, w, act_bits=8)
                info = conv2d_with_info(x, w, act_bits=8)[1]
                kernel = info.algorithm if info.kernel is None else f"{info.algorithm}:{info.kernel}"
                same = None
                if peer is not None:
                    ours_out = ours_fn().reshape(n, rows).astype(np.int64)
                    same = all(np.array_equal(peer.dots(wb, act, rows, th), ours_out) for th in {1, max(threads)})
                base: dict[str, float] = {}
                for th in threads:
                    table.start(f"{rows}x{k} N={n} thr={th}")
                    bitnet_go.set_num_threads(th)
                    fns: dict[str, Callable[[], object]] = {"ours": ours_fn}
                    if peer is not None:
                        out = np.empty((n, rows), np.float32)
                        fns["peer"] = partial(peer.call, wb, act, rows, th, out)
                    ts = alternate(
                        fns, repeat=args.repeat * args.linear_rounds, rounds=args.linear_rounds, min_time=0.02
                    )
                    g = gop(n, rows, k)
                    row: dict[str, Any] = {
                        "shape": f"{rows}x{k}", "rows": rows, "k": k, "n": n, "threads": th,
                        "weight_bytes": wb.nbytes, "gop": g, "kernel": kernel, "same": same,
                    }  # fmt: skip
                    for name, t in ts.items():
                        put_timings(row, name, t)
                        ms = row[f"{name}_ms"]
                        row[f"{name}_gops"] = g / (ms / 1e3)
                        if th == 1:
                            base[name] = ms
                        elif name in base:
                            row[f"{name}_scaling"] = base[name] / ms
                    if "peer_ms" in row:
                        row["x_peer"] = row["peer_ms"] / row["ours_ms"]
                        row["x_peer_min"] = row["peer_min_ms"] / row["ours_min_ms"]
                    else:
                        row["note"] = _BUILD_HINT
                    _target(row, wb.nbytes)
                    table.add(row)
    rows_out = table.done()
    if peer is not None:
        _summary(rows_out)
    return rows_out


def _summary(rows: list[dict[str, Any]]) -> None:
    """Geomean of ``x bnc`` per thread count, with that of ``x bnc min`` (the fastest calls: on
    a shared machine the steadier of the two) and how many rows of 4 MiB or more missed the
    scaling target."""
    for th in sorted({r["threads"] for r in rows}):
        sub = [r for r in rows if r["threads"] == th and r.get("x_peer")]
        if sub:
            gm, gmin = geomean(r["x_peer"] for r in sub), geomean(r["x_peer_min"] for r in sub)
            line = (f"bench linear: {th} thread(s): x bnc geomean {gm:.2f} over {len(sub)} rows "
                    f"(>= {TARGET_X_PEER}); of the fastest calls {gmin:.2f}")  # fmt: skip
            big = [r for r in sub if th > 1 and r["weight_bytes"] >= SCALING_MIN_BYTES and r.get("ours_scaling")]
            if big:
                slow = sum(r["ours_scaling"] < TARGET_SCALING for r in big)
                line += f"; scaling < {TARGET_SCALING} on {slow} of {len(big)} rows"
            print(line)

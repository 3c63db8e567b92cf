"""TL1/TL2 tensors as bitnet.cpp's GGUF files store them: tiled by the kernel parameters of a model.

bitnet.cpp generates its lookup-table kernels per model (``utils/codegen_tl1.py``
/ ``codegen_tl2.py``) and records each weight shape's tiling in
``include/kernel_config.ini``: one section per shape with ``m`` (rows), ``k``
(columns), ``bm`` (rows per tile, BM), ``bk`` (columns per tile, BK) and
``bmm`` (rows per micro-tile, bm). Its converter
(``utils/convert-hf-to-gguf-bitnet.py``) lays a ternary weight out by those
numbers; :func:`tl1_bytes` and :func:`tl2_bytes` write the same bytes.

TL1 codes each pair of values along a row as ``3*a + b + 4`` (0..8), one
nibble; with ``by = 256 / bm`` columns per micro-tile, byte number
``((((((mb*(K/BK) + kb)*(BM/bm) + mi)*(BK/by) + kj)*(bm/16) + r16)*(by/4) + q)*16 + r``
holds, for row ``mb*BM + mi*bm + r16*16 + r``, the pairs starting at column
``kb*BK + kj*by + 4q`` (high nibble) and two columns later (low nibble):
``M*K/4`` bytes.

TL2 (``bm`` must be 32: ``by = 192 / bm = 6``) splits the columns into the
first ``K - K % BK`` (triplets) and the rest (pairs, tiled as TL1 with
``BK = 32, bm = 32, by = 4``). A triplet ``(a, b, c)`` is ``t = 9a + 3b + c``:
its magnitude a nibble, two triplets per byte as TL1 pairs; its sign one bit
(1: negative), 16 per little-endian uint16, the first in the top bit. Within
each micro-tile's ``bm`` bytes of nibbles (and of pairs) the second and third
groups of 8 bytes trade places. The parts follow one another (magnitudes,
signs, pairs), zero-padded to ``(K-256)*M/3*5/8 + 256*M/2*4/8`` bytes, the
size bitnet.cpp gives a TL2 tensor.
"""

from __future__ import annotations

import configparser
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._reader import PathLike


class Tiling(NamedTuple):
    """One section of ``kernel_config.ini``: the tiles of an ``m`` x ``k`` weight."""

    BM: int  # rows per tile ("bm" in the file)
    BK: int  # columns per tile ("bk")
    bm: int  # rows per micro-tile ("bmm")


def read_kernel_config(path: PathLike) -> dict[tuple[int, int], Tiling]:
    """The tilings of a bitnet.cpp ``kernel_config.ini``, keyed by ``(m, k)``.

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "kernel_config.ini")
        >>> _ = open(p, "w").write("[Kernels_0]\\nm = 256\\nk = 512\\nbm = 128\\nbk = 64\\nbmm = 32\\n")
        >>> read_kernel_config(p)
        {(256, 512): Tiling(BM=128, BK=64, bm=32)}
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such kernel config (bitnet.cpp's include/kernel_config.ini)")
    cp = configparser.ConfigParser()
    try:
        cp.read_string(p.read_text())
    except configparser.Error as e:
        raise ValueError(f"{p}: not an ini file ({e})") from None
    out: dict[tuple[int, int], Tiling] = {}
    for sec in cp.sections():
        try:
            m, k, bm_, bk, bmm = (int(cp.get(sec, key)) for key in ("m", "k", "bm", "bk", "bmm"))
        except (configparser.Error, ValueError) as e:
            raise ValueError(f"{p}: section [{sec}] needs integer m, k, bm, bk and bmm ({e})") from None
        out.setdefault((m, k), Tiling(bm_, bk, bmm))  # bitnet.cpp's converter takes the first match
    return out


def gguf_len(fmt: str, shape: Sequence[int]) -> int:
    """The bytes bitnet.cpp's converter writes for a TL1/TL2 weight of ``shape`` (rows, columns).

    Example:
        >>> gguf_len("tl1", (256, 512)), gguf_len("tl2", (256, 512))
        (32768, 30037)
    """
    m, k = shape
    if fmt == "tl1":
        return m * k // 4
    return (k - 256) * m // 3 * 5 // 8 + 256 * m // 2 * 4 // 8


def check(fmt: str, shape: Sequence[int], tilings: dict[tuple[int, int], Tiling], where: str = "") -> Tiling:
    """The tiling of a ``shape`` weight, checked against what the layout needs (``ValueError`` otherwise).

    Example:
        >>> check("tl1", (256, 512), {(256, 512): Tiling(128, 64, 32)})
        Tiling(BM=128, BK=64, bm=32)
        >>> check("tl1", (8, 8), {}, "w")
        Traceback (most recent call last):
        ValueError: w: shape (8, 8) has no section with m = 8, k = 8 in the kernel config
    """
    pre = f"{where}: " if where else ""
    if len(shape) != 2:
        raise ValueError(f"{pre}TL1/TL2 GGUF weights are 2-D, got shape {tuple(shape)}")
    m, k = int(shape[0]), int(shape[1])
    t = tilings.get((m, k))
    if t is None:
        raise ValueError(f"{pre}shape ({m}, {k}) has no section with m = {m}, k = {k} in the kernel config")
    BM, BK, bm = t  # noqa: N806
    need = [(BM > 0 and BK > 0 and bm > 0, "bm, bk and bmm > 0"), (m % BM == 0, "m % bm == 0"),
            (BM % bm == 0, "bm % bmm == 0")]  # fmt: skip
    if fmt == "tl1":
        by = 256 // bm if bm > 0 else 0
        need += [(bm % 16 == 0 and 256 % bm == 0, "bmm a divisor of 256 and a multiple of 16"),
                 (by % 4 == 0, "256 / bmm a multiple of 4"), (k % BK == 0, "k % bk == 0"),
                 (by > 0 and BK % by == 0, "bk % (256 / bmm) == 0")]  # fmt: skip
    else:
        two = k % BK if BK > 0 else 0
        need += [(bm == 32, "bmm == 32 (the converter pairs two triplets per byte: 192 / bmm == 6)"),
                 (BK % 24 == 0, "bk % 24 == 0"), (two % 32 == 0, "(k % bk) % 32 == 0"),
                 (two <= 256 and k >= 256, "k >= 256 and k % bk <= 256 (bitnet.cpp's TL2 size)")]  # fmt: skip
    bad = [what for ok, what in need if not ok]
    if bad:
        raise ValueError(
            f"{pre}{fmt} tiling {t} of the kernel config cannot lay out shape ({m}, {k}): needs {', '.join(bad)}"
        )
    return t


def _tiles(codes: np.ndarray, BM: int, bm: int, BK: int, by: int, per: int) -> np.ndarray:  # noqa: N803
    """``codes`` (rows, columns / per) in tile order: (row tile, column tile, micro-tile, micro column tile,
    row within the micro-tile, code within the micro column tile)."""
    m, n = codes.shape
    a = codes.reshape(m // BM, BM // bm, bm, n // (BK // per), BK // by, by // per)
    return a.transpose(0, 3, 1, 4, 2, 5)


def _swap_groups(rows: np.ndarray) -> np.ndarray:
    """Each row of ``bm`` bytes with its 8-byte groups 1 and 2 traded."""
    g = rows.reshape(*rows.shape[:-1], -1, 8).copy()
    g[..., [1, 2], :] = g[..., [2, 1], :]
    return g.reshape(rows.shape)


def _pairs(v: np.ndarray, BM: int, BK: int, bm: int, by: int, swap: bool) -> np.ndarray:  # noqa: N803
    codes = (3 * v[:, 0::2] + v[:, 1::2] + 4).astype(np.uint8)
    t = _tiles(codes, BM, bm, BK, by, 2)  # (..., bm, by/2)
    if not swap:  # TL1: 16 rows by (by/4) column pairs within the micro-tile
        s = t.shape
        t = t.reshape(*s[:4], bm // 16, 16, by // 4, 2).transpose(0, 1, 2, 3, 4, 6, 5, 7)
        return (t[..., 0] << 4 | t[..., 1]).reshape(-1)
    b = t[..., 0] << 4 | t[..., 1]  # (..., bm): by == 4, one byte per row
    return _swap_groups(b).reshape(-1)


def tl1_bytes(values: np.ndarray, tiling: Tiling) -> np.ndarray:
    """The TL1 bytes bitnet.cpp's converter writes for ternary ``values`` (int8, rows x columns), after
    :func:`check`.

    Example:
        >>> v = np.zeros((32, 256), np.int8)
        >>> b = tl1_bytes(v, Tiling(32, 256, 32))
        >>> b.size, int(b[0])
        (2048, 68)
    """
    BM, BK, bm = tiling  # noqa: N806
    return _pairs(np.asarray(values, np.int16), BM, BK, bm, 256 // bm, swap=False)


def tl2_bytes(values: np.ndarray, tiling: Tiling) -> np.ndarray:
    """The TL2 bytes bitnet.cpp's converter writes for ternary ``values`` (int8, rows x columns), after
    :func:`check`.

    Example:
        >>> v = np.ones((32, 256), np.int8)
        >>> tl2_bytes(v, Tiling(32, 96, 32)).size
        2048
    """
    BM, BK, bm = tiling  # noqa: N806
    v = np.asarray(values, np.int16)
    m, k = v.shape
    k3 = k - k % BK
    tri = 9 * v[:, 0:k3:3] + 3 * v[:, 1:k3:3] + v[:, 2:k3:3]
    mag = _tiles(np.abs(tri).astype(np.uint8), BM, bm, BK, 6, 3)  # (..., bm, 2)
    parts = [_swap_groups(mag[..., 0] << 4 | mag[..., 1]).reshape(-1)]
    # signs: per (tile, micro-tile, 24 columns) 8 triplets x bm rows, read as 16 x bm/2 bits
    neg = (tri < 0).astype(np.uint16)
    s = neg.reshape(m // BM, BM // bm, bm, k3 // BK, BK // 24, 8).transpose(0, 3, 1, 4, 5, 2)
    s = s.reshape(*s.shape[:4], 16, bm // 2)
    words = (s << np.arange(15, -1, -1, dtype=np.uint16)[:, None]).sum(axis=-2, dtype=np.uint16)
    parts.append(words.astype("<u2").view(np.uint8).reshape(-1))
    if k3 < k:
        parts.append(_pairs(v[:, k3:], BM, 32, 32, 4, swap=True))
    out = np.zeros(gguf_len("tl2", (m, k)), np.uint8)
    body = np.concatenate(parts)
    out[: body.size] = body
    return out

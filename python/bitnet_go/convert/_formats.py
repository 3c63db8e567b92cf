"""The ternary formats a checkpoint converts to, and the one adapter to the TernaryTensor API.

:func:`pack_as` and :func:`gguf_payload` are the only places that ask a
:class:`~bitnet_go.TernaryTensor` for a format or for GGUF bytes; the sizes a
writer must know before it writes (:func:`layout`) come from them too.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .._core import ops
from .._quantized import rows_of
from .._ternary import BITNET_CPP_TAIL, QTYPES, TernaryTensor, packed_len, quantize_i2s

FORMATS = ("i2_s", "tl1", "tl2", "tq1_0", "tq2_0")
"""What ``--format`` accepts."""

TQ_FORMATS = ("tq1_0", "tq2_0")
TQ_BLOCK = 256
"""TQ1_0/TQ2_0 store blocks of 256 values along a row: the last dimension must be a multiple."""

BITNET_CPP_FORMATS = ("i2_s", "tl1", "tl2")


def check_format(fmt: object) -> str:
    """``fmt`` checked against :data:`FORMATS`.

    Example:
        >>> check_format("tl2")
        'tl2'
    """
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def available(fmt: str) -> bool:
    """Whether this build's :class:`~bitnet_go.TernaryTensor` packs ``fmt``.

    Example:
        >>> available("i2_s")
        True
    """
    return fmt in QTYPES


def pack_as(t: TernaryTensor, fmt: str) -> TernaryTensor:
    """``t``'s values and scales packed as ``fmt`` (``t`` itself when it already is).

    Example:
        >>> pack_as(quantize_i2s(np.ones((2, 4), np.float32)), "tl1").qtype
        'tl1'
    """
    if t.qtype == fmt:
        return t
    if not available(fmt):
        raise NotImplementedError(f"TernaryTensor has no {fmt} yet (this build packs {', '.join(sorted(QTYPES))})")
    return t.to(fmt)  # type: ignore[arg-type]


def gguf_payload(t: TernaryTensor) -> np.ndarray:
    """``t``'s bytes exactly as a GGUF file stores them, as a 1-D uint8 array.

    ``TernaryTensor.to_gguf_bytes()`` where this build has it; before that, I2_S
    as bitnet.cpp stores it (``to_bitnet_cpp_bytes()``: the packed bytes, then a
    32-byte tail holding the float32 scale); other formats are a
    ``NotImplementedError``.

    Example:
        >>> gguf_payload(quantize_i2s(np.ones(128, np.float32))).size
        64
    """
    if hasattr(t, "to_gguf_bytes"):
        data = t.to_gguf_bytes()
    elif t.qtype == "i2_s":
        data = t.to_bitnet_cpp_bytes()
    else:
        raise NotImplementedError(
            f"GGUF bytes of a {t.qtype} tensor need TernaryTensor.to_gguf_bytes(), which this build lacks"
        )
    return np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1).view(np.uint8)


class Layout(NamedTuple):
    """The sizes of a tensor in a format, known before it is quantized."""

    packed: int  # bytes of TernaryTensor.packed
    scales: int  # entries of TernaryTensor.scales
    gguf: int  # bytes of gguf_payload (-1 when this build cannot write it)


@lru_cache(maxsize=256)
def layout(fmt: str, shape: tuple[int, ...], block_size: int | None, gguf: bool = False) -> Layout:
    """The sizes of a ``shape`` tensor packed as ``fmt``: from the format registry for I2_S/TL1/TL2,
    else measured once per (format, shape) on a tensor of zeros (the sizes do not depend on values).

    Example:
        >>> layout("i2_s", (4, 128), None, gguf=True)
        Layout(packed=128, scales=1, gguf=160)
    """
    if fmt in BITNET_CPP_FORMATS:
        plen = packed_len(math.prod(shape), fmt, rows_of(shape))  # type: ignore[arg-type]
        nb = ops.num_blocks(math.prod(shape), block_size)
        if not gguf:
            return Layout(plen, nb, -1)
        if fmt == "i2_s" and not hasattr(TernaryTensor, "to_gguf_bytes"):
            return Layout(plen, nb, plen + BITNET_CPP_TAIL)
    t = pack_as(quantize_i2s(np.zeros(shape, np.float32), block_size=block_size, device="cpu"), fmt)
    return Layout(t.packed.size, t.scales.size, gguf_payload(t).size if gguf else -1)
